"""HTML views of a compile log: the event table, graph counts, advice, status and the replay note.

Pure functions from a log (or findings) to an HTML string. A log is untrusted input (it may come
from another machine or person, or be built in memory with any values), so every value that
reaches the HTML is either escaped for its position (:func:`~neuronkit.views.safe.html_text`,
:func:`~neuronkit.views.safe.html_attr`) or mapped to a known value: a row's CSS class comes only
from :data:`KIND_CLASSES` (anything else: ``nk-unknown``), a severity or status class only from
the fixed sets, numbers are formatted as numbers. The widget shows them; they need no widget to
test or reuse.
"""
from __future__ import annotations

import math
from pathlib import PurePath
from typing import Any, Iterable

from .._torch_text import short_reason
from ..events import KINDS, CompileLog, function_labels
from .safe import html_attr, html_text

__all__ = ["events_table_html", "graph_counts_html", "advice_html", "replay_note", "status_html",
           "escape", "kind_class", "STYLE", "TABLE_ROWS", "KIND_CLASSES", "UNKNOWN_CLASS"]

TABLE_ROWS = 200          # newest events shown in the table; the log keeps them all
KIND_LABELS = {"first": "first", "recompile": "recompile", "limit_hit": "LIMIT HIT: runs eager",
               "failed": "failed", "eager_fallback": "RAN EAGER", "kernels": "eager kernels",
               "graph_break": "graph break"}
# a row's CSS class: only these (from events.KINDS), never built from the event's text
KIND_CLASSES = {kind: "nk-" + kind.replace("_", "-") for kind in KINDS}
UNKNOWN_CLASS = "nk-unknown"
STATUS_LABELS = {"info": "Ready", "busy": "Working", "ok": "Done", "error": "Error"}
SEVERITY_CLASSES = {"critical": "nk-sev-critical", "warning": "nk-sev-warning",
                    "info": "nk-sev-info"}

STYLE = """<style>
.nk-dashboard { font-size: 13px; }
.nk-dashboard h3.nk-title { margin: 2px 0 4px 0; }
.nk-dashboard .nk-muted { color: #666; font-size: 12px; }
.nk-dashboard .nk-section { font-weight: 600; margin: 2px 0; }
.nk-dashboard .nk-scroll { max-height: 280px; overflow-y: auto; }
.nk-dashboard table.nk-table { border-collapse: collapse; font-size: 12px; width: 100%; }
.nk-dashboard table.nk-table th { text-align: left; border-bottom: 2px solid #ccc;
  padding: 2px 6px; }
.nk-dashboard table.nk-table td { border-bottom: 1px solid #eee; padding: 2px 6px;
  vertical-align: top; word-break: break-word; }
.nk-dashboard td.nk-nowrap { white-space: nowrap; }
.nk-dashboard tr.nk-limit-hit td { background: #fde0dc; color: #8a1c0c; font-weight: 600; }
.nk-dashboard tr.nk-failed td { background: #fff3cd; }
.nk-dashboard tr.nk-recompile td.nk-kind { color: #b35c00; font-weight: 600; }
.nk-dashboard tr.nk-eager-fallback td.nk-kind { color: #c00000; }
.nk-dashboard .nk-badge { display: inline-block; min-width: 52px; text-align: center;
  border-radius: 3px; padding: 0 6px; margin-right: 6px; color: white; font-size: 11px;
  font-weight: 600; line-height: 18px; background: #607d8b; }
.nk-dashboard .nk-status-error { color: #b00020; font-weight: 600; }
.nk-dashboard .nk-status-error .nk-badge { background: #b00020; }
.nk-dashboard .nk-status-ok .nk-badge { background: #2e7d32; }
.nk-dashboard .nk-status-busy .nk-badge { background: #b26a00; }
.nk-dashboard .nk-advice .widget-html-content, .nk-dashboard .nk-events-table .widget-html-content,
.nk-dashboard .nk-graph-count .widget-html-content,
.nk-dashboard .nk-output-text .widget-html-content { line-height: 1.35; }
.nk-dashboard img.nk-chart { height: auto; object-fit: contain; }
.nk-dashboard .nk-bad { color: #b00020; font-weight: 600; }
.nk-dashboard .nk-good { color: #1b6e20; }
.nk-dashboard .nk-advice-item { margin: 0 0 6px 0; }
.nk-dashboard pre.nk-text { white-space: pre-wrap; background: #f6f6f6; padding: 4px 6px;
  margin: 2px 0; max-height: 120px; overflow-y: auto; }
</style>"""


def escape(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes (one line there: use
    :func:`~neuronkit.views.safe.html_attr` for attributes). Never for class names or ids."""
    return html_text(value)


def kind_class(kind: Any) -> str:
    """The CSS class of an event kind: from :data:`KIND_CLASSES`, else ``nk-unknown``."""
    return KIND_CLASSES.get(kind, UNKNOWN_CLASS) if isinstance(kind, str) else UNKNOWN_CLASS


def _kind_label(kind: Any) -> str:
    """The kind's label as escaped HTML (an unknown kind is shown as given, escaped)."""
    if isinstance(kind, str) and kind in KIND_LABELS:
        return html_text(KIND_LABELS[kind])
    return html_text(kind)


def _number(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec`` when it is a finite number, else escaped as text (a
    crafted log may put anything in a numeric field)."""
    if isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value):
        try:
            return format(value, spec)
        except ValueError:        # a float where an int was expected (seq 1.5)
            return format(float(value), "g")
    return html_text(value)


def _seconds(value: Any) -> float:
    """A time stamp as a float (0 for what is not a finite number)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _reasons(value: Any) -> list[str]:
    """An event's reasons as a list of strings, whatever a log holds there."""
    if isinstance(value, (list, tuple)):
        return [str(r) for r in value]
    return [str(value)] if value not in (None, "") else []


def events_table_html(log: CompileLog, limit: int = TABLE_ROWS) -> str:
    """The event table, newest first: time, function, changed dimension, reason, seconds, kind."""
    events = log.events
    if not events:
        return ('<div class="nk-muted">No compile events yet. Press Generate: the first call '
                'compiles the decode graph, and every new shape compiles another.</div>')
    t0 = min(_seconds(e.started_at) for e in events)
    labels = function_labels(events)  # the same names as the chart, counts and advice
    shown = events[-limit:][::-1]
    head = "".join(f"<th>{h}</th>" for h in
                   ("#", "time", "function", "changed", "reason", "seconds", "kind", "context"))
    rows = []
    for e in shown:
        reasons = _reasons(e.reasons)
        reason = reasons[0] if reasons else ""
        more = f" (+{len(reasons) - 1} more)" if len(reasons) > 1 else ""
        short = short_reason(reason, width=90)
        cells = (f'<td class="nk-nowrap">{_number(e.seq, "d")}</td>'
                 f'<td class="nk-nowrap">+{_seconds(e.started_at) - t0:.1f} s</td>'
                 f'<td class="nk-nowrap">{html_text(labels[e.function, e.location])}</td>'
                 f"<td>{html_text(e.changed or '—')}</td>"
                 f'<td title="{html_attr(chr(10).join(reasons), multiline=True)}">'
                 f"{html_text(short)}{more}</td>"
                 f'<td class="nk-nowrap">{_number(e.duration_s, ".2f")}</td>'
                 f'<td class="nk-kind">{_kind_label(e.kind)}</td>'
                 f"<td>{html_text(e.context)}</td>")
        rows.append(f'<tr class="{kind_class(e.kind)}">{cells}</tr>')
    note = (f"{len(events)} compile events, newest first"
            + (f"; showing the last {limit}" if len(events) > limit else ""))
    return (f'<div class="nk-muted">{note}</div><div class="nk-scroll">'
            f'<table class="nk-table nk-events"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def graph_counts_html(log: CompileLog) -> str:
    """Graphs per function (from ``log.summary()``), limit hits and compile seconds."""
    rows = log.summary()
    if not rows:
        return '<div class="nk-muted">0 graphs compiled</div>'
    total = sum(r["graphs"] for r in rows)
    neuron = any(e.neff_compile_s is not None or e.neff_cache is not None for e in log.events)
    kernels = sum(r["kernels"] for r in rows)
    body = "".join(
        f'<tr><td>{html_text(r["function"])}</td>'
        f'<td class="nk-count">{_number(r["graphs"], "d")}</td>'
        f'<td class="{"nk-bad" if r["limit_hits"] else ""}">{_number(r["limit_hits"], "d")}</td>'
        f'<td>{_number(r["compile_s"], ".1f")}</td>'
        + (f'<td class="nk-neff">{_number(r["neff_s"], ".1f")}</td>' if neuron else "")
        + (f'<td>{_number(r["kernels"], "d") if r["kernels"] else ""}</td>' if kernels else "")
        + "</tr>" for r in rows)
    neff = f" + {_number(log.total_neff_s, '.1f')} s NEFF builds" if neuron else ""
    more = f", {_number(kernels, 'd')} eager kernel(s)" if kernels else ""
    return (f'<div class="nk-section"><span class="nk-total-graphs">{_number(total, "d")}</span>'
            f' graph(s), {_number(log.total_compile_s, ".1f")} s compiling{neff}{more}</div>'
            '<table class="nk-table"><thead><tr><th>function</th><th>graphs</th>'
            '<th>limit hits</th><th>compile s</th>' + ("<th>NEFF s</th>" if neuron else "")
            + ("<th>kernels</th>" if kernels else "")
            + f'</tr></thead><tbody>{body}</tbody></table>')


def advice_html(advices: Iterable[Any]) -> str:
    """``diagnose()`` findings: title, detail and the fix for each."""
    items = []
    for a in advices:
        severity = getattr(a, "severity", "info")
        css = SEVERITY_CLASSES.get(severity, SEVERITY_CLASSES["info"]) if isinstance(
            severity, str) else SEVERITY_CLASSES["info"]
        fix = getattr(a, "fix", "")
        items.append(f'<div class="nk-advice-item {css}"><b>{html_text(a.title)}</b>'
                     f'<div>{html_text(a.detail)}</div>'
                     + (f'<div><i>Fix:</i> {html_text(fix)}</div>' if fix else "") + "</div>")
    return "".join(items) or '<div class="nk-muted">No findings yet.</div>'


def replay_note(source: str, header: dict[str, Any]) -> str:
    """Where a replayed log came from: its file, versions, device and description."""
    made = ", ".join(f"{k} {header[k]}" for k in ("neuronkit", "torch", "torch_neuronx")
                     if header.get(k))
    name = PurePath(str(source)).name if source else ""
    note = (f"replay of <b>{html_text(name or 'a saved log')}</b> (no model loaded)"
            + (f" · recorded with {html_text(made)}" if made else ""))
    if header.get("description"):
        note += f"<br>{html_text(header['description'])}"
    return note


def status_html(kind: str, text: str, detail: str = "") -> str:
    """The status line: a badge and class from the fixed status kinds (an unknown kind shows as
    ``info``), the text escaped, and the traceback folded."""
    known = kind if isinstance(kind, str) and kind in STATUS_LABELS else "info"
    badge = f'<span class="nk-badge">{STATUS_LABELS[known]}</span>'
    out = f'<div class="nk-status-{known}">{badge}{html_text(text)}</div>'
    if detail:
        out += f"<details><summary>traceback</summary><pre>{html_text(detail)}</pre></details>"
    return out
