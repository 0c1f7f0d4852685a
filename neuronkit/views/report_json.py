"""The compile report as JSON-ready data (``neuronkit report --json``): raw values, not cut,
under keys that stay (``REPORT_VERSION`` is raised when one changes meaning or goes away)."""
from __future__ import annotations

import os
from collections import Counter
from typing import Any, Iterable, Sequence

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.events.event import GRAPH_KINDS, KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.report_facts import DEFAULT_LIMIT, as_log, check_limit, header_field, report_facts, shown

__all__ = ["REPORT_FORMAT", "REPORT_VERSION", "report_data"]

REPORT_FORMAT = "neuronkit-report"  # report_data()["format"]
REPORT_VERSION = 1  # report_data()["version"]: raised when a key changes meaning or goes away


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
    log = as_log(log)
    check_limit(limit)
    facts = report_facts(log)
    findings = list(diagnose(log) if advice is None else advice)
    events = shown(log.events, limit)
    severities: Counter[str] = Counter(a.severity for a in findings)
    kinds = {k: facts.kinds[k] for k in KINDS if facts.kinds[k]}
    kinds.update((str(k), n) for k, n in facts.kinds.items() if k not in kinds)
    return {
        "format": REPORT_FORMAT, "version": REPORT_VERSION,
        "logs": [str(log.path)] if log.path else [],
        "device": header_field(log, "device"), "backend": header_field(log, "backend"),
        "ranks": facts.ranks, "wall_time_s": log.wall_time_s, "compile_s": facts.compile_s,
        "neff_s": facts.neff_s, "share_of_wall": facts.share,
        "counts": {"events": len(log.events), "shown": len(events),
                   "not_shown": len(log.events) - len(events),
                   "graphs": sum(facts.kinds[k] for k in GRAPH_KINDS), "kinds": kinds,
                   "advice": {s: severities[s] for s in SEVERITIES}},
        "worst_severity": next((s for s in SEVERITIES if severities[s]), None),
        "summary": log.summary() if summary is None else summary,
        "advice": [{"severity": a.severity, "title": a.title, "detail": a.detail, "fix": a.fix,
                    "numbers": a.numbers} for a in findings],
        "events": [{"t_s": e.started_at - facts.t0, "label": facts.labels[e.function, e.location],
                    **e.to_dict()} for e in events],
    }
