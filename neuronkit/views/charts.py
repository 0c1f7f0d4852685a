"""Charts of a compile log: pure functions from a log to a matplotlib Figure.

    fig = charts.timeline(log)            # one marker per compile, colour per function
    charts.save_png(fig, "compiles.png")

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas, never through pyplot, so
they need no display and can be drawn from any thread (the widget redraws on every event). They
show themselves in Jupyter as a PNG (``_repr_png_``), with or without ``%matplotlib inline``.

Drawing cost hardly grows with the log: each function (or rank) is one collection of first
compiles and one of recompiles (uniform markers: Agg stamps one raster; built directly, not by
``ax.scatter``), and a series of more than ``MAX_POINTS`` points keeps one point per small cell
of the axes. Compile seconds go on a log scale when they span ``LOG_SCALE_SPAN`` or more.
Functions that share a name are told apart by their place (``forward (modeling_qwen3.py:440)``).
Layout and legend: ``chart_layout.py``.
"""
from __future__ import annotations

import io
import os
from operator import attrgetter
from pathlib import Path
from typing import Any, Iterable, Literal, cast

import numpy as np
from matplotlib import figure
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.markers import MarkerStyle
from matplotlib.lines import Line2D
from matplotlib.transforms import IdentityTransform
from matplotlib.ticker import FuncFormatter, MaxNLocator, NullLocator

from neuronkit.views.chart_layout import (LIMIT_COLOUR, MARK_GREY, PALETTE, TITLE_FONT, KeyEntry,
                                          LegendEntries, fit_layout, legend_label, plain_label)
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.events.facts import as_events, function_labels

__all__ = ["timeline", "graph_growth", "dashboard_chart", "png_bytes", "save_png", "PNG_SIGNATURE",
           "LOG_SCALE_SPAN", "MAX_POINTS", "plain_log_ticks", "seconds_scale"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
XLABELS = {"time": "seconds since the first compile", "call": "compile event number"}
LOG_SCALE_SPAN = 100.0  # largest / smallest positive compile seconds from which y is logarithmic
MAX_POINTS = 500  # a series with more points keeps one per cell of a CELLS grid over the axes
CELLS = (120, 48)  # about 5 px a cell on the dashboard's axes: less than a marker (8 px)
TICKS = 6  # the most tick labels an axis gets (each text costs as much to draw as ~500 marks)


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


def column(events: list[CompileEvent], field: str) -> np.ndarray:
    """One number per event (None: 0), read at C speed."""
    values = np.array(list(map(attrgetter(field), events)), dtype=float)  # None -> nan
    values[np.isnan(values)] = 0.0
    return values


def _check(x: str, by: str = "function") -> None:
    if x not in XLABELS:
        raise ValueError(f"x must be 'time' or 'call', got {x!r}")
    if by not in ("function", "rank"):
        raise ValueError(f"by must be 'function' or 'rank', got {by!r}")


def _xs(starts: np.ndarray, x: str) -> np.ndarray:
    """Seconds since the first event's start, or the event number (its place in the log)."""
    return starts - starts.min() if x == "time" else np.arange(len(starts), dtype=float)


def _empty(fig: figure.Figure, ax: Axes, title: str, own_axes: bool) -> figure.Figure:
    ax.text(0.5, 0.5, "no compile events", ha="center", va="center", fontsize=12,
            color=MARK_GREY, transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    text = ax.set_title(title, fontsize=TITLE_FONT)
    if own_axes:
        fit_layout(fig, ax, text, None)
    return fig


def colours(keys: Iterable[object]) -> dict[object, str]:
    """A stable colour per key, in the order given."""
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


def _group_key(e: CompileEvent, by: str, labels: dict[tuple[str, str], str]) -> str:
    return labels[e.function, e.location] if by == "function" else f"rank {e.rank}"


def plain_log_ticks(ax: Axes) -> None:
    """Log-axis tick labels as plain numbers (0.1, 1, 10): matplotlib's default writes them as
    math text, whose parser costs a PNG redraw tens of milliseconds."""
    ax.yaxis.set_major_formatter(FuncFormatter(lambda value, _: f"{value:g}"))
    ax.yaxis.set_minor_locator(NullLocator())  # each minor tick is an artist built per draw


def seconds_scale(seconds: Iterable[float]) -> Literal["linear", "log"]:
    """``log`` when the positive seconds span ``LOG_SCALE_SPAN`` or more (largest / smallest)."""
    values = np.asarray(seconds if isinstance(seconds, np.ndarray) else list(seconds), dtype=float)
    values = values[values > 0]
    return "log" if values.size and values.max() / values.min() >= LOG_SCALE_SPAN else "linear"


def padded_limits(values: np.ndarray, scale: str = "linear", from_zero: bool = False,
                  headroom: float = 0.04) -> tuple[float, float]:
    """Axis limits that hold every value with a margin (``headroom`` of the span above, 4%
    below); a single value sits mid-axes. ``from_zero``: a linear axis starts (just below) 0."""
    if scale == "log":
        positive = values[values > 0]
        lo, hi = (float(positive.min()), float(positive.max())) if positive.size else (0.1, 1.0)
        return lo / 2.5, hi * 2.5
    lo, hi = (float(values.min()), float(values.max())) if values.size else (0.0, 0.0)
    if hi == lo:  # one value
        half = abs(hi) or 1.0
        return (-0.08 * hi, 2.0 * hi) if from_zero and hi > 0 else (lo - half, hi + half)
    lo = min(lo, 0.0) if from_zero else lo
    return lo - 0.04 * (hi - lo), hi + headroom * (hi - lo)


def thin(xs: np.ndarray, ys: np.ndarray, xlim: tuple[float, float], ylim: tuple[float, float],
         log_y: bool = False) -> np.ndarray:
    """Indices of the points to draw: all of at most ``MAX_POINTS``, else the first point in
    each cell of a ``CELLS`` grid over the limits (the others would hide under its marker)."""
    if len(xs) <= MAX_POINTS:
        return np.arange(len(xs))
    if log_y:
        ys, ylim = np.log10(np.maximum(ys, ylim[0])), (np.log10(ylim[0]), np.log10(ylim[1]))
    cols, rows = CELLS
    cx = np.clip((xs - xlim[0]) / max(xlim[1] - xlim[0], 1e-12) * cols, 0, cols).astype(np.int64)
    cy = np.clip((ys - ylim[0]) / max(ylim[1] - ylim[0], 1e-12) * rows, 0, rows).astype(np.int64)
    _, first = np.unique(cx * (rows + 1) + cy, return_index=True)
    return np.sort(first)


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
    _check(x, by)
    events = as_events(log)
    own_axes = ax is None  # on a caller's (possibly shared) axes, leave the limits to them
    fig, ax = figure_axes(ax, figsize)
    if not events:
        return _empty(fig, ax, "Compile timeline", own_axes)
    labels = function_labels(events) if by == "function" else {}
    xs = _xs(column(events, "started_at"), x)
    durations, builds = column(events, "duration_s"), column(events, "neff_s")
    totals = durations + builds  # CompileEvent.total_s
    kinds = np.array(list(map(attrgetter("kind"), events)))
    keys = ([labels[e.function, e.location] for e in events] if by == "function"
            else [f"rank {e.rank}" for e in events])
    order = list(dict.fromkeys(keys))  # every function gets its colour, in order of appearance
    if by == "rank":
        order.sort(key=lambda k: int(k.split()[-1]))
    palette = colours(order)
    graph = np.isin(kinds, GRAPH_KINDS)
    scale = seconds_scale(totals[graph | (kinds == "failed")])
    log_y, xlim = scale == "log", padded_limits(xs)
    ylim = padded_limits(totals, scale, from_zero=True, headroom=0.12)  # room for the notes
    if log_y:
        ax.set_yscale("log")
        plain_log_ticks(ax)
    if own_axes:  # limits first: no autoscaling while the marks are added
        ax.set_xlim(xlim)
        ax.set_ylim(ylim)
    bottom = ylim[0] * 1.3 if log_y else 0.0  # where a 0 s mark sits on a log axis
    ys = np.maximum(totals, bottom) if log_y else totals

    def scatter(idx: np.ndarray, values: np.ndarray = ys, **style: Any) -> None:
        keep = idx[thin(xs[idx], values[idx], xlim, ylim, log_y)]
        scatter_points(ax, xs[keep], values[keep], **style)

    index = {k: i for i, k in enumerate(order)}
    group = np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))
    functions: list[tuple[Artist, int]] = []
    key_entries: list[KeyEntry] = []
    for gi, key in enumerate(order):
        mine = graph & (group == gi)
        colour, name = palette[key], legend_label(key)
        functions.append((Line2D([], [], ls="", marker="o", color=colour, label=name),
                          int(mine.sum())))
        key_entries.append(KeyEntry(key, colour, function=True, weight=int(mine.sum())))
        for kind, face in (("first", colour), ("recompile", "white")):
            idx = np.flatnonzero(mine & (kinds == kind))
            if idx.size:
                scatter(idx, s=36, linewidths=1.5, edgecolors=colour, facecolors=face,
                        label=name, gid=plain_label(key), zorder=3)
        built = np.flatnonzero(mine & (totals > durations))
        if built.size:  # on Neuron: Dynamo's part up to the mark's foot, the NEFF build above it
            built = built[thin(xs[built], totals[built], xlim, ylim, log_y)]
            foot, nan = np.maximum(durations[built], bottom), np.full(built.size, np.nan)
            ax.plot(np.column_stack([xs[built], xs[built], nan]).ravel(),  # one path, NaN-cut
                    np.column_stack([foot, ys[built], nan]).ravel(), color=colour, lw=3,
                    alpha=0.35, zorder=2, solid_capstyle="butt")
    marked: list[Artist] = []
    marks = (("kernels", "D", 28, "#795548", totals), ("graph_break", "|", 80, "#616161", totals),
             ("failed", "x", 50, "#000000", totals), ("limit_hit", "X", 110, LIMIT_COLOUR, durations))
    for kind, marker, size, colour, values in marks:
        idx = np.flatnonzero(kinds == kind)
        if not idx.size:
            continue
        label = _mark_label(kind, [events[i] for i in idx])
        plotted = np.maximum(values, bottom) if log_y else values
        scatter(idx, plotted, marker=marker, s=size, color=colour, label=label,
                zorder=5 if kind == "limit_hit" else 4)
        marked.append(ax.collections[-1])
        key_entries.append(KeyEntry(label, colour, marker, marker in "DX"))
        if kind == "limit_hit":
            _note_limit_hits(ax, xs, plotted, idx, xlim, ylim, log_y)
    marked += [Line2D([], [], ls="", marker="o", color=MARK_GREY, label="first compile"),
               Line2D([], [], ls="", marker="o", color=MARK_GREY, markerfacecolor="white",
                      label="recompile")]
    key_entries += [KeyEntry("first compile", MARK_GREY),
                    KeyEntry("recompile", MARK_GREY, filled=False)]
    if isinstance(fig, Figure):
        fig.key = key_entries
    entries = LegendEntries(functions, marked)
    ax.set_xlabel(XLABELS[x])
    seconds = "compile seconds (+ NEFF)" if any(e.neff_compile_s for e in events) else \
        "compile seconds"
    ax.set_ylabel(seconds + (", log scale" if log_y else ""))
    ax.xaxis.set_major_locator(MaxNLocator(TICKS, integer=x == "call"))
    if not log_y:
        ax.yaxis.set_major_locator(MaxNLocator(TICKS))
    neff, noun = float(builds.sum()), "event" if len(events) == 1 else "events"
    title = ax.set_title(f"Compile timeline: {len(events)} {noun}, {totals.sum():.1f} s compiling"
                         + (f" (NEFF builds {neff:.1f} s)" if neff else ""), fontsize=TITLE_FONT,
                         y=1.0)  # placed, not found by measuring the axes' decorations per draw
    ax.grid(True, alpha=0.3)
    if own_axes:
        fit_layout(fig, ax, title, entries if legend else None)
    elif legend:
        entries.draw(ax)
    return fig


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


def _mark_label(kind: str, events: list[CompileEvent]) -> str:
    if kind == "kernels":
        forecast = " forecast" if all(e.forecast for e in events) else ""
        return f"eager kernels ({sum(e.kernels for e in events)}{forecast})"
    return f"graph break ({len(events)})" if kind == "graph_break" else kind.replace("_", " ")


def _note_limit_hits(ax: Axes, xs: np.ndarray, ys: np.ndarray, hits: np.ndarray,
                     xlim: tuple[float, float], ylim: tuple[float, float], log_y: bool) -> None:
    """A note by the first limit hit, on its side towards the middle of the axes."""
    first = int(hits[0])
    right_half = xs[first] > (xlim[0] + xlim[1]) / 2
    middle = float(np.sqrt(ylim[0] * ylim[1])) if log_y else (ylim[0] + ylim[1]) / 2
    upper_half = ys[first] > middle
    ax.annotate(f"recompile limit hit ({hits.size}x): eager fallback", (xs[first], ys[first]),
                xytext=(-8 if right_half else 8, -14 if upper_half else 14),
                ha="right" if right_half else "left", va="top" if upper_half else "baseline",
                textcoords="offset points", color=LIMIT_COLOUR, fontsize=8)


def graph_growth(log: CompileLog | Iterable[CompileEvent], ax: Axes | None = None,
                 x: Literal["time", "call"] = "call",
                 by: Literal["function", "rank"] = "function",
                 figsize: tuple[float, float] = (8.0, 3.2)) -> figure.Figure:
    """Graphs compiled so far per function (or rank), a step line; red X where the limit was hit.

    ``figsize`` (inches) sizes the new figure; it is ignored when drawing on a given ``ax``.
    """
    _check(x, by)
    events = as_events(log)
    own_axes = ax is None
    fig, ax = figure_axes(ax, figsize)
    if not events:
        return _empty(fig, ax, f"Graphs per {by}", own_axes)
    xs = _xs(np.array([e.started_at for e in events], dtype=float), x).tolist()
    end = xs[-1] if x == "call" else max(xs)
    labels = function_labels(events) if by == "function" else {}
    lines: dict[str, tuple[list[float], list[int]]] = {}
    hits: list[tuple[float, int]] = []
    for i, e in enumerate(events):
        px, py = lines.setdefault(_group_key(e, by, labels), ([], []))
        if e.kind in GRAPH_KINDS:
            px.append(xs[i])
            py.append(len(py) + 1)
        elif e.kind == "limit_hit":
            hits.append((xs[i], len(py)))
    keys = sorted(lines, key=lambda k: int(k.split()[-1])) if by == "rank" else list(lines)
    palette = colours(keys)  # the same colours as timeline()
    functions: list[tuple[Artist, int]] = []
    for name in keys:
        px, py = lines[name]
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
    title = ax.set_title(f"Graphs per {by}", fontsize=TITLE_FONT)
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
