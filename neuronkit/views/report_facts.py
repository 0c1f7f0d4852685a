"""What the reports need of a whole log, read in one pass (first start, labels, ranks, kinds,
seconds by source, the busiest rank), which events a report shows under its ``limit``, and how
the reports name the seconds (``seconds_text``) and a synthetic log (``synthetic_text``)."""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from typing import Any, Iterable, Sequence

from neuronkit.advice.excerpts import bounded_events
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import as_events, function_labels, readable, synthetic_reason
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log
from neuronkit.log.shared_cache import wait_seconds
from neuronkit.views.text_layout import clean

__all__ = ["DEFAULT_LIMIT", "ReportFacts", "as_log", "bounded_log", "check_limit", "header_field",
           "rank_ranges", "ranks_text", "readable_log", "report_facts", "seconds_text", "shown",
           "synthetic_text"]

DEFAULT_LIMIT = 50  # events a report shows: the most recent ones


def as_log(log: CompileLog | Iterable[CompileEvent] | str | os.PathLike[str]) -> CompileLog:
    """A log as given, opened from a path, or made of events."""
    if isinstance(log, CompileLog):
        return log
    if isinstance(log, (str, os.PathLike)):
        return open_log(log)
    return CompileLog(as_events(log))


def readable_log(log: CompileLog, contents: bool = False) -> CompileLog:
    """``log`` as views read it: itself when every event holds what a recorder writes, else an
    in-memory log (same header and wall time, no file) of its
    :func:`~neuronkit.events.facts.readable` events; ``contents`` as ``diagnose`` needs them."""
    return _with_events(log, readable(log.events, contents))


def bounded_log(log: CompileLog) -> CompileLog:
    """``log`` itself when no text field is longer than any recorder writes, else an in-memory
    log whose such fields are read by their start and length
    (:func:`~neuronkit.advice.excerpts.bounded_events`): what the text views show of a hostile
    log, at a cost that does not grow with a field's length."""
    return _with_events(log, bounded_events(log.events))


def _with_events(log: CompileLog, events: list[CompileEvent]) -> CompileLog:
    if events is log.events:
        return log
    view = CompileLog(events, header=log.header)
    view.wall_time_s = log.wall_time_s
    return view


def check_limit(limit: int | None) -> None:
    if limit is not None and (isinstance(limit, bool) or not isinstance(limit, int) or limit < 0):
        raise ValueError(f"limit must be None (all events) or an int >= 0, got {limit!r}")


def shown(events: Sequence[CompileEvent], limit: int | None) -> Sequence[CompileEvent]:
    """The most recent ``limit`` events (None: all); touches only those."""
    if limit is None or limit >= len(events):
        return events
    return events[len(events) - limit:] if limit else []


def header_field(log: CompileLog, key: str) -> Any:
    """A header field (``device``, ``backend``), else the events' distinct values joined."""
    return log.header.get(key) or ",".join(sorted({str(getattr(e, key)) for e in log.events}
                                                  - {""}))


@dataclass
class ReportFacts:
    t0: float
    labels: dict[tuple[str, str], str]
    ranks: list[Any]  # ints in a well-formed log
    neuron: bool
    kinds: Counter[str]
    compile_s: float  # every event's duration_s: Dynamo's, and the eager-kernel builds
    neff_s: float
    share: float | None  # compile + NEFF seconds of the busiest rank / wall time
    dynamo_s: float = 0.0  # Dynamo's tracing and lowering: compile_s less the kernel builds
    kernel_s: float = 0.0  # eager-kernel builds (the ``kernels`` events' duration_s)
    kernel_by_label: dict[str, float] = field(default_factory=dict)  # per function label
    busiest: tuple[Any, float] | None = None  # the rank that compiled longest, its seconds
    synthetic: str = ""  # why the log is no measurement (``synthetic_reason``), else ""


def report_facts(log: CompileLog) -> ReportFacts:
    """One pass over the events: first start, labels, ranks, kinds, seconds (``CompileLog``'s
    ``total_compile_s``, ``total_neff_s`` and ``compile_share`` in one go)."""
    t0 = float("inf")
    pairs: dict[tuple[str, str], None] = {}
    per_rank: dict[Any, float] = defaultdict(float)
    kinds: dict[str, int] = defaultdict(int)
    kernels: dict[tuple[str, str], float] = defaultdict(float)
    neuron = False
    compile_s = neff_s = dynamo_s = 0.0
    for e in log.events:  # the one pass: keep it lean (100k events)
        if e.started_at < t0:
            t0 = e.started_at
        pairs[e.function, e.location] = None
        kinds[e.kind] += 1
        seconds, neff = float(e.duration_s or 0.0), e.neff_s
        compile_s += seconds
        if e.kind == "kernels":
            kernels[e.function, e.location] += seconds
        else:
            dynamo_s += seconds
        neff_s += neff
        if e.neff_compile_s is not None or e.neff_cache is not None:
            neuron = True
        per_rank[e.rank] += seconds + neff + (wait_seconds(e) if e.neff_cache == "disk_hit" else 0.0)
    labels = function_labels([CompileEvent(function=f, location=loc) for f, loc in pairs])
    ranks = sorted(per_rank, key=_rank_key)
    busiest = max(((r, per_rank[r]) for r in ranks), key=lambda rs: rs[1], default=None)
    share = busiest[1] / log.wall_time_s if log.wall_time_s and busiest else None
    by_label: dict[str, float] = defaultdict(float)
    for key, seconds in kernels.items():
        by_label[labels[key]] += seconds
    return ReportFacts(0.0 if t0 == float("inf") else t0, labels, ranks, neuron, Counter(kinds),
                       compile_s, neff_s, share, dynamo_s, sum(kernels.values()), dict(by_label),
                       busiest, synthetic_reason(log.header))


def seconds_text(facts: ReportFacts, digits: int = 2) -> str:
    """The compile seconds, each named by its source: ``3.17 s Dynamo compile + 214.0 s NEFF
    builds + 16.40 s eager-kernel builds`` (NEFF on Neuron, kernels where any were built)."""
    text = f"{facts.dynamo_s:.{digits}f} s Dynamo compile"
    if facts.neuron:
        text += f" + {facts.neff_s:.1f} s NEFF builds"
    if facts.kernel_s:
        text += f" + {facts.kernel_s:.{digits}f} s eager-kernel builds"
    return text


def ranks_text(facts: ReportFacts, digits: int = 2) -> str:
    """For several ranks, which seconds are whose: ``seconds summed over ranks 0,1; busiest
    rank 1: 25.70 s (...)``; "" for one rank."""
    if len(facts.ranks) < 2 or facts.busiest is None:
        return ""
    rank, seconds = facts.busiest
    return (f"seconds summed over ranks {rank_ranges(facts.ranks)}; busiest rank {clean(rank)}: "
            f"{seconds:.{digits}f} s (the share of wall and compile-time finding count it)")


def synthetic_text(reason: str) -> str:
    """How a report names a log that is no measurement (``reason``: ``synthetic_reason``)."""
    return f"SYNTHETIC, not measured: {clean(reason)}" if reason else ""


def _rank_key(rank: Any) -> tuple[int, int, str]:
    return (0, rank, "") if isinstance(rank, int) else (1, 0, str(rank))


def rank_ranges(ranks: Sequence[Any]) -> str:
    """``0-7,9``: runs of three or more ranks as a range."""
    parts: list[str] = []
    i = 0
    while i < len(ranks):
        j = i
        while (j + 1 < len(ranks) and isinstance(ranks[j], int)
               and isinstance(ranks[j + 1], int) and ranks[j + 1] == ranks[j] + 1):
            j += 1
        parts += ([f"{ranks[i]}-{ranks[j]}"] if j - i >= 2
                  else [clean(r) for r in ranks[i:j + 1]])
        i = j + 1
    return ",".join(parts)
