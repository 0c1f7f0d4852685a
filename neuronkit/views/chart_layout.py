"""How a chart is laid out and keyed: labels made plain, the legend fitted beside the axes
(or given to the dashboard as :class:`KeyEntry` rows to show as HTML), margins measured.

A figure of its own gets margins measured from its texts, so no label is cut off. Measuring a
legend costs as much as drawing it, so a fit is remembered for the same labels and figure size.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable, Sequence, TypeVar, cast

from matplotlib import figure
from matplotlib.artist import Artist
from matplotlib.axes import Axes
from matplotlib.backend_bases import RendererBase
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.legend import Legend
from matplotlib.lines import Line2D
from matplotlib.text import Text

from neuronkit.events.facts import short_label
from neuronkit.safe import strip_control

__all__ = ["KeyEntry", "LegendEntries", "fit_layout", "heaviest", "legend_label", "plain_label",
           "KEY_COLOURS", "KEY_SYMBOLS", "LABEL_CHARS", "LEGEND_FONT", "LIMIT_COLOUR", "MARK_GREY",
           "PALETTE", "TITLE_FONT"]

T = TypeVar("T")
PALETTE = ["#1f77b4", "#ff7f0e", "#2ca02c", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
           "#bcbd22", "#17becf", "#aec7e8", "#ffbb78", "#98df8a", "#c5b0d5", "#c49c94"]
LIMIT_COLOUR = "#d62728"
MARK_GREY = "#555555"  # the key's "first compile" and "recompile", a chart's notes
# every colour a chart's key may hold: a view maps each to a fixed class, never to a style
KEY_COLOURS = PALETTE + [LIMIT_COLOUR, MARK_GREY, "#795548", "#616161", "#000000"]

LABEL_CHARS = 32  # a legend label's most characters
LEGEND_FONT = 8.0
LEGEND_SHARE = 0.4  # the most of a figure's width its legend takes
TITLE_FONT = 10.0
# a figure of its own: room (inches) for the y tick labels and label, the x ones, the title
_LEFT_IN, _BOTTOM_IN, _TOP_IN, _GAP_IN = 0.75, 0.55, 0.4, 0.1
_TWO_LINE_FONT = 8.0  # the largest font of a title on two lines (they fit _TOP_IN)


# a chart marker (matplotlib's name, filled or not) as the character a key shows for it: every
# marker the charts draw (``charts.MARKS``, the circles of first compiles and recompiles)
KEY_SYMBOLS = {("o", True): "●", ("o", False): "○", ("v", True): "▼", ("D", True): "◆",
               ("P", True): "✚", ("|", False): "|", ("x", False): "✕", ("X", True): "✖"}


@dataclass(frozen=True)
class KeyEntry:
    """One row of a chart's key, for a view that draws the key itself (the dashboard's HTML):
    ``marker`` is matplotlib's (``o``, ``v``, ``D``, ``P``, ``|``, ``x``, ``X``), ``filled`` as
    drawn, ``label`` plain text; a ``function`` row (or rank) has a ``weight``, its graphs, the
    other rows are the marks."""

    label: str
    colour: str
    marker: str = "o"
    filled: bool = True
    function: bool = False
    weight: int = 0

    @property
    def symbol(self) -> str:
        """The character of the mark the chart draws (``KEY_SYMBOLS``; a dot for a marker the
        charts never draw)."""
        return KEY_SYMBOLS.get((self.marker, self.filled), "●")


def plain_label(label: str) -> str:
    """A label from a log as plain text: no control characters, and ``$`` not read as maths
    (a crafted name like ``$\\frac{$`` would make matplotlib raise)."""
    return strip_control(label, keep_newlines=False).replace("$", r"\$")


def legend_label(label: str, width: int = LABEL_CHARS) -> str:
    """A function label for a legend: plain, at most about ``width`` characters, keeping the
    end of its place so that same-named functions stay apart (``forward (/a/…ling.py:440)``)."""
    text = short_label(" ".join(strip_control(label, keep_newlines=False).split()), width)
    if len(text) > width:
        half = (width - 1) // 2
        text = text[:half] + "…" + text[-(width - 1 - half):]
    return plain_label(text)


def heaviest(items: Sequence[T], weight: Callable[[T], int], keep: int) -> list[T]:
    """The ``keep`` heaviest of ``items``, in their order (all of them when they fit)."""
    if keep >= len(items):
        return list(items)
    chosen = sorted(range(len(items)), key=lambda i: -weight(items[i]))[:keep]
    return [items[i] for i in sorted(chosen)]


@dataclass
class LegendEntries:
    """A legend's entries: one per function (weight: its graphs), then the marks' entries.
    When not all functions fit, the heaviest are kept, in their order, and ``+ N more`` said."""

    functions: list[tuple[Artist, int]]
    marks: list[Artist]

    def handles(self, keep: int | None = None) -> list[Artist]:
        shown = self.functions if keep is None else heaviest(self.functions,
                                                             lambda f: f[1], keep)
        handles = [handle for handle, _ in shown]
        if len(shown) < len(self.functions):
            handles.append(Line2D([], [], ls="", label=f"+ {len(self.functions) - len(shown)} more"))
        return handles + self.marks

    def draw(self, ax: Axes, keep: int | None = None, fontsize: float = LEGEND_FONT) -> Legend:
        """The legend outside the axes, on the right."""
        return ax.legend(handles=self.handles(keep), fontsize=fontsize, loc="upper left",
                         bbox_to_anchor=(1.01, 1.0), frameon=False, borderaxespad=0.0)


_legend_fits: dict[tuple[object, ...], tuple[float, int | None, tuple[str, ...], float]] = {}
_DIGITS = str.maketrans("123456789", "000000000")  # digits are equally wide in the font


def _shown(legend: Legend) -> tuple[str, ...]:
    return tuple(t.get_text().translate(_DIGITS) for t in legend.get_texts())


def _legend_fit(fig: figure.Figure, ax: Axes, entries: LegendEntries,
                renderer: RendererBase) -> float:
    """Draw the legend in the font and with the functions that fit (see :func:`fit_layout`);
    its width in inches. Measuring a legend costs as much as drawing it, so a fit is kept for
    the same labels (counts in them aside) on the same figure size, and reused while the
    legend shows the same texts."""
    width, height = fig.get_size_inches()
    dpi = fig.dpi
    labels = tuple(str(h.get_label()).translate(_DIGITS)
                   for h in [h for h, _ in entries.functions] + entries.marks)
    key = (labels, float(width), float(height), dpi)
    fit = _legend_fits.get(key)  # (a figure may be drawn in any thread)
    if fit is not None:
        fontsize, keep, shown, box_width = fit
        if _shown(entries.draw(ax, keep, fontsize)) == shown:
            return box_width
    top = min(_TOP_IN, height * 0.3)
    fontsize, keep = LEGEND_FONT, None
    legend = entries.draw(ax)
    box = legend.get_window_extent(renderer)
    widest = width * LEGEND_SHARE - _GAP_IN - 0.1
    if box.width / dpi > widest:
        fontsize = max(LEGEND_FONT * widest * dpi / box.width, 5.0)
        legend = entries.draw(ax, keep, fontsize)
        box = legend.get_window_extent(renderer)
    room = height - top - _GAP_IN
    if box.height / dpi > room and entries.functions:
        row = box.height / dpi / len(entries.handles())
        keep = max(int(room / row) - len(entries.marks) - 1, 1)
        legend = entries.draw(ax, keep, fontsize)
        box = legend.get_window_extent(renderer)
    if len(_legend_fits) >= 256:
        _legend_fits.clear()
    _legend_fits[key] = fontsize, keep, _shown(legend), box.width / dpi
    return box.width / dpi


def fit_layout(fig: figure.Figure, ax: Axes, title: Text, entries: LegendEntries | None) -> None:
    """Margins of a figure of its own measured from its texts: the legend on the right (in a
    smaller font where it would take more than ``LEGEND_SHARE`` of the width, cut to the
    functions that fit the height), the title shrunk where it would pass the edges."""
    renderer = cast(FigureCanvasAgg, fig.canvas).get_renderer()
    width, height = fig.get_size_inches()
    dpi = fig.dpi
    left, bottom, top = (min(_LEFT_IN, width * 0.3), min(_BOTTOM_IN, height * 0.4),
                         min(_TOP_IN, height * 0.3))
    right = _GAP_IN
    if entries is not None:
        right += _legend_fit(fig, ax, entries, renderer) + 0.1
    fig.subplots_adjust(left=left / width, right=1 - right / width, bottom=bottom / height,
                        top=1 - top / height)
    centre = left + (width - left - right) / 2  # the title is centred over the axes
    _fit_title(title, 2 * (min(centre, width - centre) - _GAP_IN) * dpi, renderer)


def _fit_title(title: Text, room_px: float, renderer: RendererBase) -> None:
    """A title wider than ``room_px``: on two lines (its first ", " a line break; in at most
    ``_TWO_LINE_FONT``: both fit the top margin) where one would need a smaller font, then
    shrunk until it fits (text does not narrow in proportion to its size; 5 points at least)."""
    extent = title.get_window_extent(renderer).width
    text, size = title.get_text(), float(title.get_fontsize())
    if extent > room_px and size * room_px / extent < _TWO_LINE_FONT and ", " in text:
        title.set_text(text.replace(", ", "\n", 1))
        title.set_fontsize(min(size, _TWO_LINE_FONT))
        extent = title.get_window_extent(renderer).width
    for _ in range(4):
        current = float(title.get_fontsize())
        if extent <= room_px or current <= 5.0:
            return
        title.set_fontsize(max(current * room_px / extent * 0.98, 5.0))
        extent = title.get_window_extent(renderer).width


