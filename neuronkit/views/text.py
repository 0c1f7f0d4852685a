"""Text views of a compile log: the event table, a per-function summary, the advice, a report.

    print(format_report(log))             # what `neuronkit report LOG` prints
    report_data(log)                      # what `neuronkit report LOG --json` prints, as a dict

Plain text in aligned columns, at most ``WIDTH`` (120) characters a line, the same text for the
same events (times are offsets from the first event), so notebooks can compare it. Every value
that came from the log (names, reasons, context, header fields) is passed through
``terminal_safe``: no control character or escape sequence reaches the terminal.
"""
from __future__ import annotations

import os
import textwrap
from collections import Counter, defaultdict
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Sequence

from neuronkit.sources.torch_text import input_name, short_reason
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.advice.diagnose import diagnose
from neuronkit.events.event import GRAPH_KINDS, KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.events.facts import as_events, function_labels, short_label
from neuronkit.views.safe import terminal_safe
from neuronkit.log.open import open_log

__all__ = ["DEFAULT_LIMIT", "LIMIT_FLAG", "REPORT_FORMAT", "REPORT_VERSION", "WIDTH",
           "format_advice", "format_events", "format_report", "format_summary", "report_data",
           "table"]

LIMIT_FLAG = "!!"
WIDTH = 120  # the widest line a text view prints
DEFAULT_LIMIT = 50  # events a report shows: the most recent ones
REPORT_FORMAT = "neuronkit-report"  # report_data()["format"]
REPORT_VERSION = 1  # report_data()["version"]: raised when a key changes meaning or goes away

Cut = Callable[[str, int], str]


def _as_log(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str]) -> CompileLog:
    if isinstance(log, CompileLog):
        return log
    if isinstance(log, (str, os.PathLike)):
        return open_log(log)
    return CompileLog(as_events(log))


def _clean(value: Any) -> str:
    """A log value as one terminal-safe line: no escapes or controls, whitespace collapsed."""
    return " ".join(terminal_safe(value).split())


def _cut(text: Any, width: int) -> str:
    text = _clean(text)
    return text if len(text) <= width else text[: width - 1] + "…"


def _fit_label(label: str, width: int) -> str:
    """A function label in ``width`` characters: ``short_label``, else the name shortened and
    the end of its place (``forward (…llama.py:412)``), so same-named functions stay apart."""
    text = short_label(label, width)
    if len(text) <= width:
        return text
    name, sep, where = text.partition(" (")
    name = short_label(name, max(width // 2, 8))
    room = width - len(name) - 3  # " (" and "…"
    return f"{name} (…{where[-room:]}" if sep and room >= 4 else _cut(text, width)


def _check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None (all events) or an int >= 0, got {limit!r}")


def _shown(events: Sequence[CompileEvent], limit: int | None) -> Sequence[CompileEvent]:
    """The most recent ``limit`` events (None: all); touches only those."""
    if limit is None or limit >= len(events):
        return events
    return events[len(events) - limit:] if limit else []


# -- tables --------------------------------------------------------------------------------------

def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    """Rows under a header and a rule, columns padded to their widest cell."""
    right = set(right)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


@dataclass(frozen=True)
class _Col:
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
    cut: Cut = _cut


def _fitted(cols: Sequence[_Col], rows: Sequence[Sequence[str]], width: int = WIDTH) -> str:
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


def _wrap(text: str, indent: str = "  ") -> str:
    """Lines longer than ``WIDTH`` wrapped, continued under ``indent``."""
    out: list[str] = []
    for line in text.splitlines():
        if len(line) <= WIDTH:
            out.append(line)
            continue
        lead = line[: len(line) - len(line.lstrip())]
        out += textwrap.wrap(line, WIDTH, subsequent_indent=lead + indent)
    return "\n".join(out)


# -- what the views need of the whole log, in one pass --------------------------------------------

@dataclass
class _Facts:
    t0: float
    labels: dict[tuple[str, str], str]
    ranks: list[Any]  # ints in a well-formed log
    neuron: bool
    kinds: Counter[str]
    compile_s: float
    neff_s: float
    share: float | None  # compile + NEFF seconds of the busiest rank / wall time


def _facts(log: CompileLog) -> _Facts:
    """One pass over the events: first start, labels, ranks, kinds, seconds (``CompileLog``'s
    ``total_compile_s``, ``total_neff_s`` and ``compile_share`` in one go)."""
    t0 = float("inf")
    pairs: dict[tuple[str, str], None] = {}
    per_rank: dict[Any, float] = defaultdict(float)
    kinds: dict[str, int] = defaultdict(int)
    neuron = False
    compile_s = neff_s = 0.0
    for e in log.events:  # the one pass: keep it lean (100k events)
        if e.started_at < t0:
            t0 = e.started_at
        pairs[e.function, e.location] = None
        kinds[e.kind] += 1
        seconds, neff = float(e.duration_s or 0.0), e.neff_s
        compile_s += seconds
        neff_s += neff
        if e.neff_compile_s is not None or e.neff_cache is not None:
            neuron = True
        per_rank[e.rank] += seconds + neff
    labels = function_labels([CompileEvent(function=f, location=loc) for f, loc in pairs])
    share = max(per_rank.values(), default=0.0) / log.wall_time_s if log.wall_time_s else None
    return _Facts(0.0 if t0 == float("inf") else t0, labels, sorted(per_rank, key=_rank_key),
                  neuron, Counter(kinds), compile_s, neff_s, share)


def _rank_key(rank: Any) -> tuple[int, int, str]:
    return (0, rank, "") if isinstance(rank, int) else (1, 0, str(rank))


def _ranges(ranks: Sequence[Any]) -> str:
    """``0-7,9``: runs of three or more ranks as a range."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while (j + 1 < len(ranks) and isinstance(ranks[j], int)
               and isinstance(ranks[j + 1], int) and ranks[j + 1] == ranks[j] + 1):
            j += 1
        parts += ([f"{ranks[i]}-{ranks[j]}"] if j - i >= 2
                  else [_clean(r) for r in ranks[i:j + 1]])
        i = j + 1
    return ",".join(parts)


# -- the event table -----------------------------------------------------------------------------

def _first_reason(e: CompileEvent) -> str:
    reasons = [e.reasons] if isinstance(e.reasons, str) else list(e.reasons or [])
    return _clean(short_reason(str(reasons[0]), 200)) if reasons else ""


def _why(e: CompileEvent) -> str:
    """``changed`` and the first guard-failure reason, once when they say the same thing."""
    changed = _clean(input_name(str(e.changed or "")))
    reason = _first_reason(e)
    if not reason or reason == changed:
        return changed or "-"
    return f"{changed}; {reason}" if changed else reason


def _kind(e: CompileEvent) -> str:
    if e.kind == "limit_hit":
        return f"limit_hit {LIMIT_FLAG}"
    if e.kind == "kernels":
        return f"kernels x{e.kernels}" + (" (forecast)" if e.forecast else "")
    return str(e.kind)


def _neff(e: CompileEvent) -> str:
    """The NEFF column: seconds and where it came from; "?" while unresolved."""
    if e.kind not in GRAPH_KINDS:
        return "-"
    if e.neff_compile_s is None and e.neff_cache is None:
        return "?"
    where = {"compiled": "", "disk_hit": " disk", "memory_hit": " memory"}.get(
        str(e.neff_cache or ""), " not built")
    return f"{float(e.neff_compile_s or 0.0):.1f}{where}"


def _events_text(log: CompileLog, limit: int | None, facts: _Facts) -> str:
    events = log.events
    shown = _shown(events, limit)
    several_ranks = len(facts.ranks) > 1
    cols = [_Col("#", right=True), _Col("t+s", right=True, least=8),  # up to 99999.99 s
            _Col("function", cap=24, least=12, weight=1.1, cut=_fit_label), _Col("kind"),
            _Col("changed / reason", cap=80, least=14, weight=2.2), _Col("compile s", right=True),
            *([_Col("NEFF s", right=True)] if facts.neuron else []),
            _Col("context", cap=32, least=7, weight=0.7),
            *([_Col("rank", right=True)] if several_ranks else [])]
    rows = []
    for e in shown:
        row = [str(e.seq), f"{e.started_at - facts.t0:.2f}", facts.labels[e.function, e.location],
               _kind(e), _why(e), f"{e.duration_s:.3f}",
               *([_neff(e)] if facts.neuron else []), str(e.context or "") or "-",
               *([str(e.rank)] if several_ranks else [])]
        rows.append([_clean(cell) or "-" for cell in row])
    left = len(events) - len(shown)
    if not rows:
        return f"{left} event(s) not shown (limit 0)"
    text = _fitted(cols, rows)
    if left:
        text = f"… {left} earlier event(s) not shown: the last {len(shown)} of {len(events)}\n" + text
    hits = facts.kinds["limit_hit"]
    if hits:
        text += (f"\n{LIMIT_FLAG} recompile limit hit ({hits}x): torch ran these calls eagerly, "
                 "uncompiled")
    return text


def format_events(log: CompileLog | Iterable[CompileEvent], limit: int | None = None) -> str:
    """One row per event: seq, time offset, function, kind, what changed (and the first guard
    reason when it says something else), compile s, NEFF s on Neuron, context, rank (when the
    log holds several). ``limit``: only the most recent ``limit`` events are formatted."""
    log = _as_log(log)
    _check_limit(limit)
    if not log.events:
        return "no compile events"
    return _events_text(log, limit, _facts(log))


# -- the summary ---------------------------------------------------------------------------------

def _summary_text(log: CompileLog, rows_in: list[dict[str, Any]], facts: _Facts) -> str:
    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    neuron = facts.neuron
    kernels = any(r["kernels"] for r in rows_in)

    def extra(neff: float, count: int | str) -> list[str]:
        return ([f"{neff:.1f}"] if neuron else []) + ([str(count)] if kernels else [])

    rows = [[_clean(r["function"]), str(r["graphs"]), str(r["distinct_shapes"]),
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
    cols = [_Col(headers[0], cap=32, least=16, cut=_fit_label),
            *(_Col(h, right=True) for h in headers[1:])]
    text = _fitted(cols, rows)
    if neuron:
        text += ("\ncompile s: Dynamo (tracing, lowering); NEFF s: the neuronx-cc build after it "
                 "(0 for a cache hit); the share of wall counts both")
    if len(facts.ranks) > 1:
        text += (f"\n{len(facts.ranks)} ranks: counts and seconds add up all ranks; the share of "
                 "wall is that of the rank that compiled longest")
    return _wrap(text)


def format_summary(log: CompileLog | Iterable[CompileEvent]) -> str:
    """Per function: graphs, distinct shapes, limit hits, total/mean compile s, share of wall.

    In a merged log (several ranks) the counts and seconds add up all ranks, and the share of
    wall time is per rank: that of the rank that compiled longest (``CompileLog.compile_share``).
    """
    log = _as_log(log)
    rows = log.summary()
    return _summary_text(log, rows, _facts(log)) if rows else "no compile events"


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
    value = log.header.get(key) or ",".join(sorted({str(getattr(e, key)) for e in log.events}
                                                   - {""}))
    return _cut(value, 40) or "unknown"


def _header_line(log: CompileLog, facts: _Facts) -> str:
    parts = [f"device {_named(log, 'device')}", f"backend {_named(log, 'backend')}",
             f"{len(log.events)} events", f"{facts.compile_s:.2f} s compiling"
             + (f" + {facts.neff_s:.1f} s NEFF builds" if facts.neuron else "")]
    if log.wall_time_s:
        parts.append(f"wall {log.wall_time_s:.1f} s")
    if len(facts.ranks) > 1:
        parts.append(f"ranks {_ranges(facts.ranks)}")
    elif facts.ranks and facts.ranks[0] != 0:
        parts.append(f"rank {_clean(facts.ranks[0])}")
    return _wrap("neuronkit compile report: " + ", ".join(parts))


def _section(title: str, body: str) -> str:
    return f"{title}\n{'=' * len(title)}\n{body}"


def format_report(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str],
                  limit: int | None = DEFAULT_LIMIT, *,
                  advice: Sequence[Advice] | None = None,
                  summary: list[dict[str, Any]] | None = None) -> str:
    """The header line, the most recent ``limit`` events (None: all), the per-function summary
    and the advice. ``advice`` / ``summary``: ``diagnose(log)`` / ``log.summary()`` if already
    made (else made here). Its own cost: one pass over the events and the shown rows."""
    log = _as_log(log)
    _check_limit(limit)
    facts = _facts(log)
    rows = log.summary() if summary is None else summary
    events = _events_text(log, limit, facts) if log.events else "no compile events"
    per_function = _summary_text(log, rows, facts) if rows else "no compile events"
    return "\n\n".join([_header_line(log, facts), _section("Compile events", events),
                        _section("Per function", per_function),
                        _section("Advice", format_advice(diagnose(log) if advice is None
                                                         else advice))]) + "\n"


def report_data(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str],
                limit: int | None = DEFAULT_LIMIT, *,
                advice: Sequence[Advice] | None = None,
                summary: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report as JSON-ready data (``neuronkit report --json``): raw values, not cut.

    Keys: format, version, logs, device, backend, ranks, wall_time_s, compile_s, neff_s,
    share_of_wall, counts {events, shown, not_shown, graphs, kinds, advice}, worst_severity,
    summary (``CompileLog.summary`` rows), advice [{severity, title, detail, fix, numbers}],
    events (the shown ones: ``CompileEvent`` fields plus ``t_s`` and ``label``).
    """
    log = _as_log(log)
    _check_limit(limit)
    facts = _facts(log)
    findings = list(diagnose(log) if advice is None else advice)
    shown = _shown(log.events, limit)
    severities: Counter[str] = Counter(a.severity for a in findings)
    kinds = {k: facts.kinds[k] for k in KINDS if facts.kinds[k]}
    kinds.update((str(k), n) for k, n in facts.kinds.items() if k not in kinds)

    def header(key: str) -> Any:
        return log.header.get(key) or ",".join(sorted({str(getattr(e, key)) for e in log.events}
                                                      - {""}))

    return {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "logs": [str(log.path)] if log.path else [],
        "device": header("device"), "backend": header("backend"), "ranks": facts.ranks,
        "wall_time_s": log.wall_time_s, "compile_s": facts.compile_s, "neff_s": facts.neff_s,
        "share_of_wall": facts.share,
        "counts": {"events": len(log.events), "shown": len(shown),
                   "not_shown": len(log.events) - len(shown),
                   "graphs": sum(facts.kinds[k] for k in GRAPH_KINDS), "kinds": kinds,
                   "advice": {s: severities[s] for s in SEVERITIES}},
        "worst_severity": next((s for s in SEVERITIES if severities[s]), None),
        "summary": log.summary() if summary is None else summary,
        "advice": [{"severity": a.severity, "title": a.title, "detail": a.detail, "fix": a.fix,
                    "numbers": a.numbers} for a in findings],
        "events": [{"t_s": e.started_at - facts.t0, "label": facts.labels[e.function, e.location],
                    **e.to_dict()} for e in shown],
    }
