"""Issue 37, items 4 and 5: every total names its source (Dynamo compile, NEFF build, eager-kernel
build) and says whether it sums the ranks or counts the busiest one; a synthetic log (its header
says ``"synthetic": true``, or its ``torch_neuronx`` is the test fake) says so in every view."""
from __future__ import annotations

import dataclasses
import json
import re

import pytest
from matplotlib.markers import MarkerStyle

from helpers.logs import make_log
from helpers.paths import ROOT
from neuronkit.advice.diagnose import diagnose
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import is_synthetic, synthetic_reason
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log
from neuronkit.views import charts
from neuronkit.views.chart_layout import KEY_SYMBOLS
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.html import chart_key_html
from neuronkit.views.report_json import report_data
from neuronkit.views.text import format_report, format_summary

DATA = ROOT / "notebooks" / "data"
NEURON_SAMPLE = DATA / "sample_neuron_log.jsonl"   # synthetic: made through the test fake
CPU_SAMPLE = DATA / "sample_compile_log.jsonl"     # recorded on CPU


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def titles(fig) -> list[str]:
    return [ax.get_title() for ax in fig.axes]


# -- the predicate -------------------------------------------------------------------------------

@pytest.mark.parametrize("header, why", [
    ({"synthetic": True}, '"synthetic": true'),
    ({"synthetic": "true"}, '"synthetic": true'),
    ({"torch_neuronx": "fake (tests/neuron_fake)"}, "test fake"),
    ({"torch_neuronx": "Fake 0.1.0"}, "test fake"),
])
def test_a_header_that_says_synthetic_is_synthetic(header, why):
    assert is_synthetic(header) and why in synthetic_reason(header)


@pytest.mark.parametrize("header", [{}, {"synthetic": False}, {"synthetic": "no"},
                                    {"torch_neuronx": "2.13.3.0"}, {"torch_neuronx": None},
                                    None, ["synthetic"]])
def test_a_measured_or_unreadable_header_is_not_synthetic(header):
    assert not is_synthetic(header) and synthetic_reason(header) == ""


def test_the_shipped_samples_are_told_apart():
    sample = open_log(NEURON_SAMPLE)
    assert is_synthetic(sample.header)
    assert "synthetic" in synthetic_reason(sample.header) and "fake" in synthetic_reason(sample.header)
    assert not is_synthetic(open_log(CPU_SAMPLE).header)


# -- synthetic in every view ---------------------------------------------------------------------

def test_the_text_report_says_synthetic_on_its_first_line():
    report = format_report(open_log(NEURON_SAMPLE))
    assert report.splitlines()[0].startswith("neuronkit compile report (SYNTHETIC, not measured: ")
    assert format_summary(open_log(NEURON_SAMPLE)).splitlines()[0].startswith("SYNTHETIC")
    measured = format_report(open_log(CPU_SAMPLE))
    assert "SYNTHETIC" not in measured and "SYNTHETIC" not in format_summary(open_log(CPU_SAMPLE))


def test_the_json_report_says_synthetic_and_why():
    data = report_data(open_log(NEURON_SAMPLE))
    assert data["synthetic"] is True
    assert data["synthetic_reason"] == synthetic_reason(open_log(NEURON_SAMPLE).header)
    measured = report_data(open_log(CPU_SAMPLE))
    assert measured["synthetic"] is False and measured["synthetic_reason"] is None


def test_the_chart_titles_say_synthetic():
    log = open_log(NEURON_SAMPLE)
    for fig in (charts.timeline(log), charts.graph_growth(log), charts.dashboard_chart(log),
                charts.timeline(CompileLog(header=log.header))):  # an empty chart too
        assert all(t.startswith("SYNTHETIC") for t in titles(fig)), titles(fig)
    measured = open_log(CPU_SAMPLE)
    assert not any("SYNTHETIC" in t for t in titles(charts.timeline(measured)))


def test_the_chrome_trace_metadata_says_synthetic(tmp_path):
    trace = json.loads(write_chrome_trace(open_log(NEURON_SAMPLE), tmp_path / "t.json").read_text())
    meta = trace["otherData"]
    assert meta["synthetic"] is True and "fake" in meta["synthetic_reason"]
    assert meta["torch_neuronx"] == "fake (tests/neuron_fake)" and meta["device"] == "neuron"
    names = [e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "process_name"]
    assert names and all(n.endswith("(SYNTHETIC)") for n in names)
    measured = json.loads(write_chrome_trace(open_log(CPU_SAMPLE), tmp_path / "m.json").read_text())
    assert measured["otherData"]["synthetic"] is False
    assert not any("SYNTHETIC" in json.dumps(e) for e in measured["traceEvents"])


def test_the_dashboard_status_line_says_synthetic_while_that_log_is_shown():
    state = DashboardState.replay(NEURON_SAMPLE)
    assert state.status.startswith("SYNTHETIC log, not measured (")
    assert "Replaying 6 compile events" in state.status  # the message itself follows the note
    state.fail(ValueError("bad input"))
    assert state.status == "ValueError: bad input"  # an error is shown alone
    state.status_line.clear_error()
    state.open_uploads([("cpu.jsonl", CPU_SAMPLE.read_bytes())])  # a measured log shown now
    assert state.status.startswith("Showing 'cpu.jsonl'") and "SYNTHETIC" not in state.status
    state.show_run("")  # back to the replayed synthetic log
    assert state.status.startswith("SYNTHETIC log, not measured (") and "Showing" in state.status


# -- honest totals -------------------------------------------------------------------------------

def neuron_events() -> list[CompileEvent]:
    """Two graphs with NEFF builds, a backward graph, and eager kernels built on Neuron."""
    common = {"device": "neuron", "backend": "neuron", "function": "forward"}
    return [
        CompileEvent(started_at=100.0, duration_s=1.5, kind="first", neff_compile_s=40.0,
                     neff_cache="compiled", input_shapes={"x": [1, 8]}, **common),
        CompileEvent(started_at=102.0, duration_s=0.5, kind="recompile", neff_compile_s=20.0,
                     neff_cache="compiled", input_shapes={"x": [1, 16]}, **common),
        CompileEvent(started_at=103.0, duration_s=0.25, kind="backward", neff_compile_s=10.0,
                     neff_cache="compiled", device="neuron", backend="neuron",
                     function="forward (backward)"),
        CompileEvent(started_at=104.0, duration_s=7.0, kind="kernels", kernels=3,
                     ops={"aten::add.Tensor": 3}, function="eager kernels", device="neuron",
                     backend="neuron"),
    ]


def test_each_text_total_names_its_source():
    events = neuron_events()
    kernel_s = sum(e.duration_s for e in events if e.kind == "kernels")
    dynamo_s = sum(e.duration_s for e in events if e.kind != "kernels")
    neff_s = sum(e.neff_compile_s or 0.0 for e in events)
    log = make_log(events, wall=200.0)
    first = " ".join(format_report(log).split("\n\n")[0].split())  # the header line, wrapped
    assert (f"{dynamo_s:.2f} s Dynamo compile + {neff_s:.1f} s NEFF builds + {kernel_s:.2f} s "
            "eager-kernel builds") in first and "compiling" not in first
    lines = format_summary(log).splitlines()
    header = cells(lines[0])
    assert {"Dynamo s", "NEFF s", "kernel s"} <= set(header) and "compile s" not in header
    spans = [m.span() for m in re.finditer("-+", lines[1])]  # each column's place: the rule
    rows = {row[0]: dict(zip(header, row, strict=True))
            for row in ([line[a:b].strip() for a, b in spans] for line in lines[2:6])}
    assert list(rows) == ["forward", "forward (backward)", "eager kernels", "total"]
    assert rows["forward"]["kernel s"] == ""  # no kernels built there
    assert rows["eager kernels"]["Dynamo s"] == "-"  # no Dynamo seconds of its own
    assert rows["eager kernels"]["kernel s"] == f"{kernel_s:.3f}"
    assert rows["total"]["Dynamo s"] == f"{dynamo_s:.3f}"
    note = " ".join(lines[6:])
    assert "Dynamo s: Dynamo's tracing and lowering" in note
    assert "kernel s: the eager-op kernel builds" in note and "NEFF s: the neuronx-cc build" in note
    data = report_data(log)
    assert data["dynamo_s"] == pytest.approx(dynamo_s) and data["kernel_s"] == pytest.approx(kernel_s)
    assert data["compile_s"] == pytest.approx(dynamo_s + kernel_s)
    assert data["neff_s"] == pytest.approx(neff_s)
    title = charts.timeline(log).axes[0].get_title()
    assert (f"{dynamo_s:.1f} s Dynamo compile + {neff_s:.1f} s NEFF builds + {kernel_s:.1f} s "
            "eager-kernel builds") in title


def two_rank_log() -> tuple[CompileLog, int, float, float]:
    """Rank 1 compiles longer than rank 0; the log, the busiest rank, its seconds, all ranks'."""
    rank0 = make_log(neuron_events()[:2], wall=150.0)
    rank1 = make_log([dataclasses.replace(e, rank=1, duration_s=e.duration_s * 3,
                                          started_at=e.started_at + 0.5)
                      for e in neuron_events()[:2]], wall=160.0)
    merged = CompileLog.merge([rank0, rank1])
    per_rank = {r: sum(e.total_s for e in merged.events if e.rank == r) for r in (0, 1)}
    busiest = max(per_rank, key=per_rank.__getitem__)
    return merged, busiest, per_rank[busiest], sum(per_rank.values())


def test_totals_over_ranks_and_the_busiest_rank_are_labelled_alike_in_every_view():
    log, rank, busiest_s, everyone = two_rank_log()
    assert rank == 1
    share = next(a for a in diagnose(log) if a.title.startswith("compile time is"))
    assert f"(rank {rank}, the busiest of 2 ranks: {busiest_s:.1f} s of " in share.title
    assert f"all 2 ranks together: {everyone:.1f} s" in share.detail
    assert share.numbers["rank"] == rank and share.numbers["all_ranks_s"] == pytest.approx(everyone)
    title = charts.timeline(log).axes[0].get_title()
    assert f" over 2 ranks (rank {rank}, the busiest: {busiest_s:.1f} s)" in title
    head = format_report(log).split("\n\n")[0]  # the header line (wrapped), then its notes
    assert head.splitlines()[-1].startswith(
        f"seconds summed over ranks 0,1; busiest rank {rank}: {busiest_s:.2f} s")
    assert f"(rank {rank}: {busiest_s:.3f} s)" in " ".join(format_summary(log).split())
    data = report_data(log)
    assert data["busiest_rank"] == {"rank": rank, "seconds": pytest.approx(busiest_s)}
    assert data["share_of_wall"] == pytest.approx(busiest_s / log.wall_time_s)


def test_one_rank_is_not_said_to_be_summed():
    log = make_log(neuron_events(), wall=200.0)
    share = next(a for a in diagnose(log) if a.title.startswith("compile time is"))
    assert "busiest" not in share.title and "ranks" not in share.detail
    assert "ranks" not in charts.timeline(log).axes[0].get_title()
    assert "summed over ranks" not in format_report(log)


# -- the legend shows the mark the chart draws ------------------------------------------------

def test_the_chart_key_shows_a_backward_graph_as_the_triangle_drawn():
    fig = charts.dashboard_chart(make_log(neuron_events()), legend=False)
    backward = next(k for k in fig.key if k.label == "backward")
    drawn = next(c for c in fig.axes[0].collections if c.get_label() == "backward")
    assert (backward.marker, backward.filled) == ("v", MarkerStyle("v").is_filled())
    assert len(drawn.get_paths()) == 1 and backward.symbol == "▼"
    assert "▼" in chart_key_html(fig.key)


def test_every_mark_the_charts_draw_has_its_own_key_symbol():
    for kind, marker, _size, _colour in charts.MARKS:
        assert (marker, MarkerStyle(marker).is_filled()) in KEY_SYMBOLS, kind
    assert len({KEY_SYMBOLS[m, MarkerStyle(m).is_filled()] for _, m, _, _ in charts.MARKS}) == \
        len(charts.MARKS)  # no two marks look alike in the key


def test_a_long_title_stays_inside_the_dashboard_chart():
    """The labelled totals make long titles: on two lines, or smaller, never past the edges."""
    log = two_rank_log()[0]
    log.header["synthetic"] = True
    for fig in (charts.dashboard_chart(log, legend=False), charts.dashboard_chart(log),
                charts.timeline(log, figsize=(4.0, 3.0))):
        fig.canvas.draw()
        title = fig.axes[0].title
        box = title.get_window_extent(fig.canvas.get_renderer())
        assert 0 <= box.x0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, title.get_text()
        assert title.get_text().replace("\n", ", ").startswith("SYNTHETIC · Compile timeline: ")


def test_the_dashboards_graph_counts_name_each_seconds_source():
    """The panel's header and columns keep Dynamo, NEFF and eager-kernel seconds apart (it said
    "X s compiling" over a "compile s" column that held the kernels' build seconds too)."""
    from helpers.paths import ROOT
    from neuronkit.views.html import graph_counts_html

    log = CompileLog.load(ROOT / "notebooks" / "data" / "sample_neuron_log.jsonl")
    page = graph_counts_html(log)
    kernel_s = sum(float(e.duration_s) for e in log.events if e.kind == "kernels")
    assert "s compiling" not in page and "<th>compile s</th>" not in page
    assert "<th>Dynamo s</th>" in page and "<th>kernel s</th>" in page
    assert f"{log.total_compile_s - kernel_s:.1f} s Dynamo compile" in page
    assert f"{kernel_s:.1f} s eager-kernel builds" in page
