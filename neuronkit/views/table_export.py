"""The event table's exports: rows as CSV or a Markdown table, findings as Markdown for a bug
report; every cell made safe for spreadsheets and Markdown (no formula, link, HTML or cell break)."""
from __future__ import annotations

import csv
import html
import io
import re
from typing import Any, Iterable, Mapping, Sequence

from neuronkit.advice.finding import SEVERITIES
from neuronkit.safe import spreadsheet_safe, strip_control
from neuronkit.views.table_cells import COLUMN_LABELS

__all__ = ["advice_markdown", "markdown_text", "table_csv", "table_markdown"]

_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]|~#])")


def _columns_of(rows: Sequence[Mapping[str, Any]], columns: Sequence[str] | None) -> list[str]:
    return list(columns) if columns is not None else list(rows[0]) if rows else []


def table_csv(rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows as CSV (a header of column names first); every cell made safe for spreadsheets
    (a leading ``=``, ``+``, ``-``, ``@`` cannot run as a formula)."""
    rows = list(rows)
    names = _columns_of(rows, columns)
    if not names:
        return ""
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow([spreadsheet_safe(name) for name in names])
    for row in rows:
        writer.writerow([spreadsheet_safe(row.get(name, "")) for name in names])
    return out.getvalue()


def markdown_text(value: Any) -> str:
    """Text that renders literally in Markdown on one line: no HTML, link, code span or table
    cell break can come from it (``< > &`` as entities, Markdown marks escaped)."""
    text = strip_control(value, keep_newlines=False)
    return _MARKDOWN_SPECIAL.sub(r"\\\1", html.escape(text, quote=False))


def _markdown_cell(value: Any) -> str:
    return markdown_text(spreadsheet_safe(strip_control(value, keep_newlines=False)))


def table_markdown(rows: Iterable[Mapping[str, Any]], columns: Sequence[str] | None = None) -> str:
    """Rows as a GitHub Markdown table, headed by the column labels; cells on one line, escaped,
    formula starts neutralised."""
    rows = list(rows)
    names = _columns_of(rows, columns)
    if not names:
        return ""
    lines = ["| " + " | ".join(_markdown_cell(COLUMN_LABELS.get(n, n)) for n in names) + " |",
             "|" + "|".join(" --- " for _ in names) + "|"]
    lines += ["| " + " | ".join(_markdown_cell(row.get(n, "")) for n in names) + " |"
              for row in rows]
    return "\n".join(lines) + "\n"


def advice_markdown(advices: Iterable[Any]) -> str:
    """``diagnose()`` findings as Markdown for a bug report, most severe first: a heading with
    the severity and title, then what was seen, the fix and the numbers behind it."""
    def severity(advice: Any) -> str:
        value = getattr(advice, "severity", "info")
        return value if isinstance(value, str) and value in SEVERITIES else "info"

    found = sorted(advices, key=lambda a: SEVERITIES.index(severity(a)))
    if not found:
        return "No findings.\n"
    parts = []
    for advice in found:
        lines = [f"### {severity(advice).capitalize()}: {markdown_text(advice.title)}", ""]
        if getattr(advice, "detail", ""):
            lines += [markdown_text(advice.detail), ""]
        if getattr(advice, "fix", ""):
            lines += [f"**Fix:** {markdown_text(advice.fix)}", ""]
        numbers = getattr(advice, "numbers", None)
        if isinstance(numbers, Mapping) and numbers:
            listed = ", ".join(f"{markdown_text(k)} {markdown_text(v)}" for k, v in numbers.items())
            lines += [f"*Numbers:* {listed}", ""]
        parts.append("\n".join(lines))
    return "\n".join(parts)
