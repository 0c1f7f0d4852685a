"""Text views of a compile log: the event table, a per-function summary, the advice, a report.

    print(report.format_report(log))      # what `neuronkit report LOG` prints

Plain text in aligned columns, the same text for the same events (times are offsets from the
first event), so notebooks can compare it.
"""
from __future__ import annotations

import os
from typing import Any, Iterable, Sequence

from .._torch_text import input_name, short_reason
from ..advice import Advice, diagnose
from ..events import CompileEvent, CompileLog, as_events, function_labels, short_label

__all__ = ["format_advice", "format_events", "format_report", "format_summary", "table"]

LIMIT_FLAG = "!!"


def _as_log(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str]) -> CompileLog:
    if isinstance(log, CompileLog):
        return log
    if isinstance(log, (str, os.PathLike)):
        return CompileLog.load(log)
    return CompileLog(as_events(log))


def _cut(text: Any, width: int) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= width else text[: width - 1] + "…"


def table(headers: Sequence[str], rows: Sequence[Sequence[str]], right: Iterable[int] = ()) -> str:
    """Rows under a header and a rule, columns padded to their widest cell."""
    right = set(right)
    widths = [max([len(h)] + [len(r[i]) for r in rows]) for i, h in enumerate(headers)]

    def line(cells: Sequence[str]) -> str:
        return "  ".join(c.rjust(w) if i in right else c.ljust(w)
                         for i, (c, w) in enumerate(zip(cells, widths, strict=False))).rstrip()

    return "\n".join([line(headers), line(["-" * w for w in widths]), *map(line, rows)])


def format_events(log: CompileLog | Iterable[CompileEvent], limit: int | None = None) -> str:
    """One row per event: seq, time offset, function, kind, changed, first reason, seconds, ..."""
    log = _as_log(log)
    events = list(log.events)
    if not events:
        return "no compile events"
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None or an int >= 0, got {limit!r}")
    t0 = min(e.started_at for e in events)
    labels = function_labels(events)
    shown = events if limit is None else events[:limit]
    neuron = _has_neuron_fields(events)
    rows = []
    for e in shown:
        kind = f"{e.kind} {LIMIT_FLAG}" if e.kind == "limit_hit" else e.kind
        if e.kind == "kernels":
            kind = f"kernels x{e.kernels}" + (" (forecast)" if e.forecast else "")
        function = short_label(labels[e.function, e.location], 24)
        row = [str(e.seq), f"{e.started_at - t0:.2f}", function, kind,
               _cut(input_name(e.changed), 44) or "-",
               short_reason(e.reasons[0], 36) if e.reasons else "-", f"{e.duration_s:.3f}"]
        if neuron:
            row += [_neff(e)]
        rows.append(row + [_cut(e.context, 40) or "-", str(e.rank)])
    headers = ["#", "t+s", "function", "kind", "changed", "first reason", "compile s"]
    headers += ["NEFF s", "context", "rank"] if neuron else ["context", "rank"]
    text = table(headers, rows, right=(0, 1, 6, 7, 9) if neuron else (0, 1, 6, 8))
    if len(shown) < len(events):
        text += f"\n… {len(events) - len(shown)} more event(s) not shown"
    hits = sum(e.kind == "limit_hit" for e in events)
    if hits:
        text += (f"\n{LIMIT_FLAG} recompile limit hit ({hits}x): torch ran these calls eagerly, "
                 "uncompiled")
    return text


def _has_neuron_fields(events: Sequence[CompileEvent]) -> bool:
    return any(e.neff_compile_s is not None or e.neff_cache is not None for e in events)


def _neff(e: CompileEvent) -> str:
    """The NEFF column: seconds and where it came from; "?" while unresolved."""
    if e.kind not in ("first", "recompile"):
        return "-"
    if e.neff_compile_s is None and e.neff_cache is None:
        return "?"
    where = {"compiled": "", "disk_hit": " disk", "memory_hit": " memory"}.get(e.neff_cache or "",
                                                                             " not built")
    return f"{float(e.neff_compile_s or 0.0):.1f}{where}"


def format_summary(log: CompileLog | Iterable[CompileEvent]) -> str:
    """Per function: graphs, distinct shapes, limit hits, total/mean compile s, share of wall.

    In a merged log (several ranks) the counts and seconds add up all ranks, and the share of
    wall time is per rank: that of the rank that compiled longest (``CompileLog.compile_share``).
    """
    log = _as_log(log)
    rows_in = log.summary()
    if not rows_in:
        return "no compile events"

    def share(value: float | None) -> str:
        return "-" if value is None else f"{value:.1%}"

    neuron = _has_neuron_fields(log.events)
    kernels = any(r["kernels"] for r in rows_in)

    def extra(neff: float, count: int | str) -> list[str]:
        return ([f"{neff:.1f}"] if neuron else []) + ([str(count)] if kernels else [])

    rows = [[short_label(r["function"], 32), str(r["graphs"]), str(r["distinct_shapes"]),
             str(r["limit_hits"]), str(r["failed"]), f"{r['compile_s']:.3f}",
             *extra(r["neff_s"], r["kernels"] or ""), f"{r['mean_s']:.3f}",
             share(r["share_of_wall"])] for r in rows_in]
    rows.append(["total", str(sum(r["graphs"] for r in rows_in)), "",
                 str(sum(r["limit_hits"] for r in rows_in)), str(sum(r["failed"] for r in rows_in)),
                 f"{log.total_compile_s:.3f}",
                 *extra(log.total_neff_s, sum(r["kernels"] for r in rows_in) or ""), "",
                 share(log.compile_share())])
    headers = ["function", "graphs", "shapes", "limit hits", "failed", "compile s",
               *(["NEFF s"] if neuron else []), *(["kernels"] if kernels else []), "mean s",
               "share of wall"]
    text = table(headers, rows, right=range(1, len(headers)))
    if neuron:
        text += ("\ncompile s: Dynamo (tracing, lowering); NEFF s: the neuronx-cc build after it "
                 "(0 for a cache hit); the share of wall counts both")
    ranks = sorted({e.rank for e in log.events})
    if len(ranks) > 1:
        text += (f"\n{len(ranks)} ranks: counts and seconds add up all ranks; the share of wall is "
                 "that of the rank that compiled longest")
    return text


def format_advice(advices: Sequence[Advice]) -> str:
    """Numbered findings, each with its detail and fix indented beneath it."""
    if not advices:
        return "no findings"
    blocks = []
    for i, advice in enumerate(advices, start=1):
        prefix = f"{i}. "
        first, *rest = str(advice).splitlines()
        blocks.append("\n".join([prefix + first, *(" " * len(prefix) + line for line in rest)]))
    return "\n".join(blocks)


def _header_line(log: CompileLog) -> str:
    events = log.events

    def named(key: str) -> str:
        value = log.header.get(key) or ",".join(sorted({getattr(e, key) for e in events} - {""}))
        return value or "unknown"

    parts = [f"device {named('device')}", f"backend {named('backend')}", f"{len(events)} events",
             f"{log.total_compile_s:.2f} s compiling"
             + (f" + {log.total_neff_s:.1f} s NEFF builds" if _has_neuron_fields(events) else "")]
    if log.wall_time_s:
        parts.append(f"wall {log.wall_time_s:.1f} s")
    ranks = sorted({e.rank for e in events})
    if len(ranks) > 1:
        parts.append(f"ranks {','.join(map(str, ranks))}")
    return "neuronkit compile report: " + ", ".join(parts)


def _section(title: str, body: str) -> str:
    return f"{title}\n{'=' * len(title)}\n{body}"


def format_report(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str],
                  limit: int | None = None) -> str:
    """The header line, the event table, the per-function summary and the advice."""
    log = _as_log(log)
    return "\n\n".join([_header_line(log),
                        _section("Compile events", format_events(log, limit=limit)),
                        _section("Per function", format_summary(log)),
                        _section("Advice", format_advice(diagnose(log)))]) + "\n"
