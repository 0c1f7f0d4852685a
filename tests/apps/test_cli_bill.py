"""`neuronkit report RUN [--calibrate NEURON_LOG] [--json] [--html P]`: the compile bill first,
through neuronkit.apps.cli.main, on hand-written logs (no Neuron here)."""
from __future__ import annotations

import json

from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog

AS_NEURON = {"rules": ["static shapes"], "device": "cpu"}


def write(path, events: list[CompileEvent], **header) -> str:
    log = CompileLog(header={"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu",
                             "backend": "eager", **header}, path=path)
    for e in events:
        log.append(e)
    log.release()
    return str(path)


def run_log(tmp_path, as_neuron: bool = True, name: str = "forward") -> str:
    events = [CompileEvent(function=name, kind=kind, metrics={"dynamo": {"graph_op_count": ops}})
              for kind, ops in (("first", 200), ("backward", 300), ("recompile", 220))]
    events.append(CompileEvent(function="eager kernels", kind="kernels", kernels=6, forecast=True))
    extra = {"as_neuron": AS_NEURON} if as_neuron else {}
    return write(tmp_path / ("as-neuron.jsonl" if as_neuron else "plain.jsonl"), events, **extra)


def neuron_log(tmp_path, builds: int = 6) -> str:
    events = [CompileEvent(function="f", kind="first", neff_cache="compiled",
                           neff_compile_s=30.0 + 0.1 * ops,
                           metrics={"dynamo": {"graph_op_count": ops}})
              for ops in (100, 300, 500, 700, 900, 1100, 1300, 1500)[:builds]]
    return write(tmp_path / f"neuron-{builds}.jsonl", events, device="neuron", backend="neuron")


def test_an_as_neuron_log_opens_with_the_assumed_bill(tmp_path, capsys):
    assert main(["report", run_log(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Compile bill (a rehearsal on cpu under Neuron's compile rules")
    assert "priced (assumed)" in out and "would build 3 graphs (2 forward, 1 backward)" in out
    assert out.index("Compile bill") < out.index("neuronkit compile report")


def test_a_plain_log_has_no_bill_unless_calibrated(tmp_path, capsys):
    plain = run_log(tmp_path, as_neuron=False)
    assert main(["report", plain]) == 0
    assert "Compile bill" not in capsys.readouterr().out
    assert main(["report", plain, "--calibrate", neuron_log(tmp_path)]) == 0
    out = " ".join(capsys.readouterr().out.split())  # a long tmp path wraps the model line
    assert out.startswith("Compile bill (counted from a run on cpu")
    assert "priced (calibrated)" in out and "seconds = 30 + 0.1 * ops" in out
    assert "leave-one-out error" in out and "6 builds" in out


def test_a_short_calibration_log_is_exit_2_with_nothing_printed(tmp_path, capsys):
    assert main(["report", run_log(tmp_path), "--calibrate", neuron_log(tmp_path, 4)]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("neuronkit report: error: cannot calibrate on ")
    assert "holds 4 NEFF build(s)" in captured.err and "at least 5" in captured.err


def test_a_missing_or_foreign_calibration_log_is_exit_2(tmp_path, capsys):
    missing = tmp_path / "nope.jsonl"
    assert main(["report", run_log(tmp_path), "--calibrate", str(missing)]) == 2
    err = capsys.readouterr().err
    assert f"--calibrate {missing}" in err and "not found" in err
    foreign = tmp_path / "other.jsonl"
    foreign.write_text('{"hello": 1}\n')
    assert main(["report", run_log(tmp_path), "--calibrate", str(foreign)]) == 2
    assert "not a neuronkit compile log" in capsys.readouterr().err


def test_json_has_a_bill_key_where_there_is_a_bill(tmp_path, capsys):
    assert main(["report", run_log(tmp_path, as_neuron=False), "--json"]) == 0
    assert "bill" not in json.loads(capsys.readouterr().out)  # no bill: the shape of before
    hostile = "fwd\x1b[31m\u202e"
    assert main(["report", run_log(tmp_path, name=hostile), "--json",
                 "--calibrate", neuron_log(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert out.isascii()
    bill = json.loads(out)["bill"]
    assert bill["basis"] == "calibrated" and bill["graphs"] == 3 and bill["kernels"] == 6
    assert bill["rows"][0]["function"] == hostile  # kept in JSON, escaped (ASCII) on the wire
    assert bill["calibration"]["builds"] == 6
    assert bill["graph_s"] == sum(30.0 + 0.1 * ops for ops in (200, 300, 220))


def test_html_opens_with_the_calibrated_bill(tmp_path, capsys):
    page = tmp_path / "page.html"
    assert main(["report", run_log(tmp_path), "--html", str(page),
                 "--calibrate", neuron_log(tmp_path)]) == 0
    html = page.read_text()
    assert "<h2>Compile bill</h2>" in html and "priced (calibrated)" in html
    assert html.index("Compile bill") < html.index("<h2>Advice</h2>")
