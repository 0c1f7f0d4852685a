"""Plain-text tables that fit a terminal: columns padded to their widest cell, a text cell wider
than its column wrapped onto more lines inside it, so a line is at most ``WIDTH`` characters (or
the width asked for); long lines wrapped. Every log value is made one terminal-safe line first
(``clean``), at most ``CELL_CHARS`` characters of it shown. A ``fill`` column (the context) takes
only the lines its row takes anyway, its text cut with "…" past them.
"""
from __future__ import annotations

import shutil
import sys
import textwrap
from collections import Counter
from dataclasses import dataclass
from typing import Any, Sequence

from neuronkit.advice.excerpts import ELLIPSIS
from neuronkit.safe import terminal_safe

__all__ = ["CELL_CHARS", "ELLIPSIS", "EXACT_ROWS", "NARROWEST", "WIDTH", "Col", "bounded", "clean",
           "fitted", "pieces", "terminal_width", "wrap"]

WIDTH = 120  # the widest line a text view prints
NARROWEST = 60  # the narrowest table a terminal gets (a narrower one wraps its lines)
CELL_CHARS = 600  # the most characters of one table cell shown (the rest cut with an ellipsis)

_AFTER = frozenset(",;:./\\_-=")  # a cell may wrap after these, or before an opening bracket
_BEFORE = frozenset("([{")


def clean(value: Any) -> str:
    """A log value as one terminal-safe line: no escapes or controls, whitespace collapsed."""
    return " ".join(terminal_safe(value).split())


def _soft(text: str, i: int) -> bool:
    """Whether a line may end before ``text[i]``: after a mark (not inside ``->``), before a
    bracket, or where a small letter meets a capital (``Qwen3For|Causal|LM``)."""
    a, b = text[i - 1], text[i]
    return a != " " and ((a in _AFTER and a + b != "->") or b in _BEFORE
                         or (a.islower() and b.isupper()))


def _break(text: str, width: int) -> tuple[int, int]:
    """Where ``text`` (longer than ``width``) wraps: (end of this line, start of the next). At
    a space (dropped) past half the width or before a last line, else at the latest space or
    soft place (``_soft``), else at ``width``."""
    space = mark = 0
    for i in range(min(width, len(text) - 1), 0, -1):
        if text[i] == " ":
            space = space or i
        elif not mark and _soft(text, i):
            mark = i
        if space and (mark or space * 2 >= width):
            break
    if space and (space * 2 >= width or space >= mark or len(text) - space - 1 <= width):
        return space, space + 1
    return (mark, mark) if mark else (width, width)


def _wrap(text: str, width: int, most: int | None = None) -> tuple[list[str], int]:
    """The lines of a clean ``text`` at most ``width`` wide, and how many broke a word; with
    ``most``, at most that many lines, the last one cut with an ellipsis where more text follows."""
    out: list[str] = []
    hard = 0
    while len(text) > width and (most is None or len(out) < most - 1):
        end, start = _break(text, width)
        out.append(text[:end])
        hard += start == end and not _soft(text, end)
        text = text[start:]
    if len(text) > width:
        text = text[:width - 1].rstrip() + ELLIPSIS
    return [*out, text], hard


def pieces(text: Any, width: int) -> list[str]:
    """``clean(text)`` as lines of at most ``width`` characters, wrapped at spaces (dropped),
    else after ``.``, ``_``, ``/``, ``:`` ..., before a bracket or a capital after a small
    letter, else anywhere: joined with a space where one was dropped, they give the whole text."""
    return _wrap(clean(text), max(int(width), 1))[0]


def bounded(value: Any) -> str:
    """The start of a value's text that a table cell can show (``CELL_CHARS`` characters once
    clean, read from at most four times as many): a huge field costs no more than a long one."""
    text = value if isinstance(value, str) else str(value)
    return text[:4 * CELL_CHARS]


def _cell(value: Any) -> str:
    """A table cell as one clean line of at most ``CELL_CHARS`` characters (a longer one cut with
    an ellipsis)."""
    text = clean(bounded(value))
    return text if len(text) <= CELL_CHARS else text[:CELL_CHARS - 1] + ELLIPSIS


@dataclass(frozen=True)
class Col:
    """A column of a fitted table. ``cap`` > 0 makes it a text column: at most ``cap`` wide,
    narrowed down to ``least`` (then to 4) when the table is wider than ``WIDTH``, its longer
    cells wrapped; ``weight``: how readily it keeps its width next to the other text columns
    when narrowing costs them the same lines. A number column's ``least`` is the width it is
    counted with, whatever its cells (so the text wraps do not move with the times measured).
    ``fill``: a text column that adds no lines to its row: it wraps into the lines the row's
    other cells take, and is cut with an ellipsis past them (so it is narrowed first)."""

    header: str
    right: bool = False
    cap: int = 0
    least: int = 0
    weight: float = 1.0
    fill: bool = False


EXACT_ROWS = 200  # up to this many different rows, narrowing counts the lines cells wrap to


def _narrowed(cols: Sequence[Col], widths: list[int], rows: Sequence[Sequence[str]],
              excess: int) -> list[int]:
    """``widths`` with ``excess`` characters taken off the text columns, a character at a time
    from the one where it adds the fewest lines to the table, else the widest for its
    ``weight``; floors ``least``, then 4. Lines are counted as ``pieces`` wraps them (past
    ``EXACT_ROWS`` different rows: estimated from the cells' lengths)."""
    text = [i for i, c in enumerate(cols) if c.cap]
    wraps = {i for i in text if not cols[i].fill}  # a fill column adds no lines
    shapes = Counter(tuple(r[i] for i in text) for r in rows)
    counted: dict[tuple[str, int], tuple[int, int]] = {}

    def lines(cell: str, w: int) -> tuple[int, int]:
        """How many lines ``cell`` takes at width ``w``, and how many of them broke a word."""
        if len(cell) <= w:
            return 1, 0
        if len(shapes) > EXACT_ROWS:
            return -(-len(cell) // w), 0
        if (cell, w) not in counted:
            split, hard = _wrap(cell, w)
            counted[cell, w] = len(split), hard
        return counted[cell, w]

    def cost(shape: tuple[str, ...], narrow: int) -> tuple[int, int]:
        """A row's lines and broken words, the text column ``narrow`` one character narrower."""
        each = [lines(cell, widths[i] - (i == narrow)) if i in wraps else (1, 0)
                for cell, i in zip(shape, text, strict=True)]
        return max(n for n, _ in each), sum(h for _, h in each)

    def added(j: int, now: dict[tuple[str, ...], tuple[int, int]]) -> tuple[int, int]:
        more = [(n * (a - a0), n * (h - h0)) for s, n in shapes.items()
                for (a, h), (a0, h0) in [(cost(s, j), now[s])]]
        return sum(m for m, _ in more), sum(h for _, h in more)

    for floor in (lambda c: c.least, lambda c: 4):
        while excess > 0:
            narrowable = [i for i in text if widths[i] > max(floor(cols[i]), 1)]
            if not narrowable:
                break
            now = {s: cost(s, -1) for s in shapes}
            worse = {j: added(j, now) for j in narrowable}
            widths[min(narrowable, key=lambda j: (worse[j], -widths[j] / cols[j].weight, -j))] -= 1
            excess -= 1
    return widths


def fitted(cols: Sequence[Col], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
    """Rows under a header and a rule, each line at most ``width`` characters: the text columns
    narrowed where needed (``_narrowed``), a cell longer than its column wrapped onto the next
    lines of its row (``pieces``), the other columns blank there. Nothing is cut but a cell past
    ``CELL_CHARS`` characters and a ``fill`` cell past the lines of its row."""
    headers = [c.header for c in cols]
    rows = [[_cell(cell) for cell in row] for row in rows]
    every = [headers, *rows]
    widths = [max([0 if c.cap else c.least] + [len(r[i]) for r in every])
              for i, c in enumerate(cols)]  # a number column's least: the wraps stay put
    widths = [min(w, max(c.cap, len(c.header))) if c.cap else w
              for w, c in zip(widths, cols, strict=True)]
    excess = sum(widths) + 2 * (len(cols) - 1) - width
    if excess > 0:
        widths = _narrowed(cols, widths, every, excess)

    def lines(cells: Sequence[str], header: bool = False) -> list[str]:
        split = [pieces(cell, w) if c.cap and (header or not c.fill) else [cell]
                 for c, w, cell in zip(cols, widths, cells, strict=True)]
        most = max(map(len, split))
        split = [_wrap(cell, max(w, 1), most)[0] if c.fill and not header else p
                 for c, w, cell, p in zip(cols, widths, cells, split, strict=True)]
        return ["  ".join((p[k] if k < len(p) else "").rjust(w) if c.right
                          else (p[k] if k < len(p) else "").ljust(w)
                          for c, w, p in zip(cols, widths, split, strict=True)).rstrip()
                for k in range(max(map(len, split)))]

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([*lines(headers, header=True), rule,
                      *(line for row in rows for line in lines(row))])


def terminal_width(stream: Any = None) -> int:
    """The width a table gets on ``stream`` (stdout): ``WIDTH``, or a narrower terminal's width
    (at least ``NARROWEST``); ``WIDTH`` where it is no terminal (a pipe, a file, a notebook), so
    what is saved or compared does not move with the window it was made in."""
    stream = sys.stdout if stream is None else stream
    try:
        if not stream.isatty():
            return WIDTH
    except (AttributeError, ValueError, OSError):
        return WIDTH
    columns = shutil.get_terminal_size((WIDTH, 24)).columns
    return max(NARROWEST, min(WIDTH, columns))


def wrap(text: str, indent: str = "  ", width: int = WIDTH) -> str:
    """Lines longer than ``width`` wrapped at spaces (a word longer than a line: anywhere),
    continued under ``indent``."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= width:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, width, subsequent_indent=lead + indent, break_on_hyphens=False)
    return "\n".join(out)
