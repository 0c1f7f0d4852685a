"""HTML views of a compile log: the event table, graph counts, advice, status and the replay note.

Pure functions from a log (or findings) to an HTML string; every value is escaped, since a log
may come from another machine. The widget shows them; they need no widget to test or reuse.
"""
from __future__ import annotations

import html
from pathlib import Path
from typing import Any, Iterable

from .._torch_text import short_reason
from ..events import CompileLog, function_labels

__all__ = ["events_table_html", "graph_counts_html", "advice_html", "replay_note", "status_html",
           "escape", "STYLE", "TABLE_ROWS"]

TABLE_ROWS = 200          # newest events shown in the table; the log keeps them all
KIND_LABELS = {"first": "first", "recompile": "recompile", "limit_hit": "LIMIT HIT: runs eager",
               "failed": "failed", "eager_fallback": "RAN EAGER", "kernels": "eager kernels"}
STATUS_LABELS = {"info": "Ready", "busy": "Working", "ok": "Done", "error": "Error"}

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
    """``value`` as text safe inside HTML elements and attributes."""
    return html.escape(str(value), quote=True)


def events_table_html(log: CompileLog, limit: int = TABLE_ROWS) -> str:
    """The event table, newest first: time, function, changed dimension, reason, seconds, kind."""
    events = log.events
    if not events:
        return ('<div class="nk-muted">No compile events yet. Press Generate: the first call '
                'compiles the decode graph, and every new shape compiles another.</div>')
    t0 = min(e.started_at for e in events)
    labels = function_labels(events)  # the same names as the chart, counts and advice
    shown = events[-limit:][::-1]
    head = "".join(f"<th>{h}</th>" for h in
                   ("#", "time", "function", "changed", "reason", "seconds", "kind", "context"))
    rows = []
    for e in shown:
        reason = e.reasons[0] if e.reasons else ""
        more = f" (+{len(e.reasons) - 1} more)" if len(e.reasons) > 1 else ""
        short = short_reason(reason, width=90)
        cells = (f'<td class="nk-nowrap">{e.seq}</td>'
                 f'<td class="nk-nowrap">+{e.started_at - t0:.1f} s</td>'
                 f'<td class="nk-nowrap">{escape(labels[e.function, e.location])}</td>'
                 f"<td>{escape(e.changed or '—')}</td>"
                 f'<td title="{escape(chr(10).join(e.reasons))}">{escape(short)}{more}</td>'
                 f'<td class="nk-nowrap">{e.duration_s:.2f}</td>'
                 f'<td class="nk-kind">{escape(KIND_LABELS.get(e.kind, e.kind))}</td>'
                 f"<td>{escape(e.context)}</td>")
        rows.append(f'<tr class="nk-{e.kind.replace("_", "-")}">{cells}</tr>')
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
        f'<tr><td>{escape(r["function"])}</td><td class="nk-count">{r["graphs"]}</td>'
        f'<td class="{"nk-bad" if r["limit_hits"] else ""}">{r["limit_hits"]}</td>'
        f'<td>{r["compile_s"]:.1f}</td>'
        + (f'<td class="nk-neff">{r["neff_s"]:.1f}</td>' if neuron else "")
        + (f'<td>{r["kernels"] or ""}</td>' if kernels else "") + "</tr>" for r in rows)
    neff = f" + {log.total_neff_s:.1f} s NEFF builds" if neuron else ""
    more = f", {kernels} eager kernel(s)" if kernels else ""
    return (f'<div class="nk-section"><span class="nk-total-graphs">{total}</span> graph(s), '
            f'{log.total_compile_s:.1f} s compiling{neff}{more}</div>'
            '<table class="nk-table"><thead><tr><th>function</th><th>graphs</th>'
            '<th>limit hits</th><th>compile s</th>' + ("<th>NEFF s</th>" if neuron else "")
            + ("<th>kernels</th>" if kernels else "")
            + f'</tr></thead><tbody>{body}</tbody></table>')


def advice_html(advices: Iterable[Any]) -> str:
    """``diagnose()`` findings: title, detail and the fix for each."""
    items = []
    for a in advices:
        severity = escape(getattr(a, "severity", "info"))
        items.append(f'<div class="nk-advice-item nk-sev-{severity}"><b>{escape(a.title)}</b>'
                     f'<div>{escape(a.detail)}</div>'
                     + (f'<div><i>Fix:</i> {escape(a.fix)}</div>' if a.fix else "") + "</div>")
    return "".join(items) or '<div class="nk-muted">No findings yet.</div>'


def replay_note(source: str, header: dict[str, Any]) -> str:
    """Where a replayed log came from: its file, versions, device and description."""
    made = ", ".join(f"{k} {header[k]}" for k in ("neuronkit", "torch", "torch_neuronx")
                     if header.get(k))
    note = (f"replay of <b>{escape(Path(source).name)}</b> (no model loaded)"
            + (f" · recorded with {escape(made)}" if made else ""))
    if header.get("description"):
        note += f"<br>{escape(header['description'])}"
    return note


def status_html(kind: str, text: str, detail: str = "") -> str:
    badge = f'<span class="nk-badge">{STATUS_LABELS.get(kind, kind)}</span>'
    out = f'<div class="nk-status-{escape(kind)}">{badge}{escape(text)}</div>'
    if detail:
        out += f"<details><summary>traceback</summary><pre>{escape(detail)}</pre></details>"
    return out
