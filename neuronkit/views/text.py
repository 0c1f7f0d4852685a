"""Text views of a compile log: the event table, a per-function summary, the advice, a report.

    print(format_report(log))             # what `neuronkit report LOG` prints
    report_data(log)                      # what `neuronkit report LOG --json` prints, as a dict

Plain text in aligned columns, at most ``WIDTH`` (120) characters a line, the same text for the
same events (times are offsets from the first event), so notebooks can compare it. Every value
that came from the log (names, reasons, context, header fields) is passed through
``terminal_safe``: no control character or escape sequence reaches the terminal; no value is
cut (a long one wraps inside its column). Columns and wraps: ``text_layout.py``; the one pass
over the log: ``report_facts.py``; the JSON report: ``report_json.py``.
"""
from __future__ import annotations

import os
import textwrap
from typing import Any, Iterable, Sequence

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import Advice
from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import number, text_of
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import terminal_safe
from neuronkit.sources.torch_text import guard_text, input_name
from neuronkit.views.report_facts import (
    DEFAULT_LIMIT,
    ReportFacts,
    as_log,
    check_limit,
    header_field,
    rank_ranges,
    readable_log,
    report_facts,
    shown,
)
from neuronkit.views.table_cells import UNKNOWN, number_text, reason_list
from neuronkit.views.text_layout import WIDTH, Col, clean, fitted, wrap

__all__ = ["LIMIT_FLAG", "format_advice", "format_events", "format_report", "format_summary"]

LIMIT_FLAG = "!!"


# -- the event table -----------------------------------------------------------------------------

def _first_reason(e: CompileEvent) -> str:
    reasons = reason_list(e.reasons)
    return clean(guard_text(reasons[0])) if reasons else ""


def _why(e: CompileEvent) -> str:
    """``changed`` and the first guard-failure reason, once when they say the same thing."""
    changed = clean(input_name(text_of(e.changed)))
    reason = _first_reason(e)
    if not reason or reason == changed:
        return changed or "-"
    return f"{changed}; {reason}" if changed else reason


def _kind(e: CompileEvent) -> str:
    if e.kind == "limit_hit":
        return f"limit_hit {LIMIT_FLAG}"
    if e.kind == "kernels":
        return f"kernels x{number_text(e.kernels, 'd')}" + (" (forecast)" if e.forecast else "")
    if e.kind == "cpu_fallback":
        return f"cpu_fallback x{len(e.ops) if isinstance(e.ops, dict) else '?'}"
    return text_of(e.kind)


def _neff(e: CompileEvent) -> str:
    """The NEFF column: seconds and where it came from; "?" while unresolved."""
    if e.kind not in BUILD_KINDS:
        return "-"
    if e.neff_compile_s is None and e.neff_cache is None:
        return "?"
    where = {"compiled": "", "disk_hit": " disk/wait", "memory_hit": " memory"}.get(
        text_of(e.neff_cache), " not built")
    return f"{number_text(e.neff_compile_s, '.1f') or '0.0'}{where}"


def _offset(started_at: Any, t0: float) -> str:
    start = number(started_at)
    return UNKNOWN if start is None else f"{start - t0:.2f}"


def _events_text(events: list[CompileEvent], limit: int | None, facts: ReportFacts) -> str:
    """The rows of the recorded events (what one holds that is no number shows as "?"), with
    ``facts`` of them as views read them."""
    last = shown(events, limit)
    several_ranks = len(facts.ranks) > 1
    cols = [Col("#", right=True), Col("t+s", right=True, least=8),  # up to 99999.99 s
            Col("function", cap=48, least=12, weight=1.1), Col("kind"),
            Col("changed / reason", cap=80, least=14, weight=2.2), Col("compile s", right=True),
            *([Col("NEFF s", right=True)] if facts.neuron else []),
            Col("context", cap=48, least=7, weight=0.7),
            *([Col("rank", right=True)] if several_ranks else [])]
    rows = []
    for e in last:
        function = text_of(e.function)
        row = [number_text(e.seq, "d"), _offset(e.started_at, facts.t0),
               facts.labels.get((function, text_of(e.location)), function), _kind(e), _why(e),
               number_text(e.duration_s, ".3f"), *([_neff(e)] if facts.neuron else []),
               text_of(e.context) or "-", *([number_text(e.rank, "d")] if several_ranks else [])]
        rows.append([clean(cell) or "-" for cell in row])
    left = len(events) - len(last)
    if not rows:
        return f"{left} event(s) not shown (limit 0)"
    text = fitted(cols, rows)
    if left:
        text = f"({left} earlier event(s) not shown: the last {len(last)} of {len(events)})\n" + text
    hits = facts.kinds["limit_hit"]
    if hits:
        text += (f"\n{LIMIT_FLAG} recompile limit hit ({hits}x): torch ran these calls eagerly, "
                 "uncompiled")
    return text


def format_events(log: CompileLog | Iterable[CompileEvent], limit: int | None = None) -> str:
    """One row per event: seq, time offset, function, kind, what changed (and the first guard
    reason when it says something else), compile s, NEFF s on Neuron, context, rank (when the
    log holds several). ``limit``: only the most recent ``limit`` events are formatted."""
    log = as_log(log)
    check_limit(limit)
    if not log.events:
        return "no compile events"
    return _events_text(log.events, limit, report_facts(readable_log(log)))


# -- the summary ---------------------------------------------------------------------------------

def _summary_text(log: CompileLog, rows_in: list[dict[str, Any]], facts: ReportFacts) -> str:
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    neuron = facts.neuron
    kernels = any(r["kernels"] for r in rows_in)

    def extra(neff: float, count: int | str) -> list[str]:
        return ([f"{neff:.1f}"] if neuron else []) + ([str(count)] if kernels else [])

    rows = [[clean(r["function"]), str(r["graphs"]), str(r["distinct_shapes"]),
             str(r["limit_hits"]), str(r["failed"]), f"{r['compile_s']:.3f}",
             *extra(r["neff_s"], r["kernels"] or ""), f"{r['mean_s']:.3f}",
             share(r["share_of_wall"])] for r in rows_in]
    rows.append(["total", str(sum(r["graphs"] for r in rows_in)), "",
                 str(sum(r["limit_hits"] for r in rows_in)), str(sum(r["failed"] for r in rows_in)),
                 f"{facts.compile_s:.3f}",
                 *extra(facts.neff_s, sum(r["kernels"] for r in rows_in) or ""), "",
                 share(facts.share)])
    headers = ["function", "graphs", "shapes", "limit hits", "failed", "compile s",
               *(["NEFF s"] if neuron else []), *(["kernels"] if kernels else []), "mean s",
               "share of wall"]
    cols = [Col(headers[0], cap=64, least=16),
            *(Col(h, right=True) for h in headers[1:])]
    text = fitted(cols, rows)
    if neuron:
        text += ("\ncompile s: Dynamo (tracing, lowering); NEFF s: the neuronx-cc build after it "
                 "(0 for a cache hit); the share of wall counts both")
    if len(facts.ranks) > 1:
        text += (f"\n{len(facts.ranks)} ranks: counts and seconds add up all ranks; the share of "
                 "wall is that of the rank that compiled longest")
    return wrap(text)


def format_summary(log: CompileLog | Iterable[CompileEvent]) -> str:
    """Per function: graphs, distinct shapes, limit hits, total/mean compile s, share of wall.

    In a merged log (several ranks) the counts and seconds add up all ranks, and the share of
    wall time is per rank: that of the rank that compiled longest (``CompileLog.compile_share``).
    """
    log = readable_log(as_log(log))
    rows = log.summary()
    return _summary_text(log, rows, report_facts(log)) if rows else "no compile events"


# -- the advice ----------------------------------------------------------------------------------

def format_advice(advices: Sequence[Advice]) -> str:
    """Numbered findings, each with its detail and fix indented beneath it (terminal-safe, lines
    longer than ``WIDTH`` wrapped)."""
    if not advices:
        return "no findings"
    out: list[str] = []
    for i, advice in enumerate(advices, start=1):
        pad = " " * len(f"{i}. ")
        lines = terminal_safe(advice).replace("\t", " ").splitlines() or [""]
        for j, line in enumerate(line.rstrip() for line in lines):
            text = (f"{i}. " if j == 0 else pad) + line
            lead = pad + line[: len(line) - len(line.lstrip())] + "  "
            out += [text] if len(text) <= WIDTH else textwrap.wrap(text, WIDTH,
                                                                   subsequent_indent=lead)
    return "\n".join(out)


# -- the report ----------------------------------------------------------------------------------

def _named(log: CompileLog, key: str) -> str:
    """A header field (``device``, ``backend``), else the events' values, else "unknown"."""
    return clean(header_field(log, key)) or "unknown"


def _header_line(log: CompileLog, facts: ReportFacts) -> str:
    parts = [f"device {_named(log, 'device')}", f"backend {_named(log, 'backend')}",
             f"{len(log.events)} events", f"{facts.compile_s:.2f} s compiling"
             + (f" + {facts.neff_s:.1f} s NEFF builds" if facts.neuron else "")]
    if log.wall_time_s:
        parts.append(f"wall {log.wall_time_s:.1f} s")
    if len(facts.ranks) > 1:
        parts.append(f"ranks {rank_ranges(facts.ranks)}")
    elif facts.ranks and facts.ranks[0] != 0:
        parts.append(f"rank {clean(facts.ranks[0])}")
    text = wrap("neuronkit compile report: " + ", ".join(parts))
    return text + "".join(f"\n{line}" for line in _header_notes(log))


def _header_notes(log: CompileLog) -> list[str]:
    """A merged log's clock alignment and the ranks whose log was never closed."""
    notes = []
    offsets = log.header.get("clock_offsets")
    if isinstance(offsets, dict) and offsets:
        shown = ", ".join(f"{clean(h)} {number_text(s, '+.3f')} s"
                          for h, s in list(offsets.items())[:8])
        shown += f" and {len(offsets) - 8} more" if len(offsets) > 8 else ""
        notes.append(wrap(f"clocks aligned at the first barrier: {shown} taken off its times"))
    unclosed = log.header.get("unclosed_ranks")
    if isinstance(unclosed, list) and unclosed:
        notes.append(wrap(f"ended without closing its log (killed, or still running): rank(s) "
                          f"{rank_ranges([r for r in unclosed if isinstance(r, int)])}"))
    return notes


def _section(title: str, body: str) -> str:
    return f"{title}\n{'=' * len(title)}\n{body}"


def format_report(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str],
                  limit: int | None = DEFAULT_LIMIT, *,
                  advice: Sequence[Advice] | None = None,
                  summary: list[dict[str, Any]] | None = None) -> str:
    """The header line, the most recent ``limit`` events (None: all), the per-function summary
    and the advice. ``advice`` / ``summary``: ``diagnose(log)`` / ``log.summary()`` if already
    made (else made here). Its own cost: two passes over the events and the shown rows."""
    recorded = as_log(log)
    check_limit(limit)
    log = readable_log(recorded, contents=advice is None)
    facts = report_facts(log)
    rows = log.summary() if summary is None else summary
    events = _events_text(recorded.events, limit, facts) if log.events else "no compile events"
    per_function = _summary_text(log, rows, facts) if rows else "no compile events"
    return "\n\n".join([_header_line(log, facts), _section("Compile events", events),
                        _section("Per function", per_function),
                        _section("Advice", format_advice(diagnose(log) if advice is None
                                                         else advice))]) + "\n"
