"""Text views of a compile log: the event table, a per-function summary, the advice, a report.

    print(format_report(log))             # what `neuronkit report LOG` prints
    report_data(log)                      # what `neuronkit report LOG --json` prints, as a dict

Plain text in aligned columns, at most ``WIDTH`` (120) characters a line, the same text for the
same events (times are offsets from the first event), so notebooks can compare it. Every value
that came from the log (names, reasons, context, header fields) is passed through
``terminal_safe``: no control character or escape sequence reaches the terminal. A long value
wraps inside its column; the event table's context alone is cut past its row's lines, and a
cell shows at most ``CELL_CHARS`` characters. A field longer than any recorder writes (a hostile
log's 20 MB reason) is read by its start and length (``… (20,000,000 chars)``), so it costs what
a short one does; ``--json`` keeps it whole. Columns and wraps: ``text_layout.py``; the one pass
over the log: ``report_facts.py``; the JSON report: ``report_json.py``.
"""
from __future__ import annotations

import dataclasses
import os
import textwrap
from typing import Any, Iterable, Sequence

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.excerpts import bounded_events, cut_long
from neuronkit.advice.finding import Advice
from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import number, text_of
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.shared_cache import wait_text
from neuronkit.safe import terminal_safe
from neuronkit.sources.assemble import dims_named
from neuronkit.sources.torch_text import guard_text, input_name
from neuronkit.views.report_facts import (
    DEFAULT_LIMIT,
    ReportFacts,
    as_log,
    bounded_log,
    check_limit,
    header_field,
    rank_ranges,
    ranks_text,
    readable_log,
    report_facts,
    seconds_text,
    shown,
    synthetic_text,
)
from neuronkit.views.table_cells import UNKNOWN, name_legend, number_text, reason_list, short_names
from neuronkit.views.text_layout import WIDTH, Col, bounded, clean, fitted, wrap

__all__ = ["LIMIT_FLAG", "format_advice", "format_events", "format_report", "format_summary",
           "why_text"]

LIMIT_FLAG = "!!"


# -- the event table -----------------------------------------------------------------------------

def _first_reason(e: CompileEvent) -> str:
    reasons = reason_list(e.reasons)
    return clean(guard_text(bounded(reasons[0]))) if reasons else ""


def why_text(e: CompileEvent) -> str:
    """What changed against the variant's last graph, in short: the first dimension and how many
    more moved (``input_ids dim 1: 137 -> 115 (+3 dims)``: the whole text is in ``--json`` and the
    dashboard); a guard reason only where it is no shape (a shape guard compares with the graph
    torch tried last, often another variant's). A variant's first graph of a code that held
    graphs before says so."""
    changed = clean(input_name(bounded(text_of(e.changed))))
    reason = _first_reason(e)
    if e.kind == "kernels" and isinstance(e.ops, dict) and e.ops and not changed:
        ops = [clean(bounded(str(op))) for op in list(e.ops)[:4]]  # the kind says how many
        return ", ".join(ops) + (f" and {len(e.ops) - 4} more ops" if len(e.ops) > 4 else "")
    if not changed and e.kind == "first":
        before = e.metrics.get("code_graphs_before") if isinstance(e.metrics, dict) else None
        return (f"first of its variant; the code held {before} graph{'s' if before > 1 else ''}"
                if isinstance(before, int) and not isinstance(before, bool) and before > 0
                else "-")
    changed = _short_change(changed)
    reasons = reason_list(e.reasons)
    shape_guard = bool(reasons) and "size mismatch" in reasons[0]
    if not reason or reason == changed or (changed and shape_guard):
        return changed or "-"
    return f"{changed}; {reason}" if changed else reason


def _short_change(changed: str) -> str:
    """``a dim 1: 8 -> 16 (with b dim 1 and 2 more alike); c dim 3: 9 -> 17`` as
    ``a dim 1: 8 -> 16 (+4 dims)``; other text as it is."""
    phrases = changed.split("; ")
    head = phrases[0].partition(" (with ")[0]
    if " dim " not in head or " -> " not in head:
        return changed
    more = sum(map(dims_named, phrases)) - 1
    return head + (f" (+{more} dim{'s' if more > 1 else ''})" if more else "")


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
    waited = wait_text(e)  # a merged log: the other rank's build it waited for
    return f"{number_text(e.neff_compile_s, '.1f') or '0.0'}{f' ({waited})' if waited else where}"


def _offset(started_at: Any, t0: float) -> str:
    start = number(started_at)
    return UNKNOWN if start is None else f"{start - t0:.2f}"


def _events_text(events: list[CompileEvent], limit: int | None, facts: ReportFacts,
                 width: int = WIDTH) -> str:
    """The rows of the recorded events (what one holds that is no number shows as "?"), with
    ``facts`` of them as views read them: one line per event where its cells fit ``width``
    (short function names, the class once in a legend above; only the changed / reason column
    wraps, the context takes the lines its row takes and is cut with "…" past them)."""
    last = bounded_events(list(shown(events, limit)))  # as ``facts`` (a bounded log) reads them
    several_ranks = len(facts.ranks) > 1
    shorts = short_names(facts.labels.values())
    named = max(map(len, shorts.values()), default=0)  # kept whole up to 24 characters
    cols = [Col("#", right=True), Col("t+s", right=True, least=8),  # up to 99999.99 s
            Col("function", cap=40, least=max(12, min(named, 24)), weight=1.5), Col("kind"),
            Col("changed / reason", cap=80, least=20, weight=2.2), Col("compile s", right=True),
            *([Col("NEFF s", right=True)] if facts.neuron else []),
            Col("context", cap=40, least=16, fill=True),
            *([Col("rank", right=True)] if several_ranks else [])]
    rows, used = [], {}
    for e in last:
        place = (text_of(e.function), text_of(e.location))
        label = used[place] = facts.labels.get(place, place[0])
        row = [number_text(e.seq, "d"), _offset(e.started_at, facts.t0),
               shorts.get(label, label), _kind(e), why_text(e),
               number_text(e.duration_s, ".3f"), *([_neff(e)] if facts.neuron else []),
               text_of(e.context) or "-", *([number_text(e.rank, "d")] if several_ranks else [])]
        rows.append([clean(bounded(cell)) or "-" for cell in row])
    left = len(events) - len(last)
    if not rows:
        return f"{left} event(s) not shown (limit 0)"
    text = fitted(cols, rows, width)
    legend = name_legend(used, shorts)
    if legend:
        text = wrap(clean("functions: " + "; ".join(legend)), width=width) + "\n" + text
    if left:
        text = f"({left} earlier event(s) not shown: the last {len(last)} of {len(events)})\n" + text
    if any(e.kind == "kernels" for e in last):
        text += ("\ncompile s: Dynamo's seconds; on a kernels row, the build seconds of its "
                 "eager-op kernels")
    hits = facts.kinds["limit_hit"]
    if hits:
        text += (f"\n{LIMIT_FLAG} recompile limit hit ({hits}x): torch ran these calls eagerly, "
                 "uncompiled")
    return text


def format_events(log: CompileLog | Iterable[CompileEvent], limit: int | None = None, *,
                  width: int = WIDTH) -> str:
    """One row per event: seq, time offset, function (its short name: the class named once in
    a legend above), kind, what changed (and the first guard reason when it says something
    else), compile s, NEFF s on Neuron, context, rank (when the log holds several), in lines of
    at most ``width`` characters. ``limit``: only the most recent ``limit`` events are
    formatted."""
    log = as_log(log)
    check_limit(limit)
    if not log.events:
        return "no compile events"
    return _events_text(log.events, limit, report_facts(bounded_log(readable_log(log))), width)


# -- the summary ---------------------------------------------------------------------------------

def _summary_text(log: CompileLog, rows_in: list[dict[str, Any]], facts: ReportFacts) -> str:
    """The per-function table: each seconds column named by its source (Dynamo s, NEFF s on
    Neuron, kernel s where eager kernels were built), then what the columns and ranks mean."""
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    neuron, built = facts.neuron, bool(facts.kernel_s)
    kernels = any(r["kernels"] for r in rows_in)

    def seconds(dynamo: float, neff: float, count: int | str, kernel_s: float) -> list[str]:
        """The seconds cells; a row of eager-kernel builds alone has no Dynamo s ("-")."""
        return ([f"{dynamo:.3f}" if dynamo or not kernel_s else "-"]
                + ([f"{neff:.1f}"] if neuron else []) + ([str(count)] if kernels else [])
                + ([f"{kernel_s:.3f}" if kernel_s else ""] if built else []))

    rows = []
    for r in rows_in:
        kernel_s = facts.kernel_by_label.get(r["function"], 0.0)
        rows.append([clean(r["function"]), str(r["graphs"]), str(r["distinct_shapes"]),
                     str(r["limit_hits"]), str(r["failed"]),
                     *seconds(r["compile_s"] - kernel_s, r["neff_s"], r["kernels"] or "",
                              kernel_s),
                     f"{r['mean_s']:.3f}", share(r["share_of_wall"])])
    rows.append(["total", str(sum(r["graphs"] for r in rows_in)), "",
                 str(sum(r["limit_hits"] for r in rows_in)), str(sum(r["failed"] for r in rows_in)),
                 *seconds(facts.dynamo_s, facts.neff_s,
                          sum(r["kernels"] for r in rows_in) or "", facts.kernel_s),
                 "", share(facts.share)])
    headers = ["function", "graphs", "shapes", "limit hits", "failed", "Dynamo s",
               *(["NEFF s"] if neuron else []), *(["kernels"] if kernels else []),
               *(["kernel s"] if built else []), "mean s", "share of wall"]
    cols = [Col(headers[0], cap=64, least=16),
            *(Col(h, right=True) for h in headers[1:])]
    text = fitted(cols, rows)
    if neuron or built:  # what each seconds column holds, a line each at most WIDTH wide
        said = ["Dynamo s: Dynamo's tracing and lowering (mean s: per compile)",
                *(["kernel s: the eager-op kernel builds"] if built else []),
                *(["NEFF s: the neuronx-cc build of each graph after it (0 for a cache hit)"]
                  if neuron else []), "the share of wall counts every seconds column"]
        line = said[0]
        for part in said[1:]:
            text, line = ((text, f"{line}; {part}") if len(line) + len(part) + 2 <= WIDTH
                          else (f"{text}\n{line}", part))
        text += f"\n{line}"
    if len(facts.ranks) > 1 and facts.busiest is not None:
        rank, busiest = facts.busiest
        text += (f"\n{len(facts.ranks)} ranks: counts and seconds add up all ranks; the share of "
                 f"wall is that of the rank that compiled longest (rank {clean(rank)}: "
                 f"{busiest:.3f} s)")
    return wrap(text)


def format_summary(log: CompileLog | Iterable[CompileEvent]) -> str:
    """Per function: graphs, distinct shapes, limit hits, Dynamo s (NEFF s, kernel s where
    built), mean s, share of wall; a first line that says so for a synthetic log.

    In a merged log (several ranks) the counts and seconds add up all ranks, and the share of
    wall time is per rank: that of the rank that compiled longest (``CompileLog.compile_share``).
    """
    log = bounded_log(readable_log(as_log(log)))
    rows = log.summary()
    facts = report_facts(log)
    text = _summary_text(log, rows, facts) if rows else "no compile events"
    return wrap(f"{synthetic_text(facts.synthetic)}\n{text}") if facts.synthetic else text


# -- the advice ----------------------------------------------------------------------------------

def format_advice(advices: Sequence[Advice]) -> str:
    """Numbered findings, each with its detail and fix indented beneath it (terminal-safe, lines
    longer than ``WIDTH`` wrapped)."""
    if not advices:
        return "no findings"
    out: list[str] = []
    for i, advice in enumerate(advices, start=1):
        pad = " " * len(f"{i}. ")
        lines = terminal_safe(_bounded(advice)).replace("\t", " ").splitlines() or [""]
        for j, line in enumerate(line.rstrip() for line in lines):
            text = (f"{i}. " if j == 0 else pad) + line
            lead = pad + line[: len(line) - len(line.lstrip())] + "  "
            out += [text] if len(text) <= WIDTH else textwrap.wrap(text, WIDTH,
                                                                   subsequent_indent=lead)
    return "\n".join(out)


def _bounded(advice: Any) -> Any:
    """A finding whose title, detail or fix is longer than any finding writes (one built from
    a hostile log by hand) as one that quotes their start and length."""
    if not isinstance(advice, Advice):
        return advice
    cut = {k: cut_long(v) for k in ("title", "detail", "fix") if (v := getattr(advice, k))
           is not cut_long(v)}
    return dataclasses.replace(advice, **cut) if cut else advice


# -- the report ----------------------------------------------------------------------------------

def _named(log: CompileLog, key: str) -> str:
    """A header field (``device``, ``backend``), else the events' values, else "unknown"."""
    return clean(cut_long(text_of(header_field(log, key)))) or "unknown"


def _header_line(log: CompileLog, facts: ReportFacts) -> str:
    """``neuronkit compile report (SYNTHETIC ...): device, backend, events, the seconds by
    source, wall, ranks``; then ``_header_notes``."""
    parts = [f"device {_named(log, 'device')}", f"backend {_named(log, 'backend')}",
             f"{len(log.events)} events", seconds_text(facts)]
    if log.wall_time_s:
        parts.append(f"wall {log.wall_time_s:.1f} s")
    if len(facts.ranks) > 1:
        parts.append(f"ranks {rank_ranges(facts.ranks)}")
    elif facts.ranks and facts.ranks[0] != 0:
        parts.append(f"rank {clean(facts.ranks[0])}")
    synthetic = f" ({synthetic_text(facts.synthetic)})" if facts.synthetic else ""
    text = wrap(f"neuronkit compile report{synthetic}: " + ", ".join(parts))
    return text + "".join(f"\n{line}" for line in _header_notes(log, facts))


def _header_notes(log: CompileLog, facts: ReportFacts) -> list[str]:
    """A merged log's seconds (summed over ranks, and the busiest rank's), its clock alignment
    and the ranks whose log was never closed."""
    notes = [wrap(ranks_text(facts))] if len(facts.ranks) > 1 else []
    offsets = log.header.get("clock_offsets")
    if isinstance(offsets, dict) and offsets:
        shown = ", ".join(f"{clean(cut_long(h))} {number_text(s, '+.3f')} s"
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
                  summary: list[dict[str, Any]] | None = None, width: int = WIDTH) -> str:
    """The header line, the most recent ``limit`` events (None: all), the per-function summary
    and the advice. ``advice`` / ``summary``: ``diagnose(log)`` / ``log.summary()`` if already
    made (else made here); ``width``: the event table's (a narrower terminal's). Its own cost:
    three passes over the events and the shown rows; a field longer than any recorder writes is
    read by its start and length (``bounded_log``), so a 20 MB reason costs what a short one does."""
    recorded = as_log(log)
    check_limit(limit)
    log = readable_log(recorded, contents=advice is None)
    cut = bounded_log(log)  # a 20 MB field read by its start
    if cut is not log:  # rows given name it whole: made again from what is shown
        log, summary = cut, None
    facts = report_facts(log)
    rows = log.summary() if summary is None else summary
    events = (_events_text(recorded.events, limit, facts, width) if log.events
              else "no compile events")
    per_function = _summary_text(log, rows, facts) if rows else "no compile events"
    return "\n\n".join([_header_line(log, facts), _section("Compile events", events),
                        _section("Per function", per_function),
                        _section("Advice", format_advice(diagnose(log) if advice is None
                                                         else advice))]) + "\n"
