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
from neuronkit.advice.buckets import BucketPrice, bucket_multiple
from neuronkit.advice.excerpts import bounded_events
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.advice.limits import limit_findings
from neuronkit.advice.neuron import fallback_findings, kernel_findings, neff_findings, sync_mode_findings
from neuronkit.advice.ranks import group_findings, rank_findings
from neuronkit.advice.recompiles import shape_findings
from neuronkit.advice.refused import refused_findings
from neuronkit.advice.shapes import DECODE, PREFILL, graphs_per_rank
from neuronkit.advice.timing import compile_share
from neuronkit.advice.uncompiled import uncompiled_findings
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import as_events, function_labels
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.gc_pause import paused_gc
from neuronkit.workloads.rank_groups import RankGroup
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S, DEFAULT_TOKEN_COST_S, checked_costs

__all__ = ["FunctionMemo", "diagnose"]


# a function's findings by its label, with what they were found from (see diagnose's memo)
FunctionMemo = dict[str, tuple[tuple[object, ...], CompileEvent, CompileEvent, list[Advice]]]


def diagnose(log: CompileLog | Iterable[CompileEvent], *, multiple_of: int | None = None,
             memo: FunctionMemo | None = None,
             rank_groups: Sequence[RankGroup] | None = None,
             compile_cost_s: float = DEFAULT_COMPILE_COST_S,
             token_cost_s: float = DEFAULT_TOKEN_COST_S) -> list[Advice]:
    """Findings for a compile log (or a list of events), most severe first. Suggested buckets
    are multiples of ``multiple_of``: by default :func:`bucket_multiple` (64 on Neuron, 16
    elsewhere); pass 1 for the exact lengths seen. They are ``nk.plan_buckets`` on the lengths
    seen with ``compile_cost_s`` a graph and ``token_cost_s`` a padded token (the planner's own
    defaults), and each finding states them.

    ``memo``: a dict kept by the caller between calls on one growing log (the dashboard's). A
    function whose events are the same as last time (count, first and last event, ranks) keeps
    its findings instead of being analysed again: a new event costs only its function's work.

    ``rank_groups``: the rank groups of a merged log's layout (``rank_groups(tp_size, fsdp_size)``):
    a finding then says what each group's ranks compiled, a warning where they differ.

    A text field longer than any recorder writes (a broken or hostile log) is read by its start
    and length (:func:`~neuronkit.advice.excerpts.bounded_events`): a finding quotes at most
    that, and costs no more than for a short field."""
    given = as_events(log)
    events = bounded_events(given)  # a 20 MB reason is read, and quoted, by its start
    if not events:
        return [Advice("no compile events", "Nothing was compiled while recording: either no "
                       "torch.compile work ran, or every shape was already compiled.",
                       "", "info", {"events": 0})]
    price = BucketPrice(*checked_costs(compile_cost_s, token_cost_s))
    with paused_gc():  # many containers, no cycles: see _gc.py
        found = _diagnose(events, multiple_of, getattr(log, "wall_time_s", None),
                          {} if memo is None else memo, price)
    if rank_groups:
        merged = (log if isinstance(log, CompileLog) and events is given
                  else CompileLog(events, header=getattr(log, "header", None)))
        head = found[:-1] + group_findings(merged, rank_groups)  # the timing finding stays last
        head.sort(key=lambda a: SEVERITIES.index(a.severity))
        found = head + found[-1:]
    return found


def _function_findings(function: str, evs: list[CompileEvent], multiple: int, ranks: list[int],
                       memo: FunctionMemo, price: BucketPrice, per_bucket: int) -> list[Advice]:
    """One function's limit hits, failures and shape findings; from ``memo`` when its events are
    the ones analysed last time (events are only ever appended, and the fields an update sets
    later, NEFF times, are not read here)."""
    key = (len(evs), tuple(ranks), multiple, price, per_bucket)
    kept = memo.get(function)
    if kept is not None and kept[0] == key and kept[1] is evs[0] and kept[2] is evs[-1]:
        return kept[3]
    found = (limit_findings(function, evs, ranks) + failure_findings(function, evs, ranks)
             + shape_findings(function, evs, multiple, ranks, price, per_bucket))
    memo[function] = key, evs[0], evs[-1], found
    return found


def _diagnose(events: list[CompileEvent], multiple_of: int | None,
              wall: float | None, memo: FunctionMemo, price: BucketPrice) -> list[Advice]:
    labels = function_labels(events)
    by_function: dict[str, list[CompileEvent]] = defaultdict(list)
    for e in events:
        by_function[labels[e.function, e.location]].append(e)
    ranks = sorted({e.rank for e in events})
    multiple = bucket_multiple(events) if multiple_of is None else multiple_of
    found = graph_break_findings(events, labels, ranks)
    for function, evs in by_function.items():
        # the prompt length of a [prefill] drives its [decode] graph too: two graphs a bucket
        per_bucket = 2 if PREFILL in function and _decode_of(function) in by_function else 1
        found += _function_findings(function, evs, multiple, ranks, memo, price, per_bucket)
    found = _decode_follows_prefill(found)
    found += rank_findings(events, labels) + neff_findings(events) + kernel_findings(events)
    found += fallback_findings(events)
    found += sync_mode_findings(events)
    found += uncompiled_findings(events) + refused_findings(events)
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



def _decode_of(function: str) -> str:
    """``Model.forward[decode] (file:line)`` for ``Model.forward[prefill] (file:line)``."""
    return function.replace(PREFILL, DECODE, 1)


def _decode_follows_prefill(found: list[Advice]) -> list[Advice]:
    """A decode graph's cache length is set from the prompt length: where the prefill of the same
    function has a prompt-length finding, the decode's cache finding points to its buckets (one
    cause, one fix) and says how the cache follows it (``prompt + 8``)."""
    prompts = {a.numbers["function"]: a for a in found
               if a.numbers.get("cause") == "the prompt length" and "buckets" in a.numbers}
    out = []
    for a in found:
        prefill = prompts.get(a.numbers.get("function", "").replace(DECODE, PREFILL, 1))
        if DECODE not in a.numbers.get("function", "") or prefill is None \
                or a.numbers.get("cause") != "the prompt length":
            out.append(a)
            continue
        lengths, caches = set(prefill.numbers["values"]), set(a.numbers["values"])
        k = min(caches) - min(lengths)
        how = f" (cache = prompt + {k} at every call)" if {c - k for c in caches} == lengths else ""
        buckets = prefill.numbers["buckets"]
        out.append(Advice(
            a.title, a.detail + f" It follows the prompt length of {prefill.numbers['function']}"
            f"{how}: the same cause, one fix.",
            f"pad the prompts to the buckets of {prefill.numbers['function']}'s finding, "
            f"nk.generate(..., buckets=nk.Buckets({buckets})): each bucket is one prefill and one "
            f"decode graph", a.severity,
            {**a.numbers, "follows_prefill": prefill.numbers["function"], "buckets_of": buckets,
             "cache_offset": k if how else None}))
    return out
