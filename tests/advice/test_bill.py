"""compile_bill() and its views (text, JSON data, HTML fragment, the report page's section), on
hand-made logs shaped as a recorder with as_neuron writes them (no Neuron here)."""
from __future__ import annotations

import json

import pytest

from neuronkit.advice.bill import DEFAULT_KERNEL_COST_S, as_neuron_of, compile_bill
from neuronkit.advice.calibrate import calibrate
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.bill_text import bill_data, bill_html, bill_text
from neuronkit.views.report_page import report_page
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S

AS_NEURON = {"rules": ["static shapes", "eager kernels forecast", "backward graphs"],
             "device": "cpu"}
WHY = "Dynamic shapes detected: s0 in input x (mark_dynamic)"


def graph(function: str, kind: str = "first", ops: int | None = None, **metrics) -> CompileEvent:
    dynamo = {"graph_op_count": ops, "graph_node_count": ops + 9} if ops is not None else {}
    return CompileEvent(function=function, location=f"{function}.py:1", kind=kind,
                        metrics={"dynamo": dynamo, **metrics})


def kernels(n: int, forecast: bool = True) -> CompileEvent:
    return CompileEvent(function="eager kernels", kind="kernels", kernels=n, forecast=forecast,
                        ops={"aten::add.Tensor": n})


def log_of(events: list[CompileEvent], as_neuron: object = AS_NEURON) -> CompileLog:
    header = {"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu", "backend": "eager"}
    if as_neuron is not None:
        header["as_neuron"] = as_neuron
    log = CompileLog(header=header)
    for e in events:
        log.append(e)
    return log


def rehearsal() -> CompileLog:
    """forward: 2 graphs, their 2 backwards, a break; step: 1 graph; 7 + 5 forecast kernels;
    one refused graph; a limit hit and a failure (neither builds)."""
    return log_of([graph("forward", ops=300), graph("forward", "backward", ops=500),
                   kernels(7), graph("forward", "recompile", ops=320),
                   graph("forward", "backward", ops=540),
                   CompileEvent(function="forward", location="forward.py:1", kind="graph_break"),
                   graph("step", ops=40), kernels(5),
                   graph("dyn", ops=80, refused_on_neuron=WHY),
                   CompileEvent(function="forward", location="forward.py:1", kind="limit_hit"),
                   CompileEvent(function="forward", location="forward.py:1", kind="failed")])


def test_counts_per_kind_and_function_priced_at_the_stated_defaults():
    bill = compile_bill(rehearsal())
    assert (bill.forward, bill.backward, bill.graphs, bill.kernels, bill.graph_breaks,
            bill.refused) == (3, 2, 5, 12, 1, 1)
    rows = {r.function: r for r in bill.rows}
    assert (rows["forward"].forward, rows["forward"].backward, rows["forward"].graph_breaks) == (2, 2, 1)
    assert rows["eager kernels"].kernels == 12 and rows["dyn"].refused == 1
    assert rows["forward"].graph_s == 4 * DEFAULT_COMPILE_COST_S
    assert rows["dyn"].total_s == 0.0  # refused: would fail, not priced
    assert bill.graph_s == 5 * DEFAULT_COMPILE_COST_S
    assert bill.kernel_s == 12 * DEFAULT_KERNEL_COST_S
    assert bill.rows[0].function == "forward"  # the costliest first
    assert [(r.function, r.kind, r.why) for r in bill.refusals] == [("dyn", "first", WHY)]
    assert bill.kernels_forecast and bill.as_neuron == AS_NEURON and bill.device == "cpu"


def test_without_a_calibration_the_price_is_labelled_assumed():
    bill = compile_bill(rehearsal())
    assert bill.basis == "assumed" and bill.calibration is None
    assert bill.model.startswith(f"assumed: {DEFAULT_COMPILE_COST_S:g} s per graph "
                                 "(workloads/shapes.DEFAULT_COMPILE_COST_S)")
    assert f"{DEFAULT_KERNEL_COST_S:g} s per eager kernel" in bill.model
    text = bill_text(bill)
    assert text.startswith("Compile bill (a rehearsal on cpu under Neuron's compile rules")
    assert "not a measurement" in text and "priced (assumed)" in text
    assert "would build 5 graphs (3 forward, 2 backward) and 12 eager kernels (forecast)" in text
    assert "would fail on Neuron: 1 graph refused" in text and WHY in text
    assert "rules applied: static shapes, eager kernels forecast, backward graphs" in text
    total = 5 * DEFAULT_COMPILE_COST_S + 12 * DEFAULT_KERNEL_COST_S
    assert f"{total:,.0f} s" in text


def neuron_builds(a: float, b: float) -> CompileLog:
    events = [CompileEvent(function="f", kind="first", neff_cache="compiled",
                           neff_compile_s=a + b * ops, metrics={"dynamo": {"graph_op_count": ops}})
              for ops in (100, 250, 400, 800, 1200, 2000)]
    events.append(CompileEvent(function="k", kind="kernels", kernels=4, duration_s=3.0))
    return log_of(events, as_neuron=None)


def test_a_calibrated_bill_prices_each_graph_by_the_fitted_model():
    a, b = 10.0, 0.5
    cal = calibrate(neuron_builds(a, b), source="trn2-run.jsonl")
    log = rehearsal()
    log.append(graph("noops"))  # no op count: priced at the calibration's mean build
    bill = compile_bill(log, cal)
    rows = {r.function: r for r in bill.rows}
    assert rows["forward"].graph_s == pytest.approx(4 * a + b * (300 + 500 + 320 + 540))
    assert rows["step"].graph_s == pytest.approx(a + b * 40)
    assert rows["noops"].graph_s == pytest.approx(cal.mean_s) and bill.priced_at_mean == 1
    assert bill.kernel_cost_s == pytest.approx(3.0 / 4)
    assert bill.basis == "calibrated" and bill.graph_cost_s is None
    assert bill.model.startswith("calibrated on trn2-run.jsonl: seconds = 10 + 0.5 * ops")
    assert "measured over 4 kernels" in bill.model
    text = bill_text(bill)
    assert "priced (calibrated)" in text and "leave-one-out error" in text
    assert "1 graph had no ops count: priced at the calibration's mean build" in text
    assert "assumed" not in text


def test_kernels_stay_assumed_when_the_calibration_log_measured_none():
    log = neuron_builds(10.0, 0.5)
    log.events = [e for e in log.events if e.kind != "kernels"]
    bill = compile_bill(rehearsal(), calibrate(log))
    assert bill.kernel_cost_s == DEFAULT_KERNEL_COST_S
    assert "eager kernels assumed: 2 s per eager kernel" in bill.model


def test_a_log_not_recorded_as_neuron_has_no_rehearsal_facts():
    log = log_of([graph("f", ops=10)], as_neuron=None)
    assert as_neuron_of(log) is None
    bill = compile_bill(log)
    assert bill.as_neuron is None
    assert bill_text(bill).startswith("Compile bill (counted from a run on cpu")
    assert as_neuron_of(log_of([], as_neuron="yes")) == {}  # present, with no facts


HOSTILE = "fwd\x1b[31m<script>alert(1)</script>\u202e"


def test_log_values_are_escaped_in_text_json_and_html():
    hostile = {"rules": ["\x1b]0;owned\x07rule"], "device": "<b>cpu</b>\x1b[2J"}
    log = log_of([graph(HOSTILE, ops=5), graph("g", ops=5, refused_on_neuron=HOSTILE)],
                 as_neuron=hostile)
    bill = compile_bill(log)
    text = bill_text(bill)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "<script>alert(1)</script>" in text  # text stays readable, only controls go
    page = bill_html(bill)
    assert "<script>" not in page and "&lt;script&gt;" in page and "<b>cpu" not in page
    assert "\x1b" not in page
    dumped = json.dumps(bill_data(bill), ensure_ascii=True)
    assert dumped.isascii() and "\\u001b" in dumped  # JSON keeps the value, escaped


def test_json_shape():
    data = json.loads(json.dumps(bill_data(compile_bill(rehearsal())), ensure_ascii=True))
    for key in ("basis", "model", "graph_cost_s", "kernel_cost_s", "kernel_basis",
                "kernels_forecast", "device", "as_neuron", "forward", "backward", "graphs",
                "kernels", "graph_breaks", "refused", "graph_s", "kernel_s", "total_s", "rows",
                "refusals", "calibration", "summary"):
        assert key in data, key
    assert data["graphs"] == 5 and data["calibration"] is None and data["basis"] == "assumed"
    assert set(data["rows"][0]) == {"function", "location", "forward", "backward", "kernels",
                                    "graph_breaks", "refused", "graph_s", "kernel_s", "total_s"}
    assert data["refusals"] == [{"function": "dyn", "kind": "first", "why": WHY}]
    assert data["total_s"] == pytest.approx(data["graph_s"] + data["kernel_s"])
    assert data["summary"][0].startswith("Compile bill")


def test_the_report_page_opens_with_the_bill_of_an_as_neuron_log():
    page = report_page(rehearsal())
    assert "<h2>Compile bill</h2>" in page
    assert page.index("<h2>Compile bill</h2>") < page.index("<h2>Advice</h2>")
    assert "priced (assumed)" in page
    assert "<h2>Compile bill</h2>" not in report_page(log_of([graph("f", ops=1)], as_neuron=None))
    hostile = log_of([graph(HOSTILE, ops=5)])
    assert "<script>alert" not in report_page(hostile)
