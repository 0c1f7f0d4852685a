"""The compile report as one self-contained HTML page (``neuronkit report LOG --html FILE``).

    Path("report.html").write_text(report_page(log))

No server and nothing fetched: no script, the charts are inline PNGs (``data:image/png``) and
the style is in the page; a Content-Security-Policy meta tag forbids any fetch besides those
images. A log is untrusted input (it may come from another machine or person), so every value
that reaches the page is escaped for its place (``neuronkit.safe``), and class names come from
fixed sets (``views.html``). The page is bounded whatever the log holds: at most ``MOST_ROWS``
event rows (the newest; how many are not shown is said), ``MOST_FUNCTIONS`` summary rows and
``MOST_RANKS`` rank rows, a field longer than any recorder writes read by its start and length.
"""
from __future__ import annotations

import base64
import os
from collections import defaultdict
from pathlib import Path
from typing import Any, Sequence

from neuronkit.advice.bill import Bill, as_neuron_of, compile_bill
from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.excerpts import cut_long
from neuronkit.advice.finding import Advice
from neuronkit.events.event import GRAPH_KINDS
from neuronkit.events.facts import number
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_attr, html_text
from neuronkit.views.bill_text import bill_html
from neuronkit.views.charts import graph_growth, png_bytes, timeline
from neuronkit.views.html import STYLE, advice_html, events_table_html
from neuronkit.views.report_facts import (
    ReportFacts,
    bounded_log,
    header_field,
    rank_ranges,
    ranks_text,
    readable_log,
    report_facts,
    seconds_text,
    synthetic_text,
)
from neuronkit.views.table import TABLE_ROWS
from neuronkit.views.table_cells import number_text

__all__ = ["CSP", "MOST_FUNCTIONS", "MOST_RANKS", "MOST_ROWS", "report_page", "write_report_page"]

MOST_ROWS = 2_000  # event rows a page shows at most (the newest), whatever ``limit`` asks
MOST_FUNCTIONS = 200  # summary rows (the functions that compiled longest)
MOST_RANKS = 256  # per-rank rows (the ranks that compiled longest)
VERSIONS = ("neuronkit", "torch", "torch_neuronx", "transformers", "python")
# nothing is fetched: no script, style only inline, images only data: URIs, no form or base
CSP = ("default-src 'none'; img-src data:; style-src 'unsafe-inline'; base-uri 'none'; "
       "form-action 'none'")

PAGE_STYLE = """<style>
body { font-family: system-ui, sans-serif; margin: 16px 24px; color: #222; }
.nk-dashboard h1 { font-size: 20px; margin: 0 0 8px 0; }
.nk-dashboard h2 { font-size: 16px; margin: 18px 0 6px 0; border-bottom: 1px solid #ddd; }
.nk-dashboard .nk-scroll { max-height: 70vh; }
.nk-dashboard table.nk-facts { width: auto; }
.nk-dashboard table.nk-facts th { border-bottom: 1px solid #eee; font-weight: 600; }
.nk-dashboard td.nk-num { text-align: right; white-space: nowrap; }
.nk-dashboard .nk-synthetic { background: #fff3cd; color: #7a4f00; font-weight: 600;
  padding: 4px 8px; margin: 4px 0 8px 0; }
.nk-dashboard img.nk-chart { max-width: 100%; display: block; margin: 4px 0 12px 0; }
</style>"""


def _text(value: Any) -> str:
    """Any value as escaped text, a field longer than any recorder writes by its start."""
    return html_text(cut_long(value if type(value) is str else "" if value is None else str(value)))


def _num(value: Any, spec: str) -> str:
    return html_text(number_text(value, spec))


def _table(heads: Sequence[str], rows: list[list[str]], numeric_from: int = 1,
           css: str = "nk-table") -> str:
    """A table of already-escaped cells; the columns from ``numeric_from`` on right-aligned."""
    head = "".join(f"<th>{html_text(h)}</th>" for h in heads)
    body = "".join("<tr>" + "".join(
        f'<td class="nk-num">{c}</td>' if i >= numeric_from else f"<td>{c}</td>"
        for i, c in enumerate(row)) + "</tr>" for row in rows)
    return (f'<table class="{css}"><thead><tr>{head}</tr></thead>'
            f"<tbody>{body}</tbody></table>")


def _header_html(log: CompileLog, facts: ReportFacts) -> str:
    """The synthetic banner, then device, backend, versions, ranks, events, wall and seconds."""
    header = log.header if isinstance(log.header, dict) else {}
    facts_rows = [("device", _text(header_field(log, "device")) or "unknown"),
                  ("backend", _text(header_field(log, "backend")) or "unknown")]
    versions = ", ".join(f"{html_text(k)} {_text(header[k])}" for k in VERSIONS if header.get(k))
    facts_rows.append(("versions", versions or "unknown"))
    if facts.ranks:
        facts_rows.append(("ranks", _text(rank_ranges(facts.ranks))))
    facts_rows += [("events", f"{len(log.events)}"),
                   ("wall time", f"{_num(log.wall_time_s, '.1f')} s" if log.wall_time_s
                    else "unknown"),
                   ("compile seconds", html_text(seconds_text(facts))),
                   ("share of wall", "unknown" if facts.share is None else f"{facts.share:.1%}")]
    if len(facts.ranks) > 1:
        facts_rows.append(("seconds", _text(ranks_text(facts))))
    if header.get("description"):
        facts_rows.append(("description", _text(header["description"])))
    banner = (f'<div class="nk-synthetic">{_text(synthetic_text(facts.synthetic))}</div>'
              if facts.synthetic else "")
    rows = "".join(f"<tr><th>{html_text(k)}</th><td>{v}</td></tr>" for k, v in facts_rows)
    return f'{banner}<table class="nk-table nk-facts"><tbody>{rows}</tbody></table>'


def _ranks_html(log: CompileLog, facts: ReportFacts, most: int = MOST_RANKS) -> str:
    """Per rank: events, graphs, limit hits, Dynamo s, NEFF s and both; the busiest first."""
    if len(facts.ranks) < 2:
        return (f'<div class="nk-muted">one rank ({_text(rank_ranges(facts.ranks))}): '
                "the totals above are its own</div>" if facts.ranks else "")
    totals: dict[Any, list[float]] = defaultdict(lambda: [0, 0, 0, 0.0, 0.0])
    for e in log.events:  # one pass (readable events: numbers are numbers)
        row = totals[e.rank]
        row[0] += 1
        row[1] += e.kind in GRAPH_KINDS
        row[2] += e.kind == "limit_hit"
        row[3] += float(e.duration_s or 0.0)
        row[4] += e.neff_s
    order = sorted(totals, key=lambda r: -(totals[r][3] + totals[r][4]))
    rows = [[_text(r), f"{int(t[0])}", f"{int(t[1])}", f"{int(t[2])}", f"{t[3]:.2f}",
             f"{t[4]:.1f}", f"{t[3] + t[4]:.2f}"] for r in order[:most] for t in [totals[r]]]
    more = (f'<div class="nk-muted">{len(order) - most} more rank(s) not shown (those that '
            "compiled least)</div>" if len(order) > most else "")
    return _table(["rank", "events", "graphs", "limit hits", "Dynamo s", "NEFF s", "total s"],
                  rows) + more


def _summary_html(rows_in: list[dict[str, Any]], facts: ReportFacts,
                  most: int = MOST_FUNCTIONS) -> str:
    """The per-function summary (``CompileLog.summary`` rows): the ``most`` that compiled longest,
    in the log's order; a NEFF s column on Neuron, kernel columns where kernels were built."""
    if not rows_in:
        return '<div class="nk-muted">no compile events</div>'
    kernels = any(number(r.get("kernels")) for r in rows_in)
    kept = rows_in
    if len(rows_in) > most:
        cost = sorted(range(len(rows_in)), key=lambda i: -(
            (number(rows_in[i].get("compile_s")) or 0) + (number(rows_in[i].get("neff_s")) or 0)))
        kept = [rows_in[i] for i in sorted(cost[:most])]
    heads = ["function", "graphs", "shapes", "limit hits", "failed", "compile s",
             *(["NEFF s"] if facts.neuron else []), *(["kernels"] if kernels else []),
             "mean s", "share of wall"]
    rows = []
    for r in kept:
        share = number(r.get("share_of_wall"))
        rows.append([_text(r.get("function")), _num(r.get("graphs"), "d"),
                     _num(r.get("distinct_shapes"), "d"), _num(r.get("limit_hits"), "d"),
                     _num(r.get("failed"), "d"), _num(r.get("compile_s"), ".3f"),
                     *([_num(r.get("neff_s"), ".1f")] if facts.neuron else []),
                     *([_num(r.get("kernels"), "d")] if kernels else []),
                     _num(r.get("mean_s"), ".3f"), "-" if share is None else f"{share:.1%}"])
    more = (f'<div class="nk-muted">{len(rows_in) - most} more function(s) not shown (those '
            "that compiled least)</div>" if len(rows_in) > most else "")
    note = ('<div class="nk-muted">compile s: Dynamo\'s seconds, and on a kernels row the build '
            "seconds of its eager-op kernels; counts and seconds add up all ranks</div>")
    return _table(heads, rows) + more + note


def _events_html(recorded: CompileLog, limit: int | None) -> str:
    """The newest ``limit`` events (at most ``MOST_ROWS``), and how many are not shown."""
    rows = MOST_ROWS if limit is None else min(limit, MOST_ROWS)
    if not recorded.events:
        return '<div class="nk-muted">no compile events</div>'
    if rows == 0:
        return f'<div class="nk-muted">{len(recorded.events)} event(s) not shown (limit 0)</div>'
    left = len(recorded.events) - rows
    note = (f'<div class="nk-muted">{left} earlier event(s) not shown (neuronkit report LOG '
            "--json --limit all prints them all)</div>" if left > 0 else "")
    return note + events_table_html(recorded, limit=rows)  # labels told apart over every event


def _charts_html(log: CompileLog) -> str:
    """The timeline and the graphs per function, as inline PNGs."""
    out = []
    for alt, fig in (("compile timeline", timeline(log, figsize=(10.0, 4.0))),
                     ("graphs per function", graph_growth(log, figsize=(10.0, 3.6)))):
        data = base64.b64encode(png_bytes(fig)).decode("ascii")
        out.append(f'<img class="nk-chart" alt="{html_attr(alt)}" '
                   f'src="data:image/png;base64,{data}">')
    return "".join(out)


def _section(heading: str, body: str) -> str:
    return f"<h2>{html_text(heading)}</h2>{body}"


def report_page(log: CompileLog, *, advice: Sequence[Advice] | None = None,
                title: str | None = None, extra_sections: Sequence[tuple[str, str]] = (),
                limit: int | None = TABLE_ROWS,
                summary: list[dict[str, Any]] | None = None, bill: Bill | None = None) -> str:
    """One self-contained HTML page: the header (device, backend, versions, ranks, a synthetic
    log's flag, wall time, compile and NEFF seconds), the advice, per-rank totals, the summary
    per function, the newest ``limit`` events (None: all, up to ``MOST_ROWS``) and the charts.

    ``advice`` / ``summary``: ``diagnose(log)`` / ``log.summary()`` if already made (else made
    here). ``bill``: the compile bill shown first (``compile_bill``; made here for a log recorded
    ``as_neuron``, else none). ``extra_sections``: (heading, HTML fragment) pairs placed after the header; the
    fragment must already be safe (escaped by its maker), the heading is escaped here.
    """
    recorded = log
    read = readable_log(recorded, contents=advice is None)
    cut = bounded_log(read)
    if cut is not read:  # rows given name fields whole: made again from what is shown
        summary = None
    facts = report_facts(cut)
    rows = cut.summary() if summary is None else summary
    findings = list(diagnose(cut) if advice is None else advice)
    name = Path(str(recorded.path)).name if recorded.path else ""
    heading = title if title is not None else (
        "neuronkit compile report" + (f": {name}" if name else ""))
    body = [f"<h1>{_text(heading)}</h1>", _header_html(cut, facts)]
    if bill is None and as_neuron_of(cut) is not None:
        bill = compile_bill(cut)
    if bill is not None:
        body.append(_section("Compile bill", bill_html(bill)))
    body += [_section(h, fragment) for h, fragment in extra_sections]
    body += [_section("Advice", f'<div class="nk-advice">{advice_html(findings)}</div>'),
             _section("Per rank", _ranks_html(cut, facts)),
             _section("Per function", _summary_html(rows, facts)),
             _section("Compile events", _events_html(recorded, limit)),
             _section("Charts", _charts_html(cut))]
    return ("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">"
            f'<meta http-equiv="Content-Security-Policy" content="{html_attr(CSP)}">'
            '<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{_text(heading)}</title>{STYLE}{PAGE_STYLE}</head>"
            f'<body><div class="nk-dashboard nk-report">{"".join(body)}</div></body></html>\n')


def write_report_page(log: CompileLog, path: str | os.PathLike[str], **options: Any) -> Path:
    """Write :func:`report_page` of ``log`` to ``path`` (UTF-8; folders are created); returns
    the path. ``options``: those of :func:`report_page`."""
    out = Path(path)
    page = report_page(log, **options)  # before touching the disk: a failure leaves no file
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(page, encoding="utf-8")
    return out
