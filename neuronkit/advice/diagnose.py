"""Plain-language findings about a compile log: what recompiled, why, and what to change.

    for advice in nk.diagnose(rec.log):
        print(advice)

Each finding names the numbers behind it (``Advice.numbers``) and one concrete fix. Findings are
ordered critical -> warning -> info, the compile-time share always last. The analysis reads only
the events: the input shapes of every graph, the guard-failure reasons, the kind, the rank and the
durations. Functions are told apart by name and place (``forward (modeling_qwen3.py:440)``), and
counts in a merged log are per rank. ``diagnose()`` assembles the families of findings, each in
its own module: limits, breaks (failures, graph breaks), recompiles and buckets (what varied:
``shapes.py``), ranks, neuron (NEFF builds, kernels) and timing.
"""
from __future__ import annotations

from collections import defaultdict
from typing import Iterable, Sequence

from neuronkit.advice.breaks import failure_findings, graph_break_findings
from neuronkit.advice.buckets import bucket_multiple
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.advice.limits import limit_findings
from neuronkit.advice.neuron import fallback_findings, kernel_findings, neff_findings
from neuronkit.advice.ranks import group_findings, rank_findings
from neuronkit.advice.recompiles import shape_findings
from neuronkit.advice.shapes import graphs_per_rank
from neuronkit.advice.timing import compile_share
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import as_events, function_labels
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.gc_pause import paused_gc
from neuronkit.workloads.rank_groups import RankGroup

__all__ = ["FunctionMemo", "diagnose"]


# a function's findings by its label, with what they were found from (see diagnose's memo)
FunctionMemo = dict[str, tuple[tuple[object, ...], CompileEvent, CompileEvent, list[Advice]]]


def diagnose(log: CompileLog | Iterable[CompileEvent], *, multiple_of: int | None = None,
             memo: FunctionMemo | None = None,
             rank_groups: Sequence[RankGroup] | None = None) -> list[Advice]:
    """Findings for a compile log (or a list of events), most severe first. Suggested buckets
    are multiples of ``multiple_of``: by default :func:`bucket_multiple` (64 on Neuron, 16
    elsewhere); pass 1 for the exact lengths seen.

    ``memo``: a dict kept by the caller between calls on one growing log (the dashboard's). A
    function whose events are the same as last time (count, first and last event, ranks) keeps
    its findings instead of being analysed again: a new event costs only its function's work.

    ``rank_groups``: the rank groups of a merged log's layout (``rank_groups(tp_size, fsdp_size)``):
    a finding then says what each group's ranks compiled, a warning where they differ."""
    events = as_events(log)
    if not events:
        return [Advice("no compile events", "Nothing was compiled while recording: either no "
                       "torch.compile work ran, or every shape was already compiled.",
                       "", "info", {"events": 0})]
    with paused_gc():  # many containers, no cycles: see _gc.py
        found = _diagnose(events, multiple_of, getattr(log, "wall_time_s", None),
                          {} if memo is None else memo)
    if rank_groups:
        merged = log if isinstance(log, CompileLog) else CompileLog(events)
        head = found[:-1] + group_findings(merged, rank_groups)  # the timing finding stays last
        head.sort(key=lambda a: SEVERITIES.index(a.severity))
        found = head + found[-1:]
    return found


def _function_findings(function: str, evs: list[CompileEvent], multiple: int, ranks: list[int],
                       memo: FunctionMemo) -> list[Advice]:
    """One function's limit hits, failures and shape findings; from ``memo`` when its events are
    the ones analysed last time (events are only ever appended, and the fields an update sets
    later, NEFF times, are not read here)."""
    key = (len(evs), tuple(ranks), multiple)
    kept = memo.get(function)
    if kept is not None and kept[0] == key and kept[1] is evs[0] and kept[2] is evs[-1]:
        return kept[3]
    found = (limit_findings(function, evs, ranks) + failure_findings(function, evs, ranks)
             + shape_findings(function, evs, multiple, ranks))
    memo[function] = key, evs[0], evs[-1], found
    return found


def _diagnose(events: list[CompileEvent], multiple_of: int | None,
              wall: float | None, memo: FunctionMemo) -> list[Advice]:
    labels = function_labels(events)
    by_function: dict[str, list[CompileEvent]] = defaultdict(list)
    for e in events:
        by_function[labels[e.function, e.location]].append(e)
    ranks = sorted({e.rank for e in events})
    multiple = bucket_multiple(events) if multiple_of is None else multiple_of
    found = graph_break_findings(events, labels, ranks)
    for function, evs in by_function.items():
        found += _function_findings(function, evs, multiple, ranks, memo)
    found += rank_findings(events, labels) + neff_findings(events) + kernel_findings(events)
    found += fallback_findings(events)
    graphs = {} if found else {f: graphs_per_rank(evs) for f, evs in by_function.items()}
    if not found and all(n <= 1 for n in graphs.values()):
        found.append(Advice(
            "shapes are static: one graph per function",
            "Graphs: " + ", ".join(f"{f} {n}" for f, n in graphs.items()) + ". Nothing recompiled.",
            "", "info", {"graphs": graphs}))
    found.sort(key=lambda a: SEVERITIES.index(a.severity))
    # the timing finding comes last whatever its severity: it depends on the machine's speed,
    # so the shape findings above it keep their place from run to run
    return found + [compile_share(events, wall)]
