"""Charts of a compile log: pure functions from a log to a matplotlib Figure.

    fig = charts.timeline(log)            # one marker per compile, colour per function
    charts.save_png(fig, "compiles.png")

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas, never through pyplot, so
they need no display and can be drawn from any thread (the widget redraws on every event). They
show themselves in Jupyter as a PNG (``_repr_png_``), with or without ``%matplotlib inline``.

Drawing cost hardly grows with the log: each function (or rank) is one collection of first
compiles and one of recompiles (uniform markers: Agg stamps one raster; built directly, not by
``ax.scatter``), and a big series is thinned. What is plotted (columns, series, scale, limits,
thinning): ``chart_data.py``; layout and legend: ``chart_layout.py``. Functions that share a name
are told apart by their place (``forward (modeling_qwen3.py:440)``).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable, Literal, cast

import numpy as np
from matplotlib import figure
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import PathCollection
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.text import Text
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator
from matplotlib.transforms import IdentityTransform

from neuronkit.advice.excerpts import bounded_events
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import as_events, readable, synthetic_reason
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.chart_data import (
    XLABELS,
    TimelineData,
    check_axes,
    colours,
    graph_steps,
    mark_label,
    padded_limits,
    positions,
    seconds_title,
    timeline_data,
)
from neuronkit.views.chart_layout import (
    LIMIT_COLOUR,
    MARK_GREY,
    TITLE_FONT,
    KeyEntry,
    LegendEntries,
    fit_layout,
    legend_label,
    plain_label,
)

__all__ = ["timeline", "graph_growth", "dashboard_chart", "png_bytes", "save_png", "PNG_SIGNATURE",
           "Figure", "figure_axes", "plain_log_ticks", "scatter_points"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
TICKS = 6  # the most tick labels an axis gets (each text costs as much to draw as ~500 marks)
# the marks over the series: kind, marker, size, colour
MARKS = (("backward", "v", 36, "#5c6bc0"), ("cpu_fallback", "P", 70, "#e65100"),
         ("kernels", "D", 28, "#795548"), ("graph_break", "|", 80, "#616161"),
         ("failed", "x", 50, "#000000"), ("limit_hit", "X", 110, LIMIT_COLOUR))


class Figure(figure.Figure):
    """A matplotlib Figure that Jupyter shows as a PNG, even without ``%matplotlib inline``
    (its text form stays ``<Figure size 800x360 with 1 Axes>``). ``key``: the timeline's legend
    as rows, for a view that shows it beside the image (the dashboard)."""

    key: list[KeyEntry] = []

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def figure_axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[figure.Figure, Axes]:
    """The caller's axes, or a new headless Agg figure with one axes."""
    if ax is not None:
        # the caller's own figure (a SubFigure for a subfigure's axes, used like a Figure)
        return cast(figure.Figure, ax.figure), ax
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    return fig, fig.add_subplot()


def _empty(fig: figure.Figure, ax: Axes, title: str, own_axes: bool) -> figure.Figure:
    ax.text(0.5, 0.5, "no compile events", ha="center", va="center", fontsize=12,
            color=MARK_GREY, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    text = ax.set_title(title, fontsize=TITLE_FONT)
    if own_axes:
        fit_layout(fig, ax, text, None)
    return fig


def plain_log_ticks(ax: Axes) -> None:
    """Log-axis tick labels as plain numbers (0.1, 1, 10): matplotlib's default writes them as
    math text, whose parser costs a PNG redraw tens of milliseconds."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(NullLocator())  # each minor tick is an artist built per draw


def timeline(log: CompileLog | Iterable[CompileEvent], x: Literal["time", "call"] = "time",
             ax: Axes | None = None, by: Literal["function", "rank"] = "function",
             figsize: tuple[float, float] = (8.0, 3.6), legend: bool = True) -> figure.Figure:
    """Compile seconds per event over time (or event number), one colour per function or rank.

    ``figsize`` (inches) sizes the new figure; it is ignored when drawing on a given ``ax``.
    ``legend=False``: no legend in the image; the figure's ``key`` lists it for the caller.

    Filled circles are first compiles, hollow circles recompiles, black crosses failed compiles,
    and red X marks the recompile-limit hits where torch fell back to eager. The y axis is
    logarithmic when compile seconds span orders of magnitude (its label says so).
    """
    check_axes(x, by)
    events = bounded_events(readable(as_events(log)))  # a 20 MB name: its start
    own_axes = ax is None  # on a caller's (possibly shared) axes, leave the limits to them
    fig, ax = figure_axes(ax, figsize)
    mark = _synthetic_mark(log)
    if not events:
        return _empty(fig, ax, mark + "Compile timeline", own_axes)
    data = timeline_data(events, x, by)
    if data.log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    if own_axes:  # limits first: no autoscaling while the marks are added
        ax.set_xlim(data.xlim)
        ax.set_ylim(data.ylim)
    functions, key = _draw_series(ax, data)
    marked, mark_keys = _draw_marks(ax, data, events)
    marked += [Line2D([], [], ls="", marker="o", color=MARK_GREY, label="first compile"),
               Line2D([], [], ls="", marker="o", color=MARK_GREY, markerfacecolor="white",
                      label="recompile")]
    key += [*mark_keys, KeyEntry("first compile", MARK_GREY),
            KeyEntry("recompile", MARK_GREY, filled=False)]
    if isinstance(fig, Figure):
        fig.key = key
    entries = LegendEntries(functions, marked)
    title = _label_timeline(ax, data, events, x, mark)
    if own_axes:
        fit_layout(fig, ax, title, entries if legend else None)
    elif legend:
        entries.draw(ax)
    return fig


def _draw_series(ax: Axes, data: TimelineData) -> tuple[list[tuple[Artist, int]], list[KeyEntry]]:
    """Per function (or rank): a collection of first compiles, one of recompiles, and on Neuron
    a bar per NEFF build; its legend handle (weighed by its graphs) and key row."""
    ys = data.plotted(data.totals)
    functions: list[tuple[Artist, int]] = []
    key: list[KeyEntry] = []
    for gi, name in enumerate(data.order):
        mine = data.graph & (data.group == gi)
        colour, label = data.palette[name], legend_label(name)
        functions.append((Line2D([], [], ls="", marker="o", color=colour, label=label),
                          int(mine.sum())))
        key.append(KeyEntry(name, colour, function=True, weight=int(mine.sum())))
        for kind, face in (("first", colour), ("recompile", "white")):
            idx = np.flatnonzero(mine & (data.kinds == kind))
            if idx.size:
                keep = data.kept(idx, ys)
                scatter_points(ax, data.xs[keep], ys[keep], s=36, linewidths=1.5,
                               edgecolors=colour, facecolors=face, label=label,
                               gid=plain_label(name), zorder=3)
        _draw_builds(ax, data, np.flatnonzero(mine & (data.totals > data.durations)), colour, ys)
    return functions, key


def _draw_builds(ax: Axes, data: TimelineData, built: np.ndarray, colour: str,
                 ys: np.ndarray) -> None:
    """On Neuron: Dynamo's part up to the mark's foot, the NEFF build above it (one path)."""
    if not built.size:
        return
    built = data.kept(built, data.totals)
    foot, nan = np.maximum(data.durations[built], data.bottom), np.full(built.size, np.nan)
    ax.plot(np.column_stack([data.xs[built], data.xs[built], nan]).ravel(),  # one path, NaN-cut
            np.column_stack([foot, ys[built], nan]).ravel(), color=colour, lw=3,
            alpha=0.35, zorder=2, solid_capstyle="butt")


def _draw_marks(ax: Axes, data: TimelineData,
                events: list[CompileEvent]) -> tuple[list[Artist], list[KeyEntry]]:
    """The ``MARKS`` present (limit hits at Dynamo's seconds, the others at the total), a note
    by the first limit hit; their legend handles and key rows."""
    marked: list[Artist] = []
    key: list[KeyEntry] = []
    for kind, marker, size, colour in MARKS:
        idx = np.flatnonzero(data.kinds == kind)
        if not idx.size:
            continue
        label = mark_label(kind, [events[i] for i in idx])
        plotted = data.plotted(data.durations if kind == "limit_hit" else data.totals)
        keep = data.kept(idx, plotted)
        marked.append(scatter_points(ax, data.xs[keep], plotted[keep], marker=marker, s=size,
                                     color=colour, label=label,
                                     zorder=5 if kind == "limit_hit" else 4))
        key.append(KeyEntry(label, colour, marker, MarkerStyle(marker).is_filled()))  # as drawn
        if kind == "limit_hit":
            _note_limit_hits(ax, data, plotted, idx)
    return marked, key


def _note_limit_hits(ax: Axes, data: TimelineData, ys: np.ndarray, hits: np.ndarray) -> None:
    """A note by the first limit hit, on its side towards the middle of the axes."""
    first, (x0, x1), (y0, y1) = int(hits[0]), data.xlim, data.ylim
    right_half = data.xs[first] > (x0 + x1) / 2
    middle = float(np.sqrt(y0 * y1)) if data.log_y else (y0 + y1) / 2
    upper_half = ys[first] > middle
    ax.annotate(f"recompile limit hit ({hits.size}x): eager fallback", (data.xs[first], ys[first]),
                xytext=(-8 if right_half else 8, -14 if upper_half else 14),
                ha="right" if right_half else "left", va="top" if upper_half else "baseline",
                textcoords="offset points", color=LIMIT_COLOUR, fontsize=8)


def _synthetic_mark(log: object) -> str:
    """``SYNTHETIC · `` before the title of a chart of a log whose header says it is no
    measurement (``synthetic_reason``), else ""."""
    return "SYNTHETIC · " if synthetic_reason(getattr(log, "header", None)) else ""


def _label_timeline(ax: Axes, data: TimelineData, events: list[CompileEvent], x: str,
                    mark: str = "") -> Text:
    """Axis labels, ticks, grid and the title: ``mark``, how many events, the seconds by source
    (``seconds_title``)."""
    ax.set_xlabel(XLABELS[x])
    seconds = "compile seconds (+ NEFF)" if any(e.neff_compile_s for e in events) else \
        "compile seconds"
    ax.set_ylabel(seconds + (", log scale" if data.log_y else ""))
    ax.xaxis.set_major_locator(MaxNLocator(TICKS, integer=x == "call"))
    if not data.log_y:
        ax.yaxis.set_major_locator(MaxNLocator(TICKS))
    noun = "event" if len(events) == 1 else "events"
    title = ax.set_title(f"{mark}Compile timeline: {len(events)} {noun}, {seconds_title(data, events)}",
                         fontsize=TITLE_FONT,
                         y=1.0)  # placed, not found by measuring the axes' decorations per draw
    ax.grid(True, alpha=0.3)
    return title


def scatter_points(ax: Axes, xs: np.ndarray, ys: np.ndarray, marker: str = "o", s: float = 36.0,
                   color: str | None = None, facecolors: str | None = None,
                   edgecolors: str | None = None, linewidths: float = 1.5,
                   **style: object) -> PathCollection:
    """What ``ax.scatter`` draws (one marker size, one colour) for a fraction of its cost: the
    collection is built directly and the data limits grown from the points at once.

    ``color`` fills and strokes the marker; ``facecolors`` and ``edgecolors`` set the two apart.
    ``style``: label, gid, zorder, alpha.
    """
    points = np.column_stack([xs, ys])
    shape = MarkerStyle(marker)
    face = facecolors or color or "none"
    edge = edgecolors or (color if shape.is_filled() and color is not None else "face")
    collection = PathCollection([shape.get_path().transformed(shape.get_transform())],
                                sizes=[s], offsets=points, offset_transform=ax.transData,
                                transform=IdentityTransform(),  # marker sizes are in points
                                facecolors=face, edgecolors=edge, linewidths=linewidths,
                                **style)
    ax.add_collection(collection, autolim=False)
    ax.update_datalim(points)
    if ax.get_autoscalex_on() or ax.get_autoscaley_on():  # a caller's axes: they hold the points
        ax.autoscale_view()
    return collection


def graph_growth(log: CompileLog | Iterable[CompileEvent], ax: Axes | None = None,
                 x: Literal["time", "call"] = "call",
                 by: Literal["function", "rank"] = "function",
                 figsize: tuple[float, float] = (8.0, 3.2)) -> figure.Figure:
    """Graphs compiled so far per function (or rank), a step line; red X where the limit was hit.

    ``figsize`` (inches) sizes the new figure; it is ignored when drawing on a given ``ax``.
    """
    check_axes(x, by)
    events = bounded_events(readable(as_events(log)))  # a 20 MB name: its start
    own_axes = ax is None
    fig, ax = figure_axes(ax, figsize)
    if not events:
        return _empty(fig, ax, f"{_synthetic_mark(log)}Graphs per {by}", own_axes)
    xs = positions(np.array([e.started_at for e in events], dtype=float), x).tolist()
    end = xs[-1] if x == "call" else max(xs)
    lines, hits = graph_steps(events, xs, by)
    palette = colours(lines)  # the same colours as timeline()
    functions: list[tuple[Artist, int]] = []
    for name, (px, py) in lines.items():
        if px:
            ax.step(px + [end], py + [py[-1]], where="post", color=palette[name], lw=1.8,
                    label=f"{legend_label(name)} ({py[-1]})", gid=plain_label(name),  # a dot a graph
                    marker="o" if len(px) <= 50 else "", ms=4, markevery=slice(0, len(px)))
            functions.append((ax.lines[-1], py[-1]))
    marks: list[Artist] = []
    if hits:
        marks.append(ax.scatter([h[0] for h in hits], [h[1] for h in hits], marker="X", s=90,
                                color=LIMIT_COLOUR, zorder=5, label="limit hit"))
    entries = LegendEntries(functions, marks)
    ax.set_xlabel(XLABELS[x])
    ax.set_ylabel("graphs compiled")
    counts = np.array([py[-1] for px, py in lines.values() if py] or [0], dtype=float)
    ax.set_ylim(0, max(counts.max() * 1.12, counts.max() + 1))
    ax.yaxis.set_major_locator(MaxNLocator(TICKS, integer=True))
    ax.xaxis.set_major_locator(MaxNLocator(TICKS, integer=x == "call"))
    title = ax.set_title(f"{_synthetic_mark(log)}Graphs per {by}", fontsize=TITLE_FONT)
    ax.grid(True, alpha=0.3)
    if own_axes:
        ax.set_xlim(padded_limits(np.asarray(xs)))
        fit_layout(fig, ax, title, entries)
    else:
        entries.draw(ax)
    return fig


def dashboard_chart(log: CompileLog, legend: bool = True) -> figure.Figure:
    """The dashboard's chart: :func:`timeline` on a wide figure. The dashboard itself shows the
    legend as HTML beside the image (``legend=False``; see ``Figure.key``): cheaper to draw on
    every redraw than in the image, and never cut."""
    return timeline(log, figsize=(9.0, 3.2) if legend else (6.6, 3.2), legend=legend)


def png_bytes(fig: figure.Figure, dpi: int = 100) -> bytes:
    """The figure as PNG bytes (for widgets and notebooks)."""
    buf = io.BytesIO()
    fig.savefig(buf, format="png", dpi=dpi, pil_kwargs={"compress_level": 1})
    return buf.getvalue()


def save_png(fig: figure.Figure, path: str | os.PathLike[str], dpi: int = 100) -> Path:
    """Write the figure as a PNG file (folders are created) and return its path."""
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_bytes(png_bytes(fig, dpi=dpi))
    return out
