"""Two runs side by side: graphs, seconds, a projection of Neuron time, and what changed.

    cmp = compare_logs(naive, bucketed, names=("naive", "bucketed"))
    print(comparison_text(cmp))           # a table, the headline, what changed
    comparison_html(cmp)                  # the same as an HTML table
    compare_chart(naive, bucketed, names=("naive", "bucketed"))   # both timelines, one x axis

Projected Neuron time is projected as ``neuronkit demo`` and ``bench/generation.py`` do: the
run's execution time (its wall time minus the seconds it spent compiling, when the log records
its wall time; else 0) plus graphs x ``compile_cost_s``, an assumed cost of one Neuron compile
(``NEURON_COMPILE_COST_S``, 60 s, as in the demo), not a measurement. Functions are matched across
runs by name and file (``forward`` in ``modeling_llama.py``), not by full path, so two checkouts
of the same code compare. Every value from a log or a name passes through ``safe`` on output.
"""
from __future__ import annotations

import math
import os
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Iterable, Sequence

import numpy as np
from matplotlib import figure
from matplotlib.artist import Artist

from neuronkit.advice.excerpts import bounded_events, cut_long
from neuronkit.advice.run_diff import two_names
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import (
    as_events,
    compile_seconds,
    graphs,
    neff_seconds,
    readable,
    shape_key,
    total_seconds,
)
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_attr, html_text, terminal_safe
from neuronkit.views.chart_data import padded_limits, seconds_scale
from neuronkit.views.chart_layout import (
    LIMIT_COLOUR,
    TITLE_FONT,
    LegendEntries,
    fit_layout,
    legend_label,
    plain_label,
)
from neuronkit.views.charts import figure_axes, plain_log_ticks, scatter_points
from neuronkit.views.text_layout import pieces, wrap
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S as NEURON_COMPILE_COST_S  # 60 s a graph

__all__ = ["Comparison", "GraphCountChange", "RunTotals", "compare_chart", "compare_logs",
           "comparison_html", "comparison_text", "graphs_headline", "projected_seconds",
           "NEURON_COMPILE_COST_S", "RUN_COLOURS"]

RUN_COLOURS = ("#1f77b4", "#ff7f0e")  # run A, run B
RUN_MARKERS = ("o", "s")  # told apart where their points fall on one another
NAME_CHARS = 24  # a run's name in the chart's legend and title (shortened there)
NAME_WIDTH = 40  # a run's column in the text table: a longer name wraps onto more lines
LIST_LIMIT = 10  # entries of a what-changed list shown before "and N more"
Run = CompileLog | Iterable[CompileEvent]


@dataclass(frozen=True)
class RunTotals:
    """One run's counts and seconds. ``compiling_s``: the compile seconds (Dynamo + NEFF) of
    the rank that compiled longest, what the wall time held; ``projected_s``: see the module."""

    name: str
    events: int
    graphs: int
    compile_s: float
    neff_s: float
    total_s: float
    limit_hits: int
    failures: int
    graph_breaks: int
    wall_s: float | None
    compiling_s: float
    projected_s: float


@dataclass(frozen=True)
class GraphCountChange:
    """A function that compiled in both runs, a different number of graphs."""

    function: str
    graphs_a: int
    graphs_b: int


@dataclass(frozen=True)
class Comparison:
    """Two runs and what changed from the first (A) to the second (B)."""

    a: RunTotals
    b: RunTotals
    only_in_a: tuple[str, ...]  # functions that built graphs in A only
    only_in_b: tuple[str, ...]
    graph_counts_changed: tuple[GraphCountChange, ...]
    shapes_only_in_a: tuple[tuple[str, str], ...]  # (function, shape_key) seen in A only
    shapes_only_in_b: tuple[tuple[str, str], ...]
    compile_cost_s: float
    headline: str


def projected_seconds(graph_count: int, wall_s: float | None, compiling_s: float,
                      compile_cost_s: float = NEURON_COMPILE_COST_S) -> float:
    """Projected Neuron seconds: execution (wall minus compiling, 0 without a wall time) plus
    ``graph_count`` x ``compile_cost_s`` (one Neuron compile's assumed cost)."""
    execution = max(wall_s - compiling_s, 0.0) if wall_s else 0.0
    return execution + graph_count * compile_cost_s


def _wall(run: Run) -> float | None:
    wall = getattr(run, "wall_time_s", None)
    return float(wall) if isinstance(wall, (int, float)) and math.isfinite(wall) else None


def _totals(name: str, run: Run, events: list[CompileEvent], compile_cost_s: float) -> RunTotals:
    per_rank: dict[int, float] = defaultdict(float)
    for e in events:
        per_rank[e.rank] += e.total_s
    kinds = Counter(e.kind for e in events)
    compiling = max(per_rank.values(), default=0.0)
    wall, built = _wall(run), graphs(events)
    return RunTotals(name=name, events=len(events), graphs=built,
                     compile_s=compile_seconds(events), neff_s=neff_seconds(events),
                     total_s=total_seconds(events), limit_hits=kinds["limit_hit"],
                     failures=kinds["failed"], graph_breaks=kinds["graph_break"], wall_s=wall,
                     compiling_s=compiling,
                     projected_s=projected_seconds(built, wall, compiling, compile_cost_s))


def _place(location: str) -> str:
    """A location without its folders (``/x/modeling_llama.py:44`` -> ``modeling_llama.py:44``)."""
    return os.path.basename(location.replace("\\", "/"))


def _function_names(*runs: list[CompileEvent]) -> dict[tuple[str, str], str]:
    """A name per (function, place) over both runs: the name alone where it is one function,
    else ``name (file.py:line)``."""
    keys = {(e.function, _place(e.location)) for events in runs for e in events}
    count = Counter(function for function, _ in keys)
    return {(f, p): f if count[f] == 1 else f"{f} ({p or '?'})" for f, p in keys}


def _times(ratio: float) -> str:
    return f"{ratio:.0f}x" if ratio >= 10 or float(ratio).is_integer() else f"{ratio:.1f}x"


def _graphs_noun(n: int) -> str:
    return "no graphs" if n == 0 else f"{n} graph" if n == 1 else f"{n} graphs"


def graphs_headline(a: RunTotals, b: RunTotals) -> str:
    """``B compiled 1 graph instead of 11: 11x fewer`` (or more, or the same)."""
    if a.graphs == b.graphs:
        return f"{a.name} and {b.name} compiled the same number of graphs: {a.graphs}"
    text = f"{b.name} compiled {_graphs_noun(b.graphs)} instead of " + \
        ("none" if a.graphs == 0 else str(a.graphs))
    if a.graphs and b.graphs:
        ratio = a.graphs / b.graphs if b.graphs < a.graphs else b.graphs / a.graphs
        text += f": {_times(ratio)} {'fewer' if b.graphs < a.graphs else 'more'}"
    return text


def compare_logs(a: Run, b: Run, names: Sequence[str] = ("A", "B"),
                 compile_cost_s: float = NEURON_COMPILE_COST_S) -> Comparison:
    """Compare run ``a`` with run ``b`` (a :class:`CompileLog` or a list of events each).

    ``compile_cost_s``: the assumed seconds of one Neuron compile, for the projection.
    """
    name_a, name_b = two_names(names)
    if isinstance(compile_cost_s, bool) or not isinstance(compile_cost_s, (int, float)) \
            or not math.isfinite(compile_cost_s) or compile_cost_s < 0:
        raise ValueError(f"compile_cost_s must be a finite number of seconds >= 0, "
                         f"got {compile_cost_s!r}")
    # a field longer than any recorder writes (a hostile log) read by its start and length
    events_a, events_b = (bounded_events(readable(as_events(run))) for run in (a, b))
    label = _function_names(events_a, events_b)
    counts_a, counts_b = ([label[e.function, _place(e.location)] for e in ev if e.kind in GRAPH_KINDS]
                          for ev in (events_a, events_b))
    built_a, built_b = Counter(counts_a), Counter(counts_b)
    shapes_a, shapes_b = ({(label[e.function, _place(e.location)], cut_long(shape_key(e))) for e in ev
                           if e.input_shapes} for ev in (events_a, events_b))
    totals_a = _totals(name_a, a, events_a, compile_cost_s)
    totals_b = _totals(name_b, b, events_b, compile_cost_s)
    return Comparison(
        a=totals_a, b=totals_b,
        only_in_a=tuple(sorted(set(built_a) - set(built_b))),
        only_in_b=tuple(sorted(set(built_b) - set(built_a))),
        graph_counts_changed=tuple(GraphCountChange(f, built_a[f], built_b[f])
                                   for f in sorted(set(built_a) & set(built_b))
                                   if built_a[f] != built_b[f]),
        shapes_only_in_a=tuple(sorted(shapes_a - shapes_b)),
        shapes_only_in_b=tuple(sorted(shapes_b - shapes_a)),
        compile_cost_s=float(compile_cost_s), headline=graphs_headline(totals_a, totals_b))


# -- text and HTML -------------------------------------------------------------------------------

def _rows(cmp: Comparison) -> list[tuple[str, str, str]]:
    """The table: (what, run A's value, run B's value), numbers formatted."""
    def seconds(value: float | None, spec: str = ".2f") -> str:
        return "-" if value is None else format(value, spec)

    a, b = cmp.a, cmp.b
    return [("graphs", str(a.graphs), str(b.graphs)),
            ("compile s (Dynamo)", seconds(a.compile_s), seconds(b.compile_s)),
            ("NEFF build s", seconds(a.neff_s), seconds(b.neff_s)),
            ("total compile s", seconds(a.total_s), seconds(b.total_s)),
            ("limit hits", str(a.limit_hits), str(b.limit_hits)),
            ("failures", str(a.failures), str(b.failures)),
            ("graph breaks", str(a.graph_breaks), str(b.graph_breaks)),
            ("events", str(a.events), str(b.events)),
            ("wall s", seconds(a.wall_s), seconds(b.wall_s)),
            ("projected Neuron s", seconds(a.projected_s, ".0f"), seconds(b.projected_s, ".0f"))]


def _projection_note(cmp: Comparison) -> str:
    return (f"projected Neuron s = execution (wall s minus compile s; 0 when a log has no wall "
            f"time) + graphs x {cmp.compile_cost_s:g} s per Neuron compile (an assumed cost, "
            "not a measurement)")


def _projection_line(cmp: Comparison) -> str:
    a, b = cmp.a.projected_s, cmp.b.projected_s
    if a == b or not a or not b:
        return f"projected Neuron time: {a:.0f} s -> {b:.0f} s"
    return (f"projected Neuron time: {a:.0f} s -> {b:.0f} s "
            f"({_times(max(a, b) / min(a, b))} {'less' if b < a else 'more'})")


def _changes(cmp: Comparison) -> list[tuple[str, list[str]]]:
    """What changed, as (heading, items) with the run names in the headings."""
    na, nb = cmp.a.name, cmp.b.name
    return [(f"compiled only in {na}", list(cmp.only_in_a)),
            (f"compiled only in {nb}", list(cmp.only_in_b)),
            (f"graph counts changed, {na} -> {nb}",
             [f"{c.function}: {c.graphs_a} -> {c.graphs_b}" for c in cmp.graph_counts_changed]),
            (f"shapes seen only in {na}", [f"{f} {s}" for f, s in cmp.shapes_only_in_a]),
            (f"shapes seen only in {nb}", [f"{f} {s}" for f, s in cmp.shapes_only_in_b])]


def _line(value: object) -> str:
    """A value as one terminal-safe line, whole."""
    return " ".join(terminal_safe(value).split())


def _name_lines(na: str, nb: str, label_width: int) -> tuple[int, list[str]]:
    """The table's column width and header lines: the run names, a long one wrapped in its
    column (at most ``NAME_WIDTH`` wide), never cut."""
    width = max(12, min(max(len(na), len(nb)), NAME_WIDTH))
    a, b = pieces(na, width), pieces(nb, width)
    a, b = [""] * (len(b) - len(a)) + a, [""] * (len(a) - len(b)) + b  # the last lines level
    return width, [f"  {'':<{label_width}} {pa:>{width}} {pb:>{width}}".rstrip()
                   for pa, pb in zip(a, b, strict=True)]


def comparison_text(cmp: Comparison, limit: int = LIST_LIMIT) -> str:
    """The comparison as plain, terminal-safe text: the table, the headline, what changed.
    Nothing is cut (long names and entries wrap within ``WIDTH``) but a field longer than any
    recorder writes, read by its start and length."""
    na, nb = _line(cmp.a.name), _line(cmp.b.name)
    rows = _rows(cmp)
    label_width = max(len(r[0]) for r in rows)
    width, head = _name_lines(na, nb, label_width)
    lines = [wrap(f"{na} vs {nb}"), *head]
    lines += [f"  {what:<{label_width}} {va:>{width}} {vb:>{width}}" for what, va, vb in rows]
    lines += ["", wrap(_line(cmp.headline)), wrap(_line(_projection_line(cmp))), "", "what changed"]
    for heading, items in _changes(cmp):
        if not items:
            lines.append(wrap(f"  {_line(heading)}: none"))
            continue
        lines.append(wrap(f"  {_line(heading)} ({len(items)}):"))
        lines += [wrap(f"    {_line(item)}") for item in items[:limit]]
        if len(items) > limit:
            lines.append(f"    and {len(items) - limit} more")
    lines += [""] + textwrap.wrap(_projection_note(cmp), 100)
    return "\n".join(lines)


def comparison_html(cmp: Comparison, limit: int = LIST_LIMIT) -> str:
    """The comparison as HTML: a side-by-side table, the headline, what changed. Every value
    is escaped; class names are fixed."""
    a, b = cmp.a.name, cmp.b.name
    head = (f'<tr><th></th><th title="{html_attr(a)}">{html_text(a)}</th>'
            f'<th title="{html_attr(b)}">{html_text(b)}</th></tr>')
    body = "".join(f'<tr><th scope="row">{html_text(what)}</th><td>{html_text(va)}</td>'
                   f"<td>{html_text(vb)}</td></tr>" for what, va, vb in _rows(cmp))
    parts = ['<div class="nk-compare">',
             f'<p class="nk-compare-headline"><b>{html_text(cmp.headline)}</b><br>'
             f"{html_text(_projection_line(cmp))}</p>",
             f'<table class="nk-table nk-compare-table"><thead>{head}</thead>'
             f"<tbody>{body}</tbody></table>",
             '<div class="nk-section">what changed</div><ul class="nk-compare-changes">']
    for heading, items in _changes(cmp):
        if not items:
            parts.append(f"<li>{html_text(heading)}: none</li>")
            continue
        shown = "".join(f"<li><code>{html_text(item)}</code></li>" for item in items[:limit])
        more = f"<li>and {len(items) - limit} more</li>" if len(items) > limit else ""
        parts.append(f"<li>{html_text(heading)} ({len(items)}):<ul>{shown}{more}</ul></li>")
    parts += ["</ul>", f'<p class="nk-muted">{html_text(_projection_note(cmp))}</p>', "</div>"]
    return "".join(parts)


# -- chart ---------------------------------------------------------------------------------------

def compare_chart(a: Run, b: Run, names: Sequence[str] = ("A", "B"),
                  figsize: tuple[float, float] = (8.0, 3.6)) -> figure.Figure:
    """Both runs' compiles on one axes: seconds since each run's first event (x), compile
    seconds (y; a log scale when they span orders of magnitude), one colour per run; graphs are
    circles (A) and squares (B), limit hits crosses."""
    run_names = two_names(names)
    fig, ax = figure_axes(None, figsize)
    runs = []
    for events in (readable(as_events(a)), readable(as_events(b))):
        starts = np.array([e.started_at for e in events], dtype=float)
        runs.append((events, starts - starts.min() if len(events) else starts,
                     np.array([e.total_s for e in events], dtype=float),
                     np.array([e.kind for e in events], dtype=object)))
    every_x = np.concatenate([xs for _, xs, _, _ in runs])
    graph_ys = np.concatenate([ys[np.isin(kinds, GRAPH_KINDS)] for _, _, ys, kinds in runs])
    log_y = seconds_scale(graph_ys) == "log"
    ylim = padded_limits(np.concatenate([ys for _, _, ys, _ in runs]),
                         "log" if log_y else "linear", from_zero=True, headroom=0.12)
    if log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    if len(every_x):  # limits first: no autoscaling while the marks are added
        ax.set_xlim(padded_limits(every_x))
        ax.set_ylim(ylim)
    bottom = ylim[0] * 1.3 if log_y else 0.0  # where a 0 s mark sits on a log axis
    series: list[tuple[Artist, int]] = []
    marks: list[Artist] = []
    for name, (events, xs, ys, kinds), colour, marker in zip(run_names, runs, RUN_COLOURS,
                                                             RUN_MARKERS, strict=True):
        plotted = np.maximum(ys, bottom) if log_y else ys
        built, hits = np.isin(kinds, GRAPH_KINDS), kinds == "limit_hit"
        short = legend_label(name, NAME_CHARS)
        label = f"{short}: {_graphs_noun(int(built.sum()))}, {total_seconds(events):.1f} s"
        series.append((scatter_points(ax, xs[built], plotted[built], s=30, marker=marker,
                                      color=colour, alpha=0.8, label=label, gid=plain_label(name),
                                      zorder=3),
                       int(built.sum())))
        if hits.any():
            marks.append(scatter_points(ax, xs[hits], plotted[hits], marker="X", s=80,
                                        color=colour, edgecolors=LIMIT_COLOUR, linewidths=1.0,
                                        zorder=4, label=f"{short}: limit hits ({int(hits.sum())})"))
    ax.set_xlabel("seconds since each run's first compile")
    ax.set_ylabel("compile seconds" + (", log scale" if log_y else ""))
    title = ax.set_title(" vs ".join(legend_label(name, NAME_CHARS) for name in run_names),
                         fontsize=TITLE_FONT)
    ax.grid(True, alpha=0.3)
    if not len(every_x):
        ax.text(0.5, 0.5, "no compile events", ha="center", va="center", color="#555555",
                transform=ax.transAxes)
    fit_layout(fig, ax, title, LegendEntries(series, marks))
    return fig
