"""Charts of a compile log: pure functions from a log to a matplotlib Figure.

    fig = charts.timeline(log)            # one marker per compile, colour per function
    charts.save_png(fig, "compiles.png")

Figures are built on ``matplotlib.figure.Figure`` with an Agg canvas, never through pyplot, so
they need no display, keep no global state and can be drawn from any thread (the widget redraws
on every event). They show themselves in Jupyter as a PNG (``_repr_png_``), with or without
``%matplotlib inline``. Each function (or rank) is one scatter, so a 1,000-event log draws quickly.
Functions that share a name are told apart by their place (``forward (modeling_qwen3.py:440)``).
"""
from __future__ import annotations

import io
import os
from pathlib import Path
from typing import Iterable, Literal, cast

from matplotlib import figure
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.lines import Line2D

from .safe import strip_control
from ..events import (GRAPH_KINDS, CompileEvent, CompileLog, as_events, function_labels,
                     neff_seconds, short_label, total_seconds)

__all__ = ["timeline", "graph_growth", "dashboard_chart", "png_bytes", "save_png", "PNG_SIGNATURE"]

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
LIMIT_COLOUR = "#d62728"
XLABELS = {"time": "seconds since the first compile", "call": "compile event number"}
_PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
            "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"]


def _plain(label: str) -> str:
    """A label from a log as plain text: no control characters, and ``$`` not read as maths
    (a crafted name like ``$\\frac{$`` would make matplotlib raise)."""
    return strip_control(label, keep_newlines=False).replace("$", r"\$")


class Figure(figure.Figure):
    """A matplotlib Figure that Jupyter shows as a PNG, even without ``%matplotlib inline``
    (its text form stays ``<Figure size 800x360 with 1 Axes>``)."""

    def _repr_png_(self) -> bytes:
        return png_bytes(self)


def _axes(ax: Axes | None, figsize: tuple[float, float]) -> tuple[figure.Figure, Axes]:
    """The caller's axes, or a new headless Agg figure with one axes."""
    if ax is not None:
        # the caller's own figure (a SubFigure for a subfigure's axes, used like a Figure)
        return cast(figure.Figure, ax.figure), ax
    fig = Figure(figsize=figsize, dpi=100)
    FigureCanvasAgg(fig)
    # fixed margins (room for the legend on the right): a layout engine would double draw time
    fig.subplots_adjust(left=0.08, right=0.76, bottom=0.15, top=0.9)
    return fig, fig.add_subplot()


def _check(x: str, by: str = "function") -> None:
    if x not in XLABELS:
        raise ValueError(f"x must be 'time' or 'call', got {x!r}")
    if by not in ("function", "rank"):
        raise ValueError(f"by must be 'function' or 'rank', got {by!r}")


def _xs(events: list[CompileEvent], x: str) -> list[float]:
    """Seconds since the first event's start, or the event number (its place in the log)."""
    if x == "call":
        return [float(i) for i in range(len(events))]
    t0 = min(e.started_at for e in events)
    return [e.started_at - t0 for e in events]


def _empty(fig: figure.Figure, ax: Axes, title: str) -> figure.Figure:
    ax.text(0.5, 0.5, "no compile events", ha="center", va="center", fontsize=12,
            color="#555555", transform=ax.transAxes)
    ax.set_xticks([])
    ax.set_yticks([])
    ax.set_title(title)
    return fig


def colours(keys: Iterable[object]) -> dict[object, str]:
    """A stable colour per key, in the order given."""
    return {k: _PALETTE[i % len(_PALETTE)] for i, k in enumerate(keys)}


def _group_key(e: CompileEvent, by: str, labels: dict[tuple[str, str], str]) -> str:
    return labels[e.function, e.location] if by == "function" else f"rank {e.rank}"


def timeline(log: CompileLog | Iterable[CompileEvent], x: Literal["time", "call"] = "time",
             ax: Axes | None = None, by: Literal["function", "rank"] = "function",
             figsize: tuple[float, float] = (8.0, 3.6)) -> figure.Figure:
    """Compile seconds per event over time (or event number), one colour per function or rank.

    ``figsize`` (inches) sizes the new figure; it is ignored when drawing on a given ``ax``.

    Filled circles are first compiles, hollow circles recompiles, black crosses failed compiles,
    and red X marks the recompile-limit hits where torch fell back to eager.
    """
    _check(x, by)
    events = as_events(log)
    own_axes = ax is None  # on a caller's (possibly shared) axes, leave the y limits to them
    fig, ax = _axes(ax, figsize)
    if not events:
        return _empty(fig, ax, "Compile timeline")
    xs = _xs(events, x)
    labels = function_labels(events)
    groups: dict[str, list[int]] = {}  # every function gets its colour, in order of appearance
    for i, e in enumerate(events):
        idx = groups.setdefault(_group_key(e, by, labels), [])
        if e.kind in GRAPH_KINDS:
            idx.append(i)
    keys = sorted(groups, key=lambda k: int(k.split()[-1])) if by == "rank" else list(groups)
    palette = colours(keys)
    for key in keys:
        idx = groups[key]
        if not idx:
            continue
        ax.scatter([xs[i] for i in idx], [events[i].total_s for i in idx], s=36, linewidths=1.5,
                   edgecolors=palette[key], label=_plain(short_label(key, 24)), gid=_plain(key), zorder=3,
                   facecolors=[palette[key] if events[i].kind == "first" else "white" for i in idx])
        built = [i for i in idx if events[i].total_s > events[i].duration_s]
        if built:  # on Neuron: Dynamo's part up to the mark's foot, the NEFF build above it
            ax.vlines([xs[i] for i in built], [events[i].duration_s for i in built],
                      [events[i].total_s for i in built], colors=palette[key], linewidths=3,
                      alpha=0.35, zorder=2)
    kernels = [i for i, e in enumerate(events) if e.kind == "kernels"]
    if kernels:
        n = sum(events[i].kernels for i in kernels)
        forecast = " forecast" if all(events[i].forecast for i in kernels) else ""
        ax.scatter([xs[i] for i in kernels], [events[i].total_s for i in kernels], marker="D",
                   s=28, color="#795548", label=f"eager kernels ({n}{forecast})", zorder=4)
    breaks = [i for i, e in enumerate(events) if e.kind == "graph_break"]
    if breaks:
        ax.scatter([xs[i] for i in breaks], [events[i].total_s for i in breaks], marker="|",
                   s=80, color="#616161", label=f"graph break ({len(breaks)})", zorder=4)
    failed = [i for i, e in enumerate(events) if e.kind == "failed"]
    if failed:
        ax.scatter([xs[i] for i in failed], [events[i].total_s for i in failed], marker="x",
                   s=50, color="black", label="failed", zorder=4)
    hits = [i for i, e in enumerate(events) if e.kind == "limit_hit"]
    if hits:
        ax.scatter([xs[i] for i in hits], [events[i].duration_s for i in hits], marker="X", s=110,
                   color=LIMIT_COLOUR, label="limit hit", zorder=5)
        first = hits[0]
        right_half = xs[first] > (min(xs) + max(xs)) / 2  # keep the note inside the axes
        ax.annotate(f"recompile limit hit ({len(hits)}x): eager fallback",
                    (xs[first], events[first].duration_s), xytext=(-8 if right_half else 8, 14),
                    ha="right" if right_half else "left",
                    textcoords="offset points", color=LIMIT_COLOUR, fontsize=8,
                    arrowprops={"arrowstyle": "-", "color": LIMIT_COLOUR})
    handles, _ = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="", marker="o", color="#555555", label="first compile"),
                Line2D([], [], ls="", marker="o", color="#555555", markerfacecolor="white",
                       label="recompile")]
    ax.legend(handles=handles, fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0),
              frameon=False)
    ax.set_xlabel(XLABELS[x])
    ax.set_ylabel("compile seconds (+ NEFF)" if any(e.neff_compile_s for e in events)
                  else "compile seconds")
    if own_axes:
        top = max(max(e.total_s for e in events), 1e-3) * 1.12
        ax.set_ylim(-0.04 * top, top)  # room for the limit-hit marks, which sit near 0 s
    total, neff = total_seconds(events), neff_seconds(events)
    noun = "event" if len(events) == 1 else "events"
    builds = f" (NEFF builds {neff:.1f} s)" if neff else ""
    ax.set_title(f"Compile timeline: {len(events)} {noun}, {total:.1f} s compiling{builds}")
    ax.grid(True, alpha=0.3)
    return fig


def graph_growth(log: CompileLog | Iterable[CompileEvent], ax: Axes | None = None,
                 x: Literal["time", "call"] = "call",
                 by: Literal["function", "rank"] = "function",
                 figsize: tuple[float, float] = (8.0, 3.2)) -> figure.Figure:
    """Graphs compiled so far per function (or rank), a step line; red X where the limit was hit.

    ``figsize`` (inches) sizes the new figure; it is ignored when drawing on a given ``ax``.
    """
    _check(x, by)
    events = as_events(log)
    fig, ax = _axes(ax, figsize)
    if not events:
        return _empty(fig, ax, f"Graphs per {by}")
    xs = _xs(events, x)
    end = xs[-1] if x == "call" else max(xs)
    labels = function_labels(events)
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
    for name in keys:
        px, py = lines[name]
        if px:
            ax.step(px + [end], py + [py[-1]], where="post", color=palette[name], lw=1.8,
                    label=_plain(f"{short_label(name, 24)} ({py[-1]})"), gid=_plain(name))
    if hits:
        ax.scatter([h[0] for h in hits], [h[1] for h in hits], marker="X", s=90,
                   color=LIMIT_COLOUR, zorder=5, label="limit hit")
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1.0), frameon=False)
    ax.set_xlabel(XLABELS[x])
    ax.set_ylabel("graphs compiled")
    ax.set_ylim(bottom=0)
    # the stub's Locator.set_params takes no arguments; at runtime it takes **kwargs
    ax.yaxis.get_major_locator().set_params(integer=True)  # type: ignore[call-arg]
    ax.set_title(f"Graphs per {by}")
    ax.grid(True, alpha=0.3)
    return fig


def dashboard_chart(log: CompileLog) -> figure.Figure:
    """The dashboard's chart: :func:`timeline` on a wide figure."""
    return timeline(log, figsize=(9.0, 3.2))


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
