"""Plain-text tables that fit a terminal: columns padded to their widest cell, text columns cut
(``…``) so a line is at most ``WIDTH`` characters, long lines wrapped. Every log value is made
one terminal-safe line first (``clean``)."""
from __future__ import annotations

import textwrap
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from neuronkit.events.facts import short_label
from neuronkit.safe import terminal_safe

__all__ = ["WIDTH", "Col", "Cut", "clean", "cut", "fit_label", "fitted", "table", "wrap"]

WIDTH = 120  # the widest line a text view prints

Cut = Callable[[str, int], str]


def clean(value: Any) -> str:
    """A log value as one terminal-safe line: no escapes or controls, whitespace collapsed."""
    return " ".join(terminal_safe(value).split())


def cut(text: Any, width: int) -> str:
    """``clean(text)`` in at most ``width`` characters, ending in ``…`` when shortened."""
    text = clean(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def fit_label(label: str, width: int) -> str:
    """A function label in ``width`` characters: ``short_label``, else the name shortened and
    the end of its place (``forward (…llama.py:412)``), so same-named functions stay apart."""
    text = short_label(label, width)
    if len(text) <= width:
        return text
    name, sep, where = text.partition(" (")
    name = short_label(name, max(width // 2, 8))
    room = width - len(name) - 3  # " (" and "…"
    return f"{name} (…{where[-room:]}" if sep and room >= 4 else cut(text, width)


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    """Rows under a header and a rule, columns padded to their widest cell."""
    right = set(right)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


@dataclass(frozen=True)
class Col:
    """A column of a fitted table. ``cap`` > 0 makes it a text column: at most ``cap`` wide,
    narrowed down to ``least`` when the table is wider than ``WIDTH``; ``weight``: its share of
    the room next to the other text columns; ``cut`` shortens a cell to a width. A number
    column's ``least`` is the width it is counted with, whatever its cells (so the text cuts do
    not move with the times measured)."""

    header: str
    right: bool = False
    cap: int = 0
    least: int = 0
    weight: float = 1.0
    cut: Cut = cut


def fitted(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """``table`` with the text columns cut (``…``) so that each line fits ``width``.

    A character at a time, the text column widest for its ``weight`` narrows, down to its
    ``least``, then, if still too wide, down to 4: the space left is shared by weight.
    """
    widths = [max([len(c.header), 0 if c.cap else c.least] + [len(r[i]) for r in rows])
              for i, c in enumerate(cols)]  # a number column's least: the text cuts stay put
    widths = [min(w, max(c.cap, len(c.header))) if c.cap else w
              for w, c in zip(widths, cols, strict=True)]
    excess = sum(widths) + 2 * (len(cols) - 1) - width
    for floor in (lambda c: c.least, lambda c: 4):
        while excess > 0:
            narrowable = [i for i, c in enumerate(cols) if c.cap and widths[i] > floor(c)]
            if not narrowable:
                break
            widths[max(narrowable, key=lambda j: (widths[j] / cols[j].weight, j))] -= 1
            excess -= 1
    headers = [c.cut(c.header, w) if c.cap and len(c.header) > w else c.header
               for c, w in zip(cols, widths, strict=True)]
    cut_rows = [[c.cut(cell, w) if c.cap and len(cell) > w else cell
                 for c, w, cell in zip(cols, widths, row, strict=True)] for row in rows]
    return table(headers, cut_rows, right=[i for i, c in enumerate(cols) if c.right])


def wrap(text: str, indent: str = "  ") -> str:
    """Lines longer than ``WIDTH`` wrapped, continued under ``indent``."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= WIDTH:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, WIDTH, subsequent_indent=lead + indent)
    return "\n".join(out)
