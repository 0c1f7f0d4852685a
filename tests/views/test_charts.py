"""charts: figures built from hand-made events (points per function, marks, x modes, PNG)."""
from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from neuronkit.events.event import CompileEvent, EventKind
from neuronkit.events.facts import graphs
from neuronkit.log.compile_log import CompileLog
from neuronkit.views import chart_data, chart_layout, charts

# (function, kind, started_at, duration_s, rank)
ROWS = [("forward", "first", 100.0, 0.5, 0), ("forward", "recompile", 102.0, 0.4, 1),
        ("wrapper", "first", 103.5, 0.9, 0), ("forward", "recompile", 104.0, 0.3, 0),
        ("forward", "limit_hit", 107.0, 0.01, 1), ("wrapper", "failed", 108.0, 0.2, 1),
        ("forward", "limit_hit", 110.0, 0.02, 0)]


def make_log(rows=ROWS) -> CompileLog:
    log = CompileLog()
    for function, kind, t, d, rank in rows:
        log.append(CompileEvent(function=function, kind=kind, started_at=t, duration_s=d,
                                rank=rank))
    return log


def scatters(fig: Figure) -> dict[str, np.ndarray]:
    """Offsets of the scatters, keyed by gid (function or rank: its first compiles and its
    recompiles together, in x order) or by label."""
    found: dict[str, list[np.ndarray]] = {}
    for c in fig.axes[0].collections:
        found.setdefault(str(c.get_gid() or c.get_label()), []).append(np.asarray(c.get_offsets()))
    merged = {key: np.concatenate(parts) for key, parts in found.items()}
    return {key: pts[np.argsort(pts[:, 0], kind="stable")] for key, pts in merged.items()}


def test_timeline_one_scatter_per_function_with_its_points():
    fig = charts.timeline(make_log())
    pts = scatters(fig)
    assert len(pts["forward"]) == 3 and len(pts["wrapper"]) == 1  # graphs only
    assert pts["forward"][:, 0].tolist() == [0.0, 2.0, 4.0]  # seconds since the first compile
    assert pts["forward"][:, 1].tolist() == [0.5, 0.4, 0.3]  # compile seconds
    # forward's first compiles and recompiles, wrapper's first compiles, failed, limit hit
    assert len(fig.axes[0].collections) == 5


def test_timeline_marks_limit_hits_and_failures():
    fig = charts.timeline(make_log())
    pts = scatters(fig)
    assert pts["limit hit"][:, 0].tolist() == [7.0, 10.0]
    assert pts["failed"][:, 0].tolist() == [8.0]
    hit = next(c for c in fig.axes[0].collections if c.get_label() == "limit hit")
    assert to_rgba(chart_layout.LIMIT_COLOUR) == tuple(hit.get_facecolor()[0])
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any("limit hit (2x)" in n and "eager" in n for n in notes)


def test_first_compiles_filled_recompiles_hollow():
    fig = charts.timeline(make_log())
    first, again = [c for c in fig.axes[0].collections if c.get_gid() == "forward"]
    edge = tuple(first.get_edgecolors()[0])
    # one face colour per scatter: Agg stamps one marker raster for all its points
    assert len(first.get_facecolors()) == 1 and len(again.get_facecolors()) == 1
    assert tuple(first.get_facecolors()[0]) == edge  # first: filled in the function's colour
    assert tuple(again.get_facecolors()[0]) == to_rgba("white")  # recompiles: hollow
    assert tuple(again.get_edgecolors()[0]) == edge
    assert first.get_offsets().tolist() == [[0.0, 0.5]]
    assert again.get_offsets().tolist() == [[2.0, 0.4], [4.0, 0.3]]


def test_x_call_uses_event_numbers():
    pts = scatters(charts.timeline(make_log(), x="call"))
    assert pts["forward"][:, 0].tolist() == [0, 1, 3]
    assert pts["wrapper"][:, 0].tolist() == [2]
    assert pts["limit hit"][:, 0].tolist() == [4, 6]
    assert "number" in charts.timeline(make_log(), x="call").axes[0].get_xlabel()


def test_by_rank_colours_by_rank():
    fig = charts.timeline(make_log(), by="rank")
    pts = scatters(fig)
    assert len(pts["rank 0"]) == 3 and len(pts["rank 1"]) == 1
    colours = {c.get_gid(): tuple(c.get_edgecolors()[0]) for c in fig.axes[0].collections
               if c.get_gid()}
    assert colours["rank 0"] != colours["rank 1"]


def test_bad_arguments_are_named():
    with pytest.raises(ValueError, match="x must be"):
        charts.timeline(make_log(), x="seconds")
    with pytest.raises(ValueError, match="by must be"):
        charts.timeline(make_log(), by="device")
    with pytest.raises(TypeError, match="CompileLog"):
        charts.timeline("log.jsonl")


def test_empty_log_says_so():
    for fig in (charts.timeline(CompileLog()), charts.graph_growth(CompileLog())):
        assert [t.get_text() for t in fig.axes[0].texts] == ["no compile events"]
        assert charts.png_bytes(fig).startswith(charts.PNG_SIGNATURE)


def test_graph_growth_steps_per_function():
    fig = charts.graph_growth(make_log())
    lines = {line.get_gid(): line for line in fig.axes[0].lines}
    xs, ys = lines["forward"].get_data()
    assert list(ys) == [1, 2, 3, 3]  # three graphs, held to the last event
    assert list(xs) == [0, 1, 3, 6]
    assert list(lines["wrapper"].get_data()[1]) == [1, 1]
    hits = scatters(fig)["limit hit"]
    assert hits.tolist() == [[4, 3], [6, 3]]  # at the graph count where torch gave up
    by_rank = {line.get_gid(): list(line.get_data()[1])
               for line in charts.graph_growth(make_log(), by="rank").axes[0].lines}
    assert by_rank == {"rank 0": [1, 2, 3, 3], "rank 1": [1, 1]}
    xs_time, _ = charts.graph_growth(make_log(), x="time").axes[0].lines[0].get_data()
    assert list(xs_time) == [0.0, 2.0, 4.0, 10.0]


def test_draws_into_a_given_axes():
    fig = Figure()
    left, right = fig.add_subplot(1, 2, 1), fig.add_subplot(1, 2, 2)
    position = tuple(right.get_position().bounds)
    assert charts.timeline(make_log(), ax=right) is fig
    assert charts.graph_growth(make_log(), ax=left) is fig
    assert len(right.collections) == 5 and len(left.lines) == 2 and len(fig.axes) == 2
    assert tuple(right.get_position().bounds) == position  # the caller's layout is theirs
    assert right.get_title().startswith("Compile timeline: 7 events")  # titles stay readable
    assert left.get_title() == "Graphs per function"
    right.figure.canvas.draw()  # the axes autoscale to hold every mark
    x0, x1 = right.get_xlim()
    y0, y1 = right.get_ylim()
    assert x0 <= 0.0 and x1 >= 10.0 and y0 <= 0.01 and y1 >= 0.9


def test_png_bytes_and_save_png(tmp_path):
    fig = charts.timeline(make_log())
    data = charts.png_bytes(fig)
    assert data.startswith(b"\x89PNG\r\n\x1a\n") and len(data) > 1000
    out = charts.save_png(fig, tmp_path / "sub" / "timeline.png")
    assert out == tmp_path / "sub" / "timeline.png"
    assert out.read_bytes().startswith(charts.PNG_SIGNATURE)


def test_figures_show_themselves_in_jupyter_as_png():
    fig = charts.timeline(make_log())
    assert fig._repr_png_().startswith(charts.PNG_SIGNATURE)
    assert repr(fig) == "<Figure size 800x360 with 1 Axes>"  # what notebooks store as text
    formatters = pytest.importorskip("IPython.core.formatters")
    data, _ = formatters.DisplayFormatter().format(charts.graph_growth(make_log()))
    assert data["image/png"].startswith(charts.PNG_SIGNATURE)  # no %matplotlib inline needed
    assert data["text/plain"] == "<Figure size 800x320 with 1 Axes>"


def test_functions_that_share_a_name_get_their_own_colour():
    log = CompileLog()
    for where, t in (("/x/operations.py:942", 100.0), ("/x/modeling_qwen3.py:440", 101.0),
                     ("/x/modeling_qwen3.py:440", 102.0)):
        log.append(CompileEvent(function="forward", location=where, started_at=t, duration_s=0.1,
                                kind="recompile" if t == 102.0 else "first"))
    pts = scatters(charts.timeline(log))
    assert {k: len(v) for k, v in pts.items()} == {"forward (operations.py:942)": 1,
                                                   "forward (modeling_qwen3.py:440)": 2}
    lines = {line.get_gid(): line for line in charts.graph_growth(log).axes[0].lines}
    assert list(lines["forward (modeling_qwen3.py:440)"].get_data()[1]) == [1, 2, 2]
    legend = [t.get_text() for t in charts.graph_growth(log).axes[0].get_legend().get_texts()]
    assert legend == ["forward (operations.py:942) (1)", "forward (modeling_qwen3.py:440) (2)"]


def test_figures_from_threads():
    results: list[bytes] = []

    def draw():
        results.append(charts.png_bytes(charts.timeline(make_log())))

    threads = [threading.Thread(target=draw) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(results) == 3 and all(r.startswith(charts.PNG_SIGNATURE) for r in results)


def test_charts_do_not_use_pyplot():
    code = ("import sys; from neuronkit.views import charts; "
            "from neuronkit.log.compile_log import CompileLog;"
            "charts.png_bytes(charts.timeline(CompileLog()));"
            " print('matplotlib.pyplot' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


def test_figsize_sizes_new_figures_only():
    fig = charts.timeline(make_log(), figsize=(9.0, 3.2))
    assert tuple(fig.get_size_inches()) == (9.0, 3.2)
    fig = charts.graph_growth(make_log(), figsize=(5.0, 2.0))
    assert tuple(fig.get_size_inches()) == (5.0, 2.0)
    assert tuple(charts.timeline(make_log()).get_size_inches()) == (8.0, 3.6)


def test_names_from_a_log_are_plain_text_not_maths():
    from neuronkit.events.event import CompileEvent as E

    events = [E(function="$\\frac{$", kind="first", started_at=1.0, duration_s=1.0),
              E(function="evil\x1b[2J\u202e", kind="recompile", started_at=2.0, duration_s=1.0)]
    for draw in (charts.timeline, charts.graph_growth):
        fig = draw(events)
        png = charts.png_bytes(fig)                      # drawing raised ValueError before
        assert png.startswith(charts.PNG_SIGNATURE)
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert not any("\x1b" in t or "\u202e" in t for t in labels)


def test_graph_breaks_have_their_own_mark():
    from neuronkit.events.event import CompileEvent as E

    events = [E(function="f", kind="first", started_at=1.0, duration_s=1.0),
              E(function="f", kind="graph_break", started_at=2.0, duration_s=0.2)]
    labels = [t.get_text() for t in charts.timeline(events).axes[0].get_legend().get_texts()]
    assert "graph break (1)" in labels and "failed" not in labels


# -- axes of small and wide logs, labels that fit, log scale, many events -----------------------

def texts_outside(fig: Figure) -> list[str]:
    """The non-empty texts drawn on the figure (every Text artist that draws itself: titles,
    labels, tick labels, legend entries, notes) whose extent reaches past the figure's edges."""
    from matplotlib.text import Text

    drawn: list[Text] = []
    original = Text.draw

    def recording_draw(self, renderer):
        original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            drawn.append(self)

    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(Text, "draw", recording_draw)
        fig.canvas.draw()
    assert drawn  # the figure has texts, and they were seen
    canvas = fig.canvas
    assert isinstance(canvas, FigureCanvasAgg)
    renderer = canvas.get_renderer()
    bounds = fig.bbox
    outside = []
    for text in drawn:
        box = text.get_window_extent(renderer)
        if (box.x0 < bounds.x0 - 0.5 or box.y0 < bounds.y0 - 0.5 or box.x1 > bounds.x1 + 0.5
                or box.y1 > bounds.y1 + 0.5):
            outside.append(text.get_text())
    return outside


def relative(value: float, limits: tuple[float, float]) -> float:
    return (value - limits[0]) / (limits[1] - limits[0])


@pytest.mark.parametrize("x", ["time", "call"])
def test_one_event_sits_mid_axes(x):
    log = make_log([("forward", "first", 100.0, 2.5, 0)])
    ax = charts.timeline(log, x=x).axes[0]
    (px, py), = scatters(ax.figure)["forward"]
    assert 0.3 < relative(px, ax.get_xlim()) < 0.7  # was a degenerate, zero-width x range
    assert 0.3 < relative(py, ax.get_ylim()) < 0.7
    assert ax.get_ylim()[0] <= 0.0  # seconds start from 0
    ax.figure.canvas.draw()
    if x == "call":  # event numbers: integer ticks only
        ticks = [t for t in ax.get_xticks() if ax.get_xlim()[0] <= t <= ax.get_xlim()[1]]
        assert ticks and all(float(t).is_integer() for t in ticks)


def test_one_graph_growth_sits_mid_axes_with_integer_counts():
    ax = charts.graph_growth(make_log([("forward", "first", 100.0, 2.5, 0)])).axes[0]
    xs, ys = ax.lines[0].get_data()
    assert 0.3 < relative(xs[0], ax.get_xlim()) < 0.7
    assert 0.3 < relative(ys[0], ax.get_ylim()) < 0.7
    assert ax.lines[0].get_marker() == "o"  # a line of length 0: its dot shows the graph
    ax.figure.canvas.draw()
    for ticks, limits in ((ax.get_yticks(), ax.get_ylim()), (ax.get_xticks(), ax.get_xlim())):
        shown = [t for t in ticks if limits[0] <= t <= limits[1]]
        assert shown and all(float(t).is_integer() for t in shown)


def test_points_stay_inside_the_axes():
    ax = charts.timeline(make_log()).axes[0]
    (x0, x1), (y0, y1) = ax.get_xlim(), ax.get_ylim()
    for pts in scatters(ax.figure).values():
        assert ((pts[:, 0] > x0) & (pts[:, 0] < x1) & (pts[:, 1] > y0) & (pts[:, 1] < y1)).all()


def crowded_log(functions: int = 30) -> list[CompileEvent]:
    """Many functions with long, hostile and same-named labels, and every kind of mark."""
    events = []
    for i in range(functions):
        name = (f"torch_dynamo_resume_in_forward_with_a_really_long_name_{i}_at_{300 + i}"
                if i % 3 else f"forward$\\frac{{{i}}}$<img src=x onerror=alert({i})>")
        where = f"/very/long/site-packages/transformers/models/model_{i}/modeling_model.py:{i}"
        for j in range(1 + i % 4):
            events.append(CompileEvent(function=name, location=where, started_at=100.0 + i + j / 5,
                                       duration_s=1.0 + j, kind="first" if j == 0 else "recompile",
                                       neff_compile_s=30.0 if j == 1 else None))
    marks: list[EventKind] = ["limit_hit", "failed", "graph_break", "kernels"]
    events += [CompileEvent(function="forward", kind=kind, started_at=150.0 + k, duration_s=0.5)
               for k, kind in enumerate(marks)]
    for seq, e in enumerate(events):
        e.seq = seq
    return events


@pytest.mark.parametrize("draw", [charts.timeline, charts.graph_growth, charts.dashboard_chart,
                                  lambda log: charts.timeline(log, figsize=(6.0, 3.0)),
                                  lambda log: charts.graph_growth(log, figsize=(5.0, 2.6))])
def test_no_label_is_cut_off(draw):
    events = crowded_log()
    fig = draw(CompileLog(events) if draw is charts.dashboard_chart else events)
    assert texts_outside(fig) == []
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert any(t.startswith("+ ") and t.endswith(" more") for t in legend)  # not all 30 fit
    assert all(len(t) <= chart_layout.LABEL_CHARS + 12 for t in legend)  # "$" escapes, "(count)"
    assert "limit hit" in legend


def test_few_long_labels_are_shortened_but_kept_apart():
    events = [CompileEvent(function="forward", location=f"/x/{d}/modeling_llama_for_causal_lm.py:44",
                           started_at=float(i), duration_s=1.0) for i, d in enumerate("ab")]
    fig = charts.timeline(events)
    assert texts_outside(fig) == []
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()][:2]
    assert len(set(legend)) == 2 and all("…" in t for t in legend)
    assert not any(t.startswith("+ ") for t in legend)


def test_compile_seconds_spanning_orders_of_magnitude_go_on_a_log_axis():
    wide = make_log([("f", "first", 0.0, 0.05, 0), ("f", "recompile", 1.0, 120.0, 0),
                     ("f", "limit_hit", 2.0, 0.0, 0)])
    ax = charts.timeline(wide).axes[0]
    assert ax.get_yscale() == "log" and "log scale" in ax.get_ylabel()
    assert ax.get_ylim()[0] < 0.05 and ax.get_ylim()[1] > 120.0
    hit = scatters(ax.figure)["limit hit"]
    assert ax.get_ylim()[0] < hit[0, 1] < 0.05  # a 0 s hit still shows, at the bottom
    assert texts_outside(ax.figure) == []
    narrow = make_log([("f", "first", 0.0, 1.0, 0), ("f", "recompile", 1.0, 90.0, 0)])
    ax = charts.timeline(narrow).axes[0]
    assert ax.get_yscale() == "linear" and "log" not in ax.get_ylabel()
    assert chart_data.seconds_scale([0.0, 0.5, 50.0]) == "log"  # 0 s is not a span
    assert chart_data.seconds_scale([0.0, 0.6, 50.0]) == "linear"


def test_many_events_draw_a_fixed_number_of_series_and_thin_dense_ones():
    n = 3 * chart_data.MAX_POINTS + 300
    # each function compiles in the same time again and again: its points form a dense line
    events = [CompileEvent(function=f"f{i % 3}", started_at=float(i), duration_s=1.0 + i % 3,
                           kind="first" if i < 3 else "recompile") for i in range(n)]
    ax = charts.timeline(events).axes[0]
    assert len(ax.collections) == 6  # first + recompile scatter per function, whatever n is
    drawn = scatters(ax.figure)
    assert set(drawn) == {"f0", "f1", "f2"}
    for name, pts in drawn.items():
        k = int(name[1])
        assert 0 < len(pts) <= chart_data.CELLS[0] + 2  # one point per cell along the line
        assert pts[:, 0].min() == k and pts[:, 0].max() > n - 10  # from the start to the end
        assert set(pts[:, 1]) == {1.0 + k}  # thinned, never moved
        assert set(pts[:, 0]) <= set(range(k, n, 3))
    few = charts.timeline(events[:30]).axes[0]
    assert sum(len(c.get_offsets()) for c in few.collections) == 30  # small logs: every point


def test_thin_keeps_every_point_of_a_small_series_and_one_per_cell_of_a_big_one():
    xs = np.arange(10, dtype=float)
    assert chart_data.thin(xs, xs, (0, 10), (0, 10)).tolist() == list(range(10))
    same = np.zeros(chart_data.MAX_POINTS + 1)
    assert chart_data.thin(same, same, (-1, 1), (-1, 1)).tolist() == [0]  # all in one cell
    spread = np.linspace(0, 1, chart_data.MAX_POINTS + 1)
    kept = chart_data.thin(spread, spread, (0, 1), (0, 1))
    assert len(kept) <= sum(chart_data.CELLS) + 1 and kept[0] == 0  # the cells on a diagonal
    assert (np.diff(kept) > 0).all()  # in their order


def test_neff_builds_are_one_line_per_function():
    events = [CompileEvent(function="f", started_at=float(i), duration_s=1.0, neff_compile_s=20.0,
                           kind="first" if i == 0 else "recompile") for i in range(50)]
    ax = charts.timeline(events).axes[0]
    assert len(ax.lines) == 1  # the builds of all 50 graphs in one path (NaN-separated)
    xs, ys = ax.lines[0].get_data()
    assert np.nanmax(ys) == 21.0 and np.nanmin(ys) == 1.0
    assert "NEFF" in ax.get_ylabel() and "50.0 s Dynamo compile + 1000.0 s NEFF builds" in ax.get_title()


@pytest.mark.parametrize("style", [dict(marker="o", s=36, edgecolors="#1f77b4", facecolors="white"),
                                   dict(marker="X", s=110, color="#d62728"),
                                   dict(marker="x", s=50, color="black"),
                                   dict(marker="|", s=80, color="#616161"),
                                   dict(marker="D", s=28, color="#795548", edgecolors="#d62728")])
def test_scatter_points_draws_what_ax_scatter_draws(style):
    """The cheap scatter paints the same pixels as matplotlib's own, for every marker used."""
    xs, ys = np.array([1.0, 2.0, 3.5]), np.array([0.5, 2.0, 1.0])

    def pixels(draw) -> np.ndarray:
        fig = Figure(figsize=(3, 2), dpi=100)
        FigureCanvasAgg(fig)
        ax = fig.add_subplot()
        ax.set_xlim(0, 4)
        ax.set_ylim(0, 3)
        draw(ax)
        fig.canvas.draw()
        return np.asarray(fig.canvas.buffer_rgba()).copy()

    ours = pixels(lambda ax: charts.scatter_points(ax, xs, ys, linewidths=1.5, **style))
    theirs = pixels(lambda ax: ax.scatter(xs, ys, linewidths=1.5, **style))
    assert (ours != 255).any()  # something was drawn
    assert np.array_equal(ours, theirs)


def test_a_chart_without_its_legend_lists_it_as_key_entries():
    events = crowded_log()
    fig = charts.dashboard_chart(CompileLog(events), legend=False)
    assert fig.axes[0].get_legend() is None and texts_outside(fig) == []
    functions = [k for k in fig.key if k.function]
    assert len(functions) == len({(e.function, e.location) for e in events})
    assert sum(k.weight for k in functions) == graphs(events)
    assert any("<img src=x" in k.label for k in functions)  # the plain label, escaped by views
    marks = {k.label: (k.marker, k.filled) for k in fig.key if not k.function}
    assert marks["limit hit"] == ("X", True) and marks["failed"] == ("x", False)
    assert marks["recompile"] == ("o", False) and marks["first compile"] == ("o", True)
    with_legend = charts.dashboard_chart(CompileLog(events))
    assert with_legend.axes[0].get_legend() is not None and with_legend.key == fig.key
