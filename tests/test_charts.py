"""charts: figures built from hand-made events (points per function, marks, x modes, PNG)."""
from __future__ import annotations

import subprocess
import sys
import threading

import numpy as np
import pytest
from matplotlib.colors import to_rgba
from matplotlib.figure import Figure

from neuronkit.views import charts
from neuronkit.events import CompileEvent, CompileLog

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
    """Offsets of every scatter, keyed by its gid (function or rank) or its label."""
    ax = fig.axes[0]
    return {(c.get_gid() or c.get_label()): np.asarray(c.get_offsets()) for c in ax.collections}


def test_timeline_one_scatter_per_function_with_its_points():
    fig = charts.timeline(make_log())
    pts = scatters(fig)
    assert len(pts["forward"]) == 3 and len(pts["wrapper"]) == 1  # graphs only
    assert pts["forward"][:, 0].tolist() == [0.0, 2.0, 4.0]  # seconds since the first compile
    assert pts["forward"][:, 1].tolist() == [0.5, 0.4, 0.3]  # compile seconds
    assert len(fig.axes[0].collections) == 4  # forward, wrapper, failed, limit hit


def test_timeline_marks_limit_hits_and_failures():
    fig = charts.timeline(make_log())
    pts = scatters(fig)
    assert pts["limit hit"][:, 0].tolist() == [7.0, 10.0]
    assert pts["failed"][:, 0].tolist() == [8.0]
    hit = next(c for c in fig.axes[0].collections if c.get_label() == "limit hit")
    assert to_rgba(charts.LIMIT_COLOUR) == tuple(hit.get_facecolor()[0])
    notes = [t.get_text() for t in fig.axes[0].texts]
    assert any("limit hit (2x)" in n and "eager" in n for n in notes)


def test_first_compiles_filled_recompiles_hollow():
    fig = charts.timeline(make_log())
    forward = next(c for c in fig.axes[0].collections if c.get_gid() == "forward")
    faces = forward.get_facecolors()
    edge = tuple(forward.get_edgecolors()[0])
    assert tuple(faces[0]) == edge  # first: filled in the function's colour
    assert all(tuple(f) == to_rgba("white") for f in faces[1:])  # recompiles: hollow


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
    assert charts.timeline(make_log(), ax=right) is fig
    assert charts.graph_growth(make_log(), ax=left) is fig
    assert len(right.collections) == 4 and len(left.lines) == 2 and len(fig.axes) == 2


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
    code = ("import sys; from neuronkit.views import charts; from neuronkit.events import CompileLog;"
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
    from neuronkit.events import CompileEvent as E

    events = [E(function="$\\frac{$", kind="first", started_at=1.0, duration_s=1.0),
              E(function="evil\x1b[2J\u202e", kind="recompile", started_at=2.0, duration_s=1.0)]
    for draw in (charts.timeline, charts.graph_growth):
        fig = draw(events)
        png = charts.png_bytes(fig)                      # drawing raised ValueError before
        assert png.startswith(charts.PNG_SIGNATURE)
        labels = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
        assert not any("\x1b" in t or "\u202e" in t for t in labels)


def test_graph_breaks_have_their_own_mark():
    from neuronkit.events import CompileEvent as E

    events = [E(function="f", kind="first", started_at=1.0, duration_s=1.0),
              E(function="f", kind="graph_break", started_at=2.0, duration_s=0.2)]
    labels = [t.get_text() for t in charts.timeline(events).axes[0].get_legend().get_texts()]
    assert "graph break (1)" in labels and "failed" not in labels
