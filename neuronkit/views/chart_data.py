"""What the charts plot, as numpy columns, no drawing: x positions, a series and colour per function
(or rank), the y scale (log from ``LOG_SCALE_SPAN``), axis limits, and the points of a big series
worth drawing (one per cell of a ``CELLS`` grid beyond ``MAX_POINTS``)."""
from __future__ import annotations

from dataclasses import dataclass
from operator import attrgetter
from typing import Iterable, Literal

import numpy as np

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import function_labels
from neuronkit.views.chart_layout import PALETTE

__all__ = ["CELLS", "LOG_SCALE_SPAN", "MAX_POINTS", "XLABELS", "TimelineData", "check_axes",
           "colours", "column", "graph_steps", "mark_label", "padded_limits", "positions", "seconds_scale",
           "seconds_title", "series_key", "series_order", "thin", "timeline_data"]

XLABELS = {"time": "seconds since the first compile", "call": "compile event number"}
LOG_SCALE_SPAN = 100.0  # largest / smallest positive compile seconds from which y is logarithmic
MAX_POINTS = 500  # a series with more points keeps one per cell of a CELLS grid over the axes
CELLS = (120, 48)  # about 5 px a cell on the dashboard's axes: less than a marker (8 px)


def check_axes(x: str, by: str = "function") -> None:
    if x not in XLABELS:
        raise ValueError(f"x must be 'time' or 'call', got {x!r}")
    if by not in ("function", "rank"):
        raise ValueError(f"by must be 'function' or 'rank', got {by!r}")


def column(events: list[CompileEvent], field: str) -> np.ndarray:
    """One number per event (None: 0), read at C speed."""
    values = np.array(list(map(attrgetter(field), events)), dtype=float)  # None -> nan
    values[np.isnan(values)] = 0.0
    return values


def positions(starts: np.ndarray, x: str) -> np.ndarray:
    """Seconds since the first event's start, or the event number (its place in the log)."""
    return starts - starts.min() if x == "time" else np.arange(len(starts), dtype=float)


def series_key(e: CompileEvent, by: str, labels: dict[tuple[str, str], str]) -> str:
    """The series an event belongs to: its function label, or ``rank N``."""
    return labels[e.function, e.location] if by == "function" else f"rank {e.rank}"


def series_order(keys: Iterable[str], by: str) -> list[str]:
    """Each series once: functions in order of appearance, ranks by number."""
    order = list(dict.fromkeys(keys))
    if by == "rank":
        order.sort(key=lambda k: float(k.split()[-1]))  # rank 2 before rank 10
    return order


def colours(keys: Iterable[object]) -> dict[object, str]:
    """A stable colour per key, in the order given."""
    return {k: PALETTE[i % len(PALETTE)] for i, k in enumerate(keys)}


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


def mark_label(kind: str, events: list[CompileEvent]) -> str:
    """A mark's legend label: eager kernels counted, graph breaks counted, else the kind."""
    if kind == "kernels":
        forecast = " forecast" if all(e.forecast for e in events) else ""
        return f"eager kernels ({sum(e.kernels for e in events)}{forecast})"
    return f"graph break ({len(events)})" if kind == "graph_break" else kind.replace("_", " ")


def graph_steps(events: list[CompileEvent], xs: list[float], by: str
                ) -> tuple[dict[str, tuple[list[float], list[int]]], list[tuple[float, int]]]:
    """``graph_growth``'s steps: per series (in ``series_order``) the x of each graph compiled and
    the graphs so far; per limit hit, its x and the graphs its series had then."""
    labels = function_labels(events) if by == "function" else {}
    lines: dict[str, tuple[list[float], list[int]]] = {}
    hits: list[tuple[float, int]] = []
    for i, e in enumerate(events):
        px, py = lines.setdefault(series_key(e, by, labels), ([], []))
        if e.kind in GRAPH_KINDS:
            px.append(xs[i])
            py.append(len(py) + 1)
        elif e.kind == "limit_hit":
            hits.append((xs[i], len(py)))
    return {k: lines[k] for k in series_order(lines, by)}, hits


@dataclass
class TimelineData:
    """The timeline's columns (one value per event) and the axes they sit on."""

    xs: np.ndarray          # seconds since the first start, or the event number
    durations: np.ndarray   # Dynamo's compile seconds
    builds: np.ndarray      # NEFF build seconds
    totals: np.ndarray      # both (CompileEvent.total_s)
    kinds: np.ndarray
    graph: np.ndarray       # True for a graph compile (GRAPH_KINDS)
    order: list[str]        # the series (function labels, or "rank N"), in colour order
    group: np.ndarray       # each event's place in ``order``
    palette: dict[object, str]
    log_y: bool
    xlim: tuple[float, float]
    ylim: tuple[float, float]
    bottom: float           # where a 0 s mark sits on a log axis (0.0 on a linear one)

    def plotted(self, values: np.ndarray) -> np.ndarray:
        """Seconds as drawn: on a log axis, none below ``bottom``."""
        return np.maximum(values, self.bottom) if self.log_y else values

    def kept(self, idx: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The indices of ``idx`` to draw at ``values`` (``thin``)."""
        return idx[thin(self.xs[idx], values[idx], self.xlim, self.ylim, self.log_y)]


def timeline_data(events: list[CompileEvent], x: str, by: str) -> TimelineData:
    """The columns of a non-empty list of events, read once each (100k events: milliseconds)."""
    xs = positions(column(events, "started_at"), x)
    durations, builds = column(events, "duration_s"), column(events, "neff_s")
    totals = durations + builds  # CompileEvent.total_s
    kinds = np.array(list(map(attrgetter("kind"), events)))
    labels = function_labels(events) if by == "function" else {}
    keys = ([labels[e.function, e.location] for e in events] if by == "function"
            else [f"rank {e.rank}" for e in events])
    order = series_order(keys, by)  # every function gets its colour, in order of appearance
    index = {k: i for i, k in enumerate(order)}
    group = np.fromiter((index[k] for k in keys), dtype=np.int64, count=len(keys))
    graph = np.isin(kinds, GRAPH_KINDS)
    log_y = seconds_scale(totals[graph | (kinds == "failed")]) == "log"
    ylim = padded_limits(totals, "log" if log_y else "linear", from_zero=True,
                         headroom=0.12)  # room for the notes
    return TimelineData(xs, durations, builds, totals, kinds, graph, order, group, colours(order),
                        log_y, padded_limits(xs), ylim, ylim[0] * 1.3 if log_y else 0.0)


def seconds_title(data: TimelineData, events: list[CompileEvent]) -> str:
    """The timeline's seconds, each named by its source: ``3.2 s Dynamo compile + 214.0 s NEFF
    builds + 16.4 s eager-kernel builds``; from several ranks, summed over them, with the busiest
    rank's (what the compile-share finding counts): ``over 2 ranks (rank 1, the busiest: 25.7 s)``."""
    kernels = data.kinds == "kernels"
    dynamo, built, neff = (float(data.durations[~kernels].sum()),
                           float(data.durations[kernels].sum()), float(data.builds.sum()))
    text = " + ".join([f"{dynamo:.1f} s Dynamo compile"]
                      + ([f"{neff:.1f} s NEFF builds"] if neff else [])
                      + ([f"{built:.1f} s eager-kernel builds"] if built else []))
    ranks = column(events, "rank")
    distinct = np.unique(ranks)
    if distinct.size > 1:
        per_rank = [float(data.totals[ranks == r].sum()) for r in distinct]
        i = int(np.argmax(per_rank))
        text += (f" over {distinct.size} ranks (rank {int(distinct[i])}, the busiest: "
                 f"{per_rank[i]:.1f} s)")
    return text
