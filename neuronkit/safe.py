"""Output escaping for values that may be hostile: a compile log's fields, file names, the
environment. Below every layer (it imports nothing), so any text that leaves the package toward a
terminal, a page or a spreadsheet can pass through one of these at the point it is written out.

A compile log travels between machines and people, and every field of a replayed
:class:`~neuronkit.events.event.CompileEvent` (kind, function, reasons, context, header fields
such as description or device) may be crafted:

- :func:`html_text` / :func:`html_attr` -- HTML text and attribute values;
- :func:`terminal_safe` -- text written to a terminal (no ANSI escapes, no
  control characters besides newline and tab);
- :func:`spreadsheet_safe` -- CSV / Markdown cells (no formula injection).
"""

from __future__ import annotations

import html
import re

__all__ = [
    "html_attr",
    "html_text",
    "spreadsheet_safe",
    "strip_control",
    "terminal_safe",
]

# ANSI / VT escape sequences: CSI (ESC [ ... final), OSC (ESC ] ... BEL or ST),
# DCS/SOS/PM/APC strings (ESC P/X/^/_ ... ST), and two-byte ESC sequences.
# The 8-bit C1 forms (U+009B CSI, U+009D OSC, ...) are covered as well.
_ANSI_RE = re.compile(
    r"""
    (?:\x1b\[|\x9b)[0-?]*[ -/]*[@-~]               # CSI ... final byte
    | (?:\x1b\]|\x9d).*?(?:\x07|\x1b\\|\x9c)       # OSC ... BEL / ST
    | (?:\x1b[PX^_]|[\x90\x98\x9e\x9f]).*?(?:\x1b\\|\x9c)  # DCS/SOS/PM/APC ... ST
    | \x1b[ -/]*[0-~]                              # other ESC sequences
    """,
    re.VERBOSE | re.DOTALL,
)

# C0 controls except \t and \n, DEL, C1 controls, and the unicode format characters that
# reorder or split what the reader sees: bidi marks, embeddings, overrides and isolates
# (U+202E turns "exe.txt" into "txt.exe"), and the line/paragraph separators.
_CONTROL_RE = re.compile(
    "[\x00-\x08\x0b-\x1f\x7f-\x9f"
    "\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
    "\u2028\u2029]"
)
_WHITESPACE_CONTROL_RE = re.compile("[\t\n\r]")
# lone surrogates: how Python hands over the bytes of a file name that are not UTF-8; not text,
# so writing one to a UTF-8 terminal or file raises UnicodeEncodeError
_SURROGATE_RE = re.compile("[\ud800-\udfff]")

_FORMULA_PREFIXES = ("=", "+", "-", "@", "\t", "\r", "\n")


def _as_text(value: object) -> str:
    if value is None:
        return ""
    return value if isinstance(value, str) else str(value)


def strip_control(value: object, *, keep_newlines: bool = True) -> str:
    """Return ``value`` as text without control/bidi-override characters.

    ANSI escape sequences are removed whole (not only their ESC byte).  With
    ``keep_newlines`` (default) newline and tab survive; carriage returns are
    normalised to newlines first so that ``\\r`` cannot overwrite a line. Without it newline,
    tab and CR become spaces (one line: a trace name, an attribute). A lone surrogate (an
    undecodable byte of a file name) becomes U+FFFD. Every control is removed in one pass after
    the escape sequences, so no removal can join the pieces around it into a new sequence.
    """
    text = _ANSI_RE.sub("", _as_text(value))
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    if not keep_newlines:
        text = _WHITESPACE_CONTROL_RE.sub(" ", text)
    if not text.isascii():
        text = _SURROGATE_RE.sub("\ufffd", text)
    return _CONTROL_RE.sub("", text)


def terminal_safe(value: object) -> str:
    """Text safe to print on a terminal.

    Strips ANSI escape sequences and every control character except newline
    and tab (carriage returns become newlines), plus unicode bidi override /
    isolate characters that would reorder what the user reads.
    """
    return strip_control(value, keep_newlines=True)


def html_text(value: object) -> str:
    """Escape ``value`` for an HTML text node.

    ``& < > " '`` and backticks become entities, and control / bidi-override characters are
    stripped, so hostile text shows literally, in logical order, and cannot open a tag.
    """
    text = html.escape(strip_control(value, keep_newlines=True), quote=True)
    return text.replace("`", "&#96;")


def html_attr(value: object, *, multiline: bool = False) -> str:
    """Escape ``value`` for a quoted HTML attribute value (``title="..."``, ``data-x='...'``).

    Quotes, ``& < >`` and backticks (once an attribute delimiter in old IE) become entities.
    Newlines and tabs fold into spaces, or with ``multiline`` (a ``title`` tooltip of several
    lines) each newline becomes ``&#10;``. Never use it for a class name or an id built from
    data: map the data to a fixed set of names instead.
    """
    text = html.escape(strip_control(value, keep_newlines=multiline), quote=True)
    text = text.replace("`", "&#96;")
    if multiline:
        text = text.replace("\t", "&#9;").replace("\n", "&#10;")
    return text


def spreadsheet_safe(value: object) -> str:
    """A CSV/Markdown cell that spreadsheets will not evaluate as a formula.

    Cells starting with ``=``, ``+``, ``-``, ``@``, tab, CR or LF get a
    leading ``'`` (the OWASP recommendation).  Control characters other than
    newline/tab are stripped first, so a hidden prefix cannot smuggle one in.
    """
    text = strip_control(value, keep_newlines=True)
    if text.startswith(_FORMULA_PREFIXES):
        return "'" + text
    return text
