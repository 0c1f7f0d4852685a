"""HTML views of a compile log: the event table, graph counts, advice, status and the replay note.

Pure functions from a log (or findings) to an HTML string. A log is untrusted input (it may come
from another machine or person, or be built in memory with any values), so every value that
reaches the HTML is either escaped for its position (:func:`~neuronkit.safe.html_text`,
:func:`~neuronkit.safe.html_attr`) or mapped to a known value: a row's CSS class comes only
from :data:`KIND_CLASSES` (anything else: ``nk-unknown``), a severity or status class only from
the fixed sets, numbers are formatted as numbers. The widget shows them; they need no widget to
test or reuse.
"""
from __future__ import annotations

import re
from pathlib import PurePath
from typing import Any, Iterable

from neuronkit.advice.excerpts import LONG_CHARS, cut_long, excerpt
from neuronkit.events.event import KINDS
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_attr, html_text
from neuronkit.views.chart_layout import KEY_COLOURS, MARK_GREY, KeyEntry, heaviest
from neuronkit.views.report_facts import bounded_log, readable_log
from neuronkit.views.table import ARRIVAL, TABLE_ROWS, EventTable
from neuronkit.views.table_cells import COLUMN_LABELS, number_text

__all__ = ["chart_key_html", "events_table_html", "table_page_html", "graph_counts_html",
           "advice_html", "replay_note", "status_html", "escape", "kind_class", "STYLE",
           "KIND_CLASSES", "UNKNOWN_CLASS"]

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
.nk-dashboard .nk-chart-key { font-size: 11px; line-height: 1.5; max-height: 320px;
  overflow-y: auto; }
.nk-dashboard .nk-chart-key div { white-space: nowrap; overflow: hidden;
  text-overflow: ellipsis; }
.nk-dashboard .nk-key-mark { display: inline-block; width: 1.4em; text-align: center; }
.nk-dashboard .nk-bad { color: #b00020; font-weight: 600; }
.nk-dashboard .nk-good { color: #1b6e20; }
.nk-dashboard .nk-advice-item { margin: 0 0 6px 0; }
.nk-dashboard pre.nk-text { white-space: pre-wrap; background: #f6f6f6; padding: 4px 6px;
  margin: 2px 0; max-height: 120px; overflow-y: auto; }
""" + "".join(f".nk-dashboard .nk-key-c{i} {{ color: {colour}; }}\n"
                 for i, colour in enumerate(KEY_COLOURS)) + "</style>"


def escape(value: Any) -> str:
    """``value`` as text safe inside HTML elements and quoted attributes (one line there: use
    :func:`~neuronkit.safe.html_attr` for attributes). Never for class names or ids."""
    return html_text(value)


def kind_class(kind: Any) -> str:
    """The CSS class of an event kind: from :data:`KIND_CLASSES`, else ``nk-unknown``."""
    return KIND_CLASSES.get(kind, UNKNOWN_CLASS) if isinstance(kind, str) else UNKNOWN_CLASS


def _number(value: Any, spec: str) -> str:
    """``value`` formatted with ``spec`` when it is a number, else "?" (a crafted log may put
    anything in a numeric field)."""
    return html_text(number_text(value, spec))


def _reasons(value: Any) -> list[str]:
    """An event's reasons as a list of strings, whatever a log holds there."""
    if isinstance(value, (list, tuple)):
        return [str(r) for r in value]
    return [str(value)] if value not in (None, "") else []


def _tooltip(texts: list[str], most: int = LONG_CHARS) -> str:
    """Texts one a line, whole up to ``most`` characters (10 kB: more than any recorder writes);
    past it their start and whole length (``… (20,000,000 chars)``), so a hostile log's 20 MB
    reason makes no 20 MB page."""
    whole = sum(map(len, texts)) + max(len(texts) - 1, 0)
    if whole <= most:
        return "\n".join(texts)
    head, room = [], most
    for text in texts:  # no more of them than fits
        head.append(text[:room])
        room -= len(head[-1]) + 1
        if room <= 0:
            break
    return excerpt("\n".join(head), most, whole)


def events_table_html(source: CompileLog | EventTable, limit: int = TABLE_ROWS) -> str:
    """The event table: of a log, its newest ``limit`` events (time, function, changed dimension,
    reason, seconds, kind, context; rank and the Neuron columns where the log has them); of an
    :class:`EventTable`, its current page (:func:`table_page_html`)."""
    if isinstance(source, EventTable):
        return table_page_html(source)
    table = EventTable(source, page_size=limit)
    if not table.total:
        return _NO_EVENTS
    note = (f"{table.total} compile events, newest first"
            + (f"; showing the last {limit}" if table.total > limit else ""))
    return _table_html(table, note, sortable=False)


def table_page_html(table: EventTable, sortable: bool = True) -> str:
    """The current page of an :class:`EventTable`, with its row range and order; with
    ``sortable`` each header cell names its column in ``data-sort`` (to sort by a click)."""
    if not table.total:
        return _NO_EVENTS
    if table.sort_column == ARRIVAL:
        order = "newest first" if table.descending else "oldest first"
    else:
        order = (f"by {COLUMN_LABELS[table.sort_column]}, "
                 + ("descending" if table.descending else "ascending"))
    return _table_html(table, f"{table.range_text}, {order}", sortable=sortable)


_NO_EVENTS = ('<div class="nk-muted">No compile events yet. Press Generate: the first call '
              'compiles the decode graph, and every new shape compiles another.</div>')
# a cell's CSS class per column: fixed names, never built from data
_CELL_CLASSES = {"seq": "nk-nowrap", "time": "nk-nowrap", "function": "nk-nowrap",
                 "duration_s": "nk-nowrap", "kind": "nk-kind", "rank": "nk-nowrap",
                 "graph_count": "nk-nowrap", "neff_compile_s": "nk-neff", "neff_cache": "nk-nowrap",
                 "kernels": "nk-nowrap"}
_SORTED_CLASSES = {True: "nk-sorted-desc", False: "nk-sorted-asc"}
# printable ASCII without & < > " ' `: text that html_text would return unchanged
_PLAIN_TEXT = re.compile(r"[ !#-%(-;=?-_a-~]*")


def _cell_text(text: str) -> str:
    """``html_text(text)``, skipping the work for plain text (most cells: numbers, names)."""
    return text if _PLAIN_TEXT.fullmatch(text) else html_text(text)


def _table_html(table: EventTable, note: str, sortable: bool) -> str:
    """The table of a page: every value escaped for its place, row classes from the kind."""
    columns = table.columns
    heads = []
    for column in columns:
        css = f' class="{_SORTED_CLASSES[table.descending]}"' if column == table.sort_column else ""
        attr = f' data-sort="{html_attr(column)}"' if sortable else ""
        heads.append(f"<th{attr}{css}>{html_text(COLUMN_LABELS[column])}</th>")
    opens = [f'<td class="{_CELL_CLASSES[c]}">' if c in _CELL_CLASSES else "<td>" for c in columns]
    rows = []
    for event in table.page_events():
        values = table.row(event, columns)
        cells = []
        for column, open_tag in zip(columns, opens, strict=True):
            if column == "reason":
                reasons = html_attr(_tooltip(_reasons(event.reasons)), multiline=True)
                open_tag = f'<td title="{reasons}">'
            cells.append(f"{open_tag}{_cell_text(values[column])}</td>")
        rows.append(f'<tr class="{kind_class(event.kind)}">{"".join(cells)}</tr>')
    return (f'<div class="nk-muted">{html_text(note)}</div><div class="nk-scroll">'
            f'<table class="nk-table nk-events"><thead><tr>{"".join(heads)}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def graph_counts_html(log: CompileLog) -> str:
    """Graphs per function (from ``log.summary()``), limit hits and seconds, each column named
    by its source (Dynamo, NEFF builds, eager-kernel builds); what an event holds that is no
    number counts nothing."""
    log = bounded_log(readable_log(log))
    rows = log.summary(shapes=False)
    if not rows:
        return '<div class="nk-muted">0 graphs compiled</div>'
    total = sum(r["graphs"] for r in rows)
    neuron = any(e.neff_compile_s is not None or e.neff_cache is not None for e in log.events)
    kernels = sum(r["kernels"] for r in rows)
    kernel_s = sum(r["compile_s"] for r in rows if r["kernels"])  # a kernels row: build seconds

    def seconds(r: dict) -> str:
        dynamo = "" if r["kernels"] and not r["graphs"] else _number(r["compile_s"], ".1f")
        return (f'<td>{dynamo}</td>'
                + (f'<td class="nk-neff">{_number(r["neff_s"], ".1f")}</td>' if neuron else "")
                + (f'<td>{_number(r["kernels"], "d") if r["kernels"] else ""}</td>'
                   f'<td>{_number(r["compile_s"], ".1f") if r["kernels"] else ""}</td>'
                   if kernels else ""))
    body = "".join(
        f'<tr><td>{html_text(r["function"])}</td>'
        f'<td class="nk-count">{_number(r["graphs"], "d")}</td>'
        f'<td class="{"nk-bad" if r["limit_hits"] else ""}">{_number(r["limit_hits"], "d")}</td>'
        + seconds(r) + "</tr>" for r in rows)
    neff = f" + {_number(log.total_neff_s, '.1f')} s NEFF builds" if neuron else ""
    more = (f" + {_number(kernel_s, '.1f')} s eager-kernel builds ({_number(kernels, 'd')} "
            f"kernel(s))" if kernels else "")
    dynamo_s = log.total_compile_s - kernel_s
    return (f'<div class="nk-section"><span class="nk-total-graphs">{_number(total, "d")}</span>'
            f' graph(s), {_number(dynamo_s, ".1f")} s Dynamo compile{neff}{more}</div>'
            '<table class="nk-table"><thead><tr><th>function</th><th>graphs</th>'
            '<th>limit hits</th><th>Dynamo s</th>' + ("<th>NEFF s</th>" if neuron else "")
            + ("<th>kernels</th><th>kernel s</th>" if kernels else "")
            + f'</tr></thead><tbody>{body}</tbody></table>')


KEY_FUNCTIONS = 12  # the most functions the key lists (the heaviest, in order)
_KEY_CLASSES = {colour: f"nk-key-c{i}" for i, colour in enumerate(KEY_COLOURS)}


def chart_key_html(entries: Iterable[KeyEntry], most: int = KEY_FUNCTIONS) -> str:
    """A chart's key beside its image: a mark in its colour and the label, one per row. At
    most ``most`` functions (the heaviest, in their order; ``+ N more``); marks always."""
    entries = list(entries)
    functions = [e for e in entries if e.function]
    shown = heaviest(functions, lambda e: e.weight, most)
    rest = len(functions) - len(shown)
    more = [f'<div class="nk-muted">+ {rest} more</div>'] if rest else []
    return "".join([_key_row(e) for e in shown] + more
                   + [_key_row(e) for e in entries if not e.function])


def _key_row(e: KeyEntry) -> str:
    mark = e.symbol  # the mark the chart draws
    colour = _KEY_CLASSES.get(e.colour, _KEY_CLASSES[MARK_GREY])
    label = cut_long(e.label)
    return (f'<div title="{html_attr(label)}"><span class="nk-key-mark {colour}">'
            f'{mark}</span>{html_text(label)}</div>')


def advice_html(advices: Iterable[Any]) -> str:
    """``diagnose()`` findings: title, detail and the fix for each."""
    items = []
    for a in advices:
        severity = getattr(a, "severity", "info")
        css = SEVERITY_CLASSES.get(severity, SEVERITY_CLASSES["info"]) if isinstance(
            severity, str) else SEVERITY_CLASSES["info"]
        fix = cut_long(getattr(a, "fix", ""))
        items.append(f'<div class="nk-advice-item {css}"><b>{html_text(cut_long(a.title))}</b>'
                     f'<div>{html_text(cut_long(a.detail))}</div>'
                     + (f'<div><i>Fix:</i> {html_text(fix)}</div>' if fix else "") + "</div>")
    return "".join(items) or '<div class="nk-muted">No findings yet.</div>'


def replay_note(source: str, header: dict[str, Any]) -> str:
    """Where a replayed log came from: its file, versions, device and description."""
    made = ", ".join(f"{k} {cut_long(str(header[k]))}" for k in ("neuronkit", "torch",
                                                                  "torch_neuronx")
                     if header.get(k))
    name = PurePath(str(source)).name if source else ""
    note = (f"replay of <b>{html_text(cut_long(name) or 'a saved log')}</b> (no model loaded)"
            + (f" · recorded with {html_text(made)}" if made else ""))
    if header.get("description"):
        note += f"<br>{html_text(cut_long(str(header['description'])))}"
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
