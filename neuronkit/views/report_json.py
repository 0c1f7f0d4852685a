"""The compile report as JSON-ready data (``neuronkit report --json``): raw values, not cut,
under keys that stay (``REPORT_VERSION`` is raised when one changes meaning or goes away)."""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Iterable, Sequence

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.events.event import GRAPH_KINDS, KINDS, CompileEvent
from neuronkit.events.facts import NUMBER_FIELDS, number, readable
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.report_facts import (
    DEFAULT_LIMIT,
    ReportFacts,
    as_log,
    check_limit,
    header_field,
    readable_log,
    report_facts,
    shown,
)

__all__ = ["REPORT_FORMAT", "REPORT_VERSION", "report_data"]

REPORT_FORMAT = "neuronkit-report"  # report_data()["format"]
REPORT_VERSION = 1  # report_data()["version"]: raised when a key changes meaning or goes away


def report_data(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str],
                limit: int | None = DEFAULT_LIMIT, *,
                advice: Sequence[Advice] | None = None,
                summary: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The report as JSON-ready data (``neuronkit report --json``): raw values, not cut.

    Keys: format, version, logs, synthetic (true for a log whose header says it is no
    measurement), synthetic_reason (why, or null), device, backend, ranks, wall_time_s,
    compile_s (every event's ``duration_s``: dynamo_s + kernel_s), dynamo_s (Dynamo's tracing
    and lowering), kernel_s (eager-kernel builds), neff_s (NEFF builds), busiest_rank {rank,
    seconds} (the rank that compiled longest, all sources: what share_of_wall is of; the
    others sum all ranks), share_of_wall, counts {events, shown, not_shown, graphs, kinds,
    advice}, worst_severity, summary (``CompileLog.summary`` rows), advice [{severity, title,
    detail, fix, numbers}], events (the shown ones: ``CompileEvent`` fields plus ``t_s`` and
    ``label``).
    """
    recorded = as_log(log)
    check_limit(limit)
    log = readable_log(recorded, contents=advice is None)
    facts = report_facts(log)
    findings = list(diagnose(log) if advice is None else advice)
    events = shown(recorded.events, limit)
    severities: Counter[str] = Counter(a.severity for a in findings)
    kinds = {k: facts.kinds[k] for k in KINDS if facts.kinds[k]}
    kinds.update((str(k), n) for k, n in facts.kinds.items() if k not in kinds)
    return {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "logs": [str(recorded.path)] if recorded.path else [],
        "synthetic": bool(facts.synthetic), "synthetic_reason": facts.synthetic or None,
        "device": header_field(log, "device"), "backend": header_field(log, "backend"),
        "ranks": facts.ranks, "wall_time_s": log.wall_time_s, "compile_s": facts.compile_s,
        "dynamo_s": facts.dynamo_s, "kernel_s": facts.kernel_s, "neff_s": facts.neff_s,
        "busiest_rank": None if facts.busiest is None else {"rank": facts.busiest[0],
                                                            "seconds": facts.busiest[1]},
        "share_of_wall": facts.share,
        "counts": {"events": len(log.events), "shown": len(events),
                   "not_shown": len(log.events) - len(events),
                   "graphs": sum(facts.kinds[k] for k in GRAPH_KINDS), "kinds": kinds,
                   "advice": {s: severities[s] for s in SEVERITIES}},
        "worst_severity": next((s for s in SEVERITIES if severities[s]), None),
        "summary": log.summary() if summary is None else summary,
        "advice": [{"severity": a.severity, "title": a.title, "detail": a.detail, "fix": a.fix,
                    "numbers": a.numbers} for a in findings],
        "events": [_event(e, facts) for e in events],
    }


def _event(recorded: CompileEvent, facts: ReportFacts) -> dict[str, Any]:
    """A shown event's fields as views read them, a number it does not hold as None (null)."""
    e = readable([recorded], contents=True)[0]
    unknown = {name: None for name in NUMBER_FIELDS if number(getattr(recorded, name)) is None}
    start = number(recorded.started_at)
    return {"t_s": None if start is None else start - facts.t0,
            "label": facts.labels.get((e.function, e.location), e.function),
            **e.to_dict(), **unknown}
