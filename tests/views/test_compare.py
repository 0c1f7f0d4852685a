"""compare: two runs from hand-made events (counts, ratios, what changed, escaping, chart)."""
from __future__ import annotations

import re

import numpy as np
import pytest
from matplotlib.colors import to_rgba

from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import shape_key
from neuronkit.log.compile_log import CompileLog
from neuronkit.views import charts
from neuronkit.views.compare import (
    NEURON_COMPILE_COST_S,
    RUN_COLOURS,
    Comparison,
    GraphCountChange,
    compare_chart,
    compare_logs,
    comparison_html,
    comparison_text,
    projected_seconds,
)

ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]|\x1b\][^\x07]*\x07")


def run(lengths, function="forward", location="/home/a/model/modeling_llama.py:44",
        t0=1000.0, seconds=2.0, extra=(), wall=None) -> CompileLog:
    """One compile per input length (the first a first compile), then ``extra`` events."""
    log = CompileLog()
    for i, n in enumerate(lengths):
        log.append(CompileEvent(function=function, location=location, started_at=t0 + i,
                                duration_s=seconds, kind="first" if i == 0 else "recompile",
                                input_shapes={"input_ids": [1, n]}))
    for e in extra:
        log.append(e)
    if wall is not None:
        log.set_wall_time(wall)
    return log


def naive_and_bucketed() -> tuple[CompileLog, CompileLog]:
    naive = run(range(10, 21), wall=100.0, extra=[
        CompileEvent(function="prefill", started_at=1020.0, duration_s=1.0),
        CompileEvent(function="forward", location="/home/a/model/modeling_llama.py:44",
                     kind="limit_hit", started_at=1021.0, input_shapes={"input_ids": [1, 99]}),
        CompileEvent(function="forward", location="/home/a/model/modeling_llama.py:44",
                     kind="graph_break", started_at=1022.0),
        CompileEvent(function="loss", kind="failed", started_at=1023.0, duration_s=0.5)])
    # another checkout of the same code: the function matches by name and file
    bucketed = run([32], location="/srv/b/model/modeling_llama.py:44", t0=5.0, wall=40.0,
                   extra=[CompileEvent(function="decode", started_at=6.0, duration_s=3.0,
                                       neff_compile_s=10.0)])
    return naive, bucketed


def test_counts_and_seconds_per_run():
    cmp = compare_logs(*naive_and_bucketed(), names=("naive", "bucketed"))
    a, b = cmp.a, cmp.b
    assert (a.name, a.graphs, a.events, a.limit_hits, a.failures, a.graph_breaks) == \
        ("naive", 12, 15, 1, 1, 1)
    assert (b.name, b.graphs, b.events, b.limit_hits, b.failures, b.graph_breaks) == \
        ("bucketed", 2, 2, 0, 0, 0)
    assert a.compile_s == pytest.approx(11 * 2.0 + 1.0 + 0.5) and a.neff_s == 0.0
    assert a.total_s == pytest.approx(a.compile_s)
    assert (b.compile_s, b.neff_s, b.total_s) == pytest.approx((5.0, 10.0, 15.0))
    assert (a.wall_s, b.wall_s) == (100.0, 40.0)


def test_projection_is_execution_plus_graphs_times_the_compile_cost():
    cmp = compare_logs(*naive_and_bucketed(), names=("naive", "bucketed"))
    assert cmp.compile_cost_s == NEURON_COMPILE_COST_S == 60.0
    assert cmp.a.projected_s == pytest.approx((100.0 - 23.5) + 12 * 60.0)
    assert cmp.b.projected_s == pytest.approx((40.0 - 15.0) + 2 * 60.0)
    cheap = compare_logs(*naive_and_bucketed(), compile_cost_s=1.0)
    assert cheap.a.projected_s == pytest.approx(76.5 + 12.0)
    no_wall = compare_logs(run([1, 2, 3]), run([4]))  # without a wall time: the compiles only
    assert (no_wall.a.projected_s, no_wall.b.projected_s) == (180.0, 60.0)
    assert projected_seconds(2, 10.0, 30.0, 5.0) == 10.0  # never a negative execution time
    with pytest.raises(ValueError, match="compile_cost_s"):
        compare_logs(run([1]), run([2]), compile_cost_s=-1.0)


def test_ranks_compile_side_by_side_in_the_projection():
    events = [CompileEvent(function="f", rank=r, started_at=float(r), duration_s=30.0)
              for r in range(4)]  # four ranks, 30 s each, at the same time
    log = CompileLog(events)
    log.set_wall_time(50.0)
    totals = compare_logs(log, run([1])).a
    assert totals.compiling_s == 30.0 and totals.total_s == 120.0
    assert totals.projected_s == pytest.approx(20.0 + 4 * 60.0)


@pytest.mark.parametrize("graphs_a, graphs_b, headline", [
    (11, 1, "B compiled 1 graph instead of 11: 11x fewer"),
    (11, 3, "B compiled 3 graphs instead of 11: 3.7x fewer"),
    (2, 8, "B compiled 8 graphs instead of 2: 4x more"),
    (3, 3, "A and B compiled the same number of graphs: 3"),
    (5, 0, "B compiled no graphs instead of 5"),
    (0, 4, "B compiled 4 graphs instead of none"),
])
def test_headline_ratio(graphs_a, graphs_b, headline):
    cmp = compare_logs(run(range(graphs_a)), run(range(graphs_b)))
    assert cmp.headline == headline
    assert headline in comparison_text(cmp)


def test_what_changed():
    cmp = compare_logs(*naive_and_bucketed(), names=("naive", "bucketed"))
    assert cmp.only_in_a == ("prefill",)  # "loss" failed: it built no graph
    assert cmp.only_in_b == ("decode",)
    assert cmp.graph_counts_changed == (GraphCountChange("forward", 11, 1),)
    only_a = {s for f, s in cmp.shapes_only_in_a if f == "forward"}
    assert only_a == {shape_key(CompileEvent(input_shapes={"input_ids": [1, n]}))
                      for n in [*range(10, 21), 99]}  # the refused shape was seen too
    assert cmp.shapes_only_in_b == (("forward", '{"input_ids":[1,32]}'),)
    same = compare_logs(run([1, 2]), run([1, 2], t0=0.0))
    assert (same.only_in_a, same.only_in_b, same.graph_counts_changed, same.shapes_only_in_a,
            same.shapes_only_in_b) == ((), (), (), (), ())


def test_same_named_functions_in_different_files_stay_apart():
    a = run([1, 2], location="/x/modeling_a.py:1", extra=[
        CompileEvent(function="forward", location="/x/modeling_b.py:7", started_at=1.0)])
    b = run([1], location="/y/modeling_a.py:1")
    cmp = compare_logs(a, b)
    assert cmp.only_in_a == ("forward (modeling_b.py:7)",)
    assert cmp.graph_counts_changed == (GraphCountChange("forward (modeling_a.py:1)", 2, 1),)


def test_text_is_a_side_by_side_table():
    cmp = compare_logs(*naive_and_bucketed(), names=("naive", "bucketed"))
    text = comparison_text(cmp)
    lines = text.splitlines()
    assert lines[0] == "naive vs bucketed"
    assert lines[1].split() == ["naive", "bucketed"]
    rows = {line[:22].strip(): line[22:].split() for line in lines[2:12]}
    assert rows["graphs"] == ["12", "2"]
    assert rows["limit hits"] == ["1", "0"]
    assert rows["NEFF build s"] == ["0.00", "10.00"]
    assert rows["projected Neuron s"] == [f"{cmp.a.projected_s:.0f}", f"{cmp.b.projected_s:.0f}"]
    assert "compiled only in naive (1):" in text and "    prefill" in lines
    assert "    forward: 11 -> 1" in lines
    assert "60 s per Neuron compile" in text.replace("\n", " ") and "assumed" in text
    assert max(len(line) for line in lines) <= 120


def test_long_lists_end_with_a_count():
    cmp = compare_logs(run(range(40)), run([100]))
    text = comparison_text(cmp, limit=5)
    assert "shapes seen only in A (40):" in text and "    and 35 more" in text.splitlines()
    assert "<li>and 35 more</li>" in comparison_html(cmp, limit=5)
    assert "…" not in text + comparison_html(cmp, limit=5)


def test_long_names_and_entries_wrap_whole_within_the_width():
    long_name = "bucketed run with the prompts of the evaluation set, batch 4, " * 2
    function = "Qwen3MoeForConditionalGeneration_" + "x" * 140
    cmp = compare_logs(run([1, 2], function=function), run([3]),
                       names=("naive", long_name.strip()))
    text = comparison_text(cmp)
    lines = text.splitlines()
    assert max(map(len, lines)) <= 120 and "…" not in text
    assert " ".join(text.split()).startswith(f"naive vs {' '.join(long_name.split())}")
    graphs = next(i for i, line in enumerate(lines) if line.startswith("  graphs"))
    header = [line.replace("naive", "") for line in lines[:graphs] if line.startswith(" " * 20)]
    assert len(header) > 1 and "".join("".join(header).split()) == "".join(long_name.split())
    at = lines.index("  compiled only in naive (1):") + 1
    entry = [line for line in lines[at:at + 3] if line.startswith("    ")]
    assert len(entry) == 2 and "".join("".join(entry).split()) == function


HOSTILE = "<img src=x onerror=alert(1)>$\\frac{$\x1b[31m\x1b]8;;http://x\x07red\u202e"


def hostile_runs() -> tuple[CompileLog, CompileLog]:
    a = run([1, 2], function=HOSTILE, location=HOSTILE + ".py:1")
    b = run([3], function="forward", extra=[
        CompileEvent(function="f", started_at=2.0, input_shapes={HOSTILE: [1, "<s0>"]})])
    return a, b


def test_text_output_is_terminal_safe():
    a, b = hostile_runs()
    text = comparison_text(compare_logs(a, b, names=("run \x1b[2J<b>", "two\x1b]0;title\x07")))
    assert not ANSI.search(text)
    assert "\x1b" not in text and "\u202e" not in text and "\x07" not in text
    assert "<img src=x onerror=alert(1)>" in text  # plain text: shown as it is, harmless
    assert "run <b> vs two" in text


def test_html_escapes_every_value():
    a, b = hostile_runs()
    names = ('<script>alert("a")</script>', "b\" onmouseover=\"alert(1)")
    page = comparison_html(compare_logs(a, b, names=names))
    assert "<img" not in page and "<script" not in page and "<s0>" not in page
    assert "&lt;img src=x onerror=alert(1)&gt;" in page
    assert 'onmouseover="' not in page and "onmouseover=&quot;alert(1)" in page
    assert "\x1b" not in page and "\u202e" not in page
    tags = set(re.findall(r"</?([a-z0-9]+)", page))
    assert tags <= {"div", "p", "b", "br", "table", "thead", "tbody", "tr", "th", "td", "ul",
                    "li", "code"}
    assert page.count("<table") == 1 and page.count("<tr>") == 11  # header + 10 rows


def test_names_must_be_two_different_strings():
    with pytest.raises(ValueError, match="different names"):
        compare_logs(run([1]), run([2]), names=("x", "x"))
    with pytest.raises(TypeError, match="two strings"):
        compare_logs(run([1]), run([2]), names="AB")
    with pytest.raises(TypeError, match="CompileLog"):
        compare_logs("a.jsonl", run([1]))


def test_comparison_of_lists_of_events():
    cmp = compare_logs(run([1, 2]).events, run([3]).events, names=("x", "y"))
    assert isinstance(cmp, Comparison) and (cmp.a.graphs, cmp.b.graphs) == (2, 1)
    assert cmp.a.wall_s is None and "wall s" in comparison_text(cmp)


# -- chart ---------------------------------------------------------------------------------------

def test_chart_draws_both_runs_on_one_axis_from_each_start():
    a, b = naive_and_bucketed()
    fig = compare_chart(a, b, names=("naive", "bucketed"))
    assert len(fig.axes) == 1
    ax = fig.axes[0]
    series = {c.get_gid(): c for c in ax.collections if c.get_gid()}
    assert set(series) == {"naive", "bucketed"}
    naive, bucketed = np.asarray(series["naive"].get_offsets()), \
        np.asarray(series["bucketed"].get_offsets())
    assert naive[:, 0].tolist() == [float(i) for i in range(11)] + [20.0]  # from 1000 s
    assert bucketed[:, 0].tolist() == [0.0, 1.0]  # from 5 s: the same x axis
    assert bucketed[:, 1].tolist() == [2.0, 13.0]  # compile seconds (+ NEFF)
    assert to_rgba(RUN_COLOURS[0], 0.8) == tuple(series["naive"].get_facecolor()[0])
    assert to_rgba(RUN_COLOURS[1], 0.8) == tuple(series["bucketed"].get_facecolor()[0])
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0].startswith("naive: 12 graphs") and legend[1].startswith("bucketed: 2 graphs")
    assert "naive: limit hits (1)" in legend
    assert "each run" in ax.get_xlabel() and "compile seconds" in ax.get_ylabel()
    assert charts.png_bytes(fig).startswith(charts.PNG_SIGNATURE)


def test_chart_log_scale_hostile_names_and_empty_runs():
    wide = run([1, 2], seconds=0.05, extra=[CompileEvent(function="g", started_at=3.0,
                                                         duration_s=300.0)])
    fig = compare_chart(wide, run([1]), names=("$\\frac{$", "<img onerror>"))
    ax = fig.axes[0]
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    assert charts.png_bytes(fig).startswith(charts.PNG_SIGNATURE)  # no maths parsed, no raise
    legend = [t.get_text() for t in ax.get_legend().get_texts()]
    assert legend[0].startswith("\\$\\frac{\\$") and legend[1].startswith("<img onerror>")
    empty = compare_chart(CompileLog(), CompileLog())
    assert len([c for c in empty.axes[0].collections if c.get_gid()]) == 2
    assert charts.png_bytes(empty).startswith(charts.PNG_SIGNATURE)


def test_chart_labels_fit_the_figure():
    from test_charts import texts_outside

    long_a = "naive run with a very long name " * 4
    fig = compare_chart(*naive_and_bucketed(), names=(long_a, "bucketed"))
    assert texts_outside(fig) == []
