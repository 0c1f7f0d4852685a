"""Plain-language findings about a compile log: what recompiled, why, and what to change.

    for advice in nk.diagnose(rec.log):
        print(advice)

Each finding names the numbers behind it (``Advice.numbers``) and one concrete fix. Findings are
ordered critical -> warning -> info, the compile-time share always last. The analysis reads only
the events: the input shapes of every graph, the guard-failure reasons, the kind, the rank and the
durations. Functions are told apart by name and place (``forward (modeling_qwen3.py:440)``), and
counts in a merged log are per rank. Which input dimensions varied: advice_shapes.py.
"""
from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any, Iterable, Sequence

from neuronkit.advice.breaks import failure_findings, graph_break_findings, on_ranks
from neuronkit.advice.finding import SEVERITIES, Advice
from neuronkit.advice.neuron import kernel_findings, neff_findings
from neuronkit.advice.ranks import group_findings
from neuronkit.advice.shapes import (CALLS_PER_LENGTH, MAX_SUGGESTED_BUCKETS, Series, consecutive,
                                     graphs_of, graphs_per_rank, groups, is_generation, limit_value,
                                     per_rank, scalar_guards, series)
from neuronkit.log.gc_pause import paused_gc
from neuronkit.sources.torch_text import first_guard, short_reason
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.events.facts import as_events, function_labels, neff_seconds, of_kind, shape_key
from neuronkit.workloads.rank_groups import RankGroup



__all__ = ["bucket_multiple", "diagnose"]

SHARE_WARNING = 0.20  # compile time above this share of the run is a warning
# Suggested bucket boundaries are rounded up to these multiples. Neuron: neuronx-cc lays tensors out
# in 128-row partitions, and round lengths (64, 128, 192, ...) keep few, reusable graph shapes whose
# NEFFs the compile cache shares between runs and models. CUDA: tensor cores want multiples of 8
# (fp16) or 16 (bf16, int8); CPU: 16 fp32 lanes in an AVX-512 register. 16 where the device is unknown.
BUCKET_MULTIPLE = {"neuron": 64, "cuda": 16, "cpu": 16}

def _span(values: list[int]) -> str:
    return f"{min(values)}..{max(values)}"


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _listed(values: list[Any], most: int = 12) -> str:
    shown = ", ".join(str(v) for v in values[:most])
    return shown + (f", … ({len(values) - most} more)" if len(values) > most else "")


def _names(group: list[Series]) -> str:
    head = f"{group[0].name} dim {group[0].dim}"
    rest = [f"{s.name} dim {s.dim}" for s in group[1:]]
    if len(rest) > 2:
        rest = [rest[0], f"{len(rest) - 1} more alike"]
    return head + (f" (with {' and '.join(rest)})" if rest else "")


def _shape_findings(function: str, events: list[CompileEvent], multiple_of: int,
                    ranks: list[int]) -> list[Advice]:
    """What varied between the graphs of one function (``function``: its label)."""
    shaped = of_kind(events, *GRAPH_KINDS, "limit_hit")
    varied = series(shaped)
    graphs = graphs_of(events)
    generation = (is_generation(events[0].function, shaped, varied)
                  or any(e.metrics.get("phase") for e in shaped))
    found: list[Advice] = []
    grouped = groups(varied, {i for i, e in enumerate(shaped) if e.kind in GRAPH_KINDS})
    per_token = [g for g in grouped if g[0].role == "cache" and consecutive(g[0].distinct)]
    if per_token:  # a cache growing per token drags the masks and positions along
        per_token += [g for g in grouped if generation and g[0].role == "length"
                      and consecutive(g[0].distinct)]
    for group in grouped:
        role = group[0].role
        if any(group is g for g in per_token):
            continue
        if role == "cache":
            found.append(_cache_growth(function, group, graphs))
        elif role == "batch":
            found.append(_batch_change(function, group, shaped, graphs, generation))
        else:
            found.append(_buckets(function, group, shaped, graphs, multiple_of,
                                  _ran_eager(events, ranks)))
    if per_token:
        found.append(_dynamic_cache(function, per_token, graphs))
    found += _python_scalars(function, shaped, graphs)
    # several first compiles under one name are several code objects (nested wrappers of one
    # method, each compiled once after a graph break): only recompiles say a guard changed
    if not found and graphs > 1 and of_kind(events, "recompile"):
        found.append(_same_shapes(function, events, graphs))
    return found


def bucket_multiple(events: list[CompileEvent]) -> int:
    """The multiple suggested buckets are rounded to, for the device the events ran on."""
    device = next((e.device for e in events if e.device), "")
    return BUCKET_MULTIPLE.get(device.partition(":")[0], 16)


def _plan(seen: list[int], multiple_of: int) -> list[int]:
    """Bucket boundaries for the lengths a log saw (repeats weigh more), each a multiple of
    ``multiple_of``, at most MAX_SUGGESTED_BUCKETS; each length assumed to recur CALLS_PER_LENGTH
    times."""
    from neuronkit.workloads.shapes import DEFAULT_TOKEN_COST_S, plan_buckets

    seen = [n for n in seen if n > 0]  # an empty input (length 0) needs no bucket
    if not seen:
        return [multiple_of]
    plan = plan_buckets(sorted(seen), max_buckets=min(MAX_SUGGESTED_BUCKETS, len(set(seen))),
                        token_cost_s=DEFAULT_TOKEN_COST_S * CALLS_PER_LENGTH, multiple_of=multiple_of)
    return [int(b) for b in plan.boundaries]


def _buckets(function: str, group: list[Series], events: list[CompileEvent], graphs: int,
             multiple_of: int, eager: tuple[int, bool]) -> Advice:
    values = group[0].distinct
    buckets = _plan([v for _, v in group[0].values], multiple_of)
    ran, exact = eager
    title = (f"{function}: {_names(group)} took {len(values)} values ({_span(values)}) "
             f"-> {_count(graphs, 'graph')}"
             + (f" + {'' if exact else 'at least '}{ran} run eagerly" if ran else ""))
    rounded = f", rounded up to multiples of {multiple_of}" if multiple_of > 1 else ""
    detail = (f"Every distinct value compiled its own graph of `{function}`: {_listed(values)}. "
              f"On Neuron each graph is a separate neuronx-cc compile (minutes each). "
              f"Suggested buckets (nk.plan_buckets{rounded}, each length assumed to recur "
              f"{CALLS_PER_LENGTH} times): {buckets} -> at most {_count(len(buckets), 'graph')}.")
    longer = (f"; an input longer than {buckets[-1]} raises instead of compiling a new graph: "
              f"truncate it (nk.generate(..., truncate='left'), truncation=True in the collator) "
              f"or add a larger bucket")
    if len(buckets) == 1:
        fix = (f"pad to one length, {buckets[0]}: padding='max_length', max_length={buckets[0]} "
               f"(or nk.FixedLengthCollator(tokenizer, max_length={buckets[0]})) for training, "
               f"nk.generate(..., buckets=nk.Buckets({buckets})) for generation")
    else:
        fix = (f"pad to buckets: nk.generate(..., buckets=nk.Buckets({buckets})) for generation, "
               f"nk.FixedLengthCollator(tokenizer, buckets=nk.Buckets({buckets})) for training "
               f"(or padding='max_length', max_length={buckets[-1]} for a single graph)")
    return Advice(title, detail, fix + longer, "warning", {
        "function": function, "input": group[0].name, "dim": group[0].dim, "values": values,
        "distinct": len(values), "min": min(values), "max": max(values), "graphs": graphs,
        "buckets": buckets, "multiple_of": multiple_of})


def _batch_change(function: str, group: list[Series], events: list[CompileEvent],
                  graphs: int, generation: bool) -> Advice:
    s = group[0]
    order = [v for _, v in s.values]
    values, full = s.distinct, order[0]
    smaller = [(i, v) for i, v in s.values if v < full]
    nums: dict[str, Any] = {"function": function, "input": s.name, "values": values,
                            "batch_size": full, "graphs": graphs}
    if generation:
        extra = len(values) - 1
        return Advice(
            f"{function}: the batch size changed during generation ({_listed(order)}) "
            f"-> {_count(extra, 'extra graph')}",
            f"Dim 0 of {s.name} took {len(values)} values: every batch size compiles its own "
            f"decode graph.",
            f"generate with a fixed batch size (nk.generate(..., batch_size={full})) and pad the "
            f"last batch to it, so every call has {full} rows", "warning",
            {**nums, "extra_graphs": extra})
    partial = len(values) == 2 and max(values) == full and len(smaller) <= len(order) - len(smaller)
    if partial:
        where = [events[i] for i, _ in smaller if i >= 0]
        at = ", ".join(f"#{e.seq}" + (f" ({e.context})" if e.context else "") for e in where)
        return Advice(
            f"{function}: a last partial batch (batch {values[0]} instead of {full}) compiled "
            f"{_count(len(smaller), 'extra graph')}",
            f"Dim 0 of {s.name} was {full} except at event {at}, where it dropped to {values[0]}: "
            f"the dataset size is not a multiple of the batch size, so the last batch of an epoch "
            f"is smaller and compiles a graph of its own.",
            "dataloader_drop_last=True in TrainingArguments (nk.fixed_shape_args sets it) or "
            "DataLoader(..., drop_last=True); for evaluation pad the last batch to the full size",
            "warning", {**nums, "partial_batch": values[0], "extra_graphs": len(smaller),
                        "events": [e.seq for e in where]})
    return Advice(
        f"{function}: the batch size (dim 0 of {s.name}) took {len(values)} values "
        f"({_listed(values)}) -> {graphs} graphs",
        "Every batch size compiles its own graph.",
        "use one batch size for every step (same per_device_train_batch_size, "
        "dataloader_drop_last=True)", "warning", {**nums, "extra_graphs": len(values) - 1})


def _cache_growth(function: str, group: list[Series], graphs: int) -> Advice:
    s = group[0]
    values = s.distinct
    return Advice(
        f"{function}: the static cache length changed {_count(len(values) - 1, 'time')} "
        f"({_listed([v for _, v in s.values])}) -> {graphs} graphs",
        f"The cache length, {_names(group)}, took {len(values)} values: generate() sizes the "
        f"static cache from the prompt length + max_new_tokens, so each new prompt length "
        f"compiles a new decode graph.",
        "fix the cache length per bucket: nk.generate(..., buckets=...) gives every bucket one "
        "cache length (one decode graph per bucket); or keep one static cache of a fixed "
        "max_cache_len for all calls", "warning",
        {"function": function, "input": s.name, "dim": s.dim, "values": values,
         "distinct": len(values), "graphs": graphs})


def _dynamic_cache(function: str, groups: list[list[Series]], graphs: int) -> Advice:
    values = groups[0][0].distinct
    names = ", ".join(f"{g[0].name} dim {g[0].dim}" for g in groups[:4])
    return Advice(
        f"{function}: a graph per generated token ({len(values)} values {_span(values)}, one "
        f"token apart) -> {graphs} graphs",
        f"{names} grew by one at every compile: the cache grows with each token (a dynamic "
        f"cache), so every decoding step has a new shape and compiles again.",
        "use a static cache: model.generate(..., cache_implementation='static') (nk.generate "
        "does this), so the decode step keeps one shape", "critical",
        {"function": function, "values": values, "distinct": len(values), "graphs": graphs,
         "inputs": [f"{g[0].name} dim {g[0].dim}" for g in groups]})


def _python_scalars(function: str, events: list[CompileEvent], graphs: int) -> list[Advice]:
    """A guard ``name == value`` whose value grew by one at every compile: a Python int that
    changes per call, baked into the graph (a sliding-window cache's fill level, a step count)."""
    found = []
    for name, values in scalar_guards(events).items():
        distinct = sorted(set(values))
        if not consecutive(distinct):
            continue
        if "cumulative_length_int" in name:
            fix = ("this is a sliding-window static cache (StaticSlidingWindowLayer keeps its fill "
                   "level in a Python int): generate with nk.generate(...), which gives those "
                   "layers full-length static layers, so the tokens stay the same and each bucket "
                   "compiles one decode graph")
        else:
            fix = ("keep that value out of the compiled code: pass it as a tensor or make it "
                   "constant between calls")
        found.append(Advice(
            f"{function}: one graph per step: {name} is a Python int in the compiled code "
            f"({len(distinct)} values {_span(distinct)}) -> {_count(graphs, 'graph')}",
            f"Dynamo guards on `{name} == <value>`, and the value grew by one at every compile "
            f"({_listed(values)}): each call has a new value, so each call compiles again until "
            "the recompile limit, then runs eagerly.", fix, "critical",
            {"function": function, "name": name, "values": distinct, "distinct": len(distinct),
             "graphs": graphs}))
    return found


def _same_shapes(function: str, events: list[CompileEvent], graphs: int) -> Advice:
    reasons = [r for e in of_kind(events, "recompile") for r in e.reasons]
    first = short_reason(reasons[0], 120) if reasons else "no reason recorded"
    guard = first_guard(reasons[0]) if reasons else ""
    nums = {"function": function, "graphs": graphs, "first_reason": first, "guard": guard}
    first += f" (torch's guard: `{guard}`)" if guard and guard != first else ""
    inputs = {tuple(sorted(e.input_shapes)) for e in of_kind(events, *GRAPH_KINDS)}
    if len(inputs) > 1:  # one code object called with other arguments: a shared wrapper
        return Advice(
            f"{function}: {graphs} graphs for different arguments",
            f"`{function}` was called with {len(inputs)} different sets of inputs, each a graph "
            f"of its own; first reason: {first}.", "expected for a wrapper or decorator that "
            "several functions share (each caller gets its graph, once); otherwise pass the same "
            "arguments on every call", "warning", {**nums, "input_sets": len(inputs)})
    return Advice(
        f"{function}: {graphs} graphs without an input shape change",
        f"A guard other than a tensor shape failed; first reason: {first}.",
        "make that value constant between calls (a Python flag, int argument, dtype or module "
        "attribute in the guard), or pass it as a tensor", "warning", nums)


# -- limit hits, failures, graph breaks --------------------------------------------------------
def _ran_eager(events: list[CompileEvent], ranks: list[int]) -> tuple[int, bool]:
    """Shapes of one function that ran eager after a limit hit, on the rank with most, and
    whether that is exact: neuronkit counted them (``eager_fallback``), else only the refused
    compiles are known (one shape each; later eager calls leave no record)."""
    eager = of_kind(events, "eager_fallback")
    if eager:
        return max(len(_shapes([e for e in eager if e.rank == r])) for r in {e.rank for e in eager}), True
    hits = of_kind(events, "limit_hit")
    return max(per_rank(hits, ranks).values(), default=0), False


def _limit_hits(function: str, events: list[CompileEvent], ranks: list[int]) -> list[Advice]:
    hits = of_kind(events, "limit_hit")
    if not hits:
        return []
    n, on, counts = on_ranks(hits, ranks)
    graphs = graphs_per_rank(events)
    limit = limit_value(hits) or graphs
    # torch refuses once the code holds the limit's graphs: that many, whatever was recorded here
    # (a wrapper shared by several models or phases, graphs compiled before recording)
    held = max([graphs, limit, *(e.graph_count for e in hits)])
    shapes, exact = _ran_eager(events, ranks)
    eager = of_kind(events, "eager_fallback")
    calls = max((sum(e.calls for e in eager if e.rank == r) for r in ranks), default=0) \
        if eager else None
    need = held + shapes
    if exact:  # neuronkit drove the calls: it counted every one that ran eager
        ran = f"ran {_count(calls or 0, 'call')} of {_count(shapes, 'shape')}"
        needed = f"to {need} (the {held} graphs it held plus the shapes that ran eager)"
    else:
        ran = f"ran at least {_count(shapes, 'new shape')}"
        needed = (f"to at least {need} (the {held} graphs it held plus the shapes refused; later "
                  "eager calls leave no record)")
    shared = (f" ({graphs} of them recorded for `{function}`: the others came before recording "
              "or from functions sharing its code)" if held > graphs else "")
    return [Advice(
        f"{function}: recompile limit hit {_count(n, 'time')}{on}: torch ran it eagerly, "
        "uncompiled",
        f"After {held} graphs{shared} torch stopped compiling `{function}` "
        f"(torch._dynamo.config.recompile_limit = {limit}) and {ran} in eager mode without an "
        f"error. On Neuron that is op-by-op execution: far slower, silently.",
        f"remove the shape change (pad to buckets, see the other findings), or raise "
        f"torch._dynamo.config.recompile_limit {needed}",
        "critical", {"function": function, "limit_hits": n, "graphs": graphs, "held": held,
                     "recompile_limit": limit, "shapes_seen": need, "eager_calls": calls,
                     "exact": exact, "per_rank": counts, "events": [e.seq for e in hits]})]


def _shapes(events: list[CompileEvent]) -> set[str]:
    return {shape_key(e) for e in events}


def _ranks(events: list[CompileEvent], labels: dict[tuple[str, str], str]) -> list[Advice]:
    seen: dict[int, set[tuple[str, str]]] = {rank: set() for rank in {e.rank for e in events}}
    graphs = of_kind(events, *GRAPH_KINDS)
    places = map(labels.__getitem__, zip(map(attrgetter("function"), graphs),
                                         map(attrgetter("location"), graphs), strict=True))
    for rank, seen_here in zip(map(attrgetter("rank"), graphs),
                               zip(places, map(shape_key, graphs), strict=True), strict=True):
        seen[rank].add(seen_here)
    if len(seen) < 2 or len({frozenset(s) for s in seen.values()}) == 1:
        return []
    common = set.intersection(*seen.values())
    counts = {r: len(s) for r, s in sorted(seen.items())}
    only = {r: sorted(s - common) for r, s in sorted(seen.items()) if s - common}
    detail = "; ".join(f"rank {r} alone compiled {len(x)}: " + ", ".join(f"{f} {sh}" for f, sh in x[:2])
                       + (", …" if len(x) > 2 else "") for r, x in only.items())
    return [Advice(
        "ranks compiled different graphs: " + ", ".join(f"rank {r}: {n}" for r, n in counts.items()),
        detail + ". A rank compiling a graph the others do not stalls them at the next collective.",
        "give every rank the same shapes: the same padding or buckets (padding='max_length'), the "
        "same per-device batch size and dataloader_drop_last=True", "warning",
        {"graphs_per_rank": counts, "only_on_rank": {r: len(x) for r, x in only.items()},
         "common": len(common)})]


def _compile_share(events: list[CompileEvent], wall: float | None) -> Advice:
    seconds: dict[int, float] = defaultdict(float)
    for e in events:
        seconds[e.rank] += e.duration_s
    for e in events if any(map(attrgetter("neff_compile_s"), events)) else ():
        seconds[e.rank] += e.total_s - e.duration_s  # the NEFF build on Neuron
    total = max(seconds.values(), default=0.0)  # ranks compile side by side
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events)}
    neff = neff_seconds(events)
    if neff:
        nums["neff_s"] = round(neff, 3)
    if not wall:
        return Advice(f"compiling took {total:.2f} s over {_count(len(events), 'event')}"
                      + (f" (of which {neff:.1f} s NEFF builds)" if neff else ""),
                      "The run's wall time is unknown, so its share cannot be given.", "", "info", nums)
    share = total / wall
    nums.update(wall_s=round(wall, 3), share=round(share, 4))
    high = share > SHARE_WARNING
    return Advice(f"compile time is {share:.0%} of the run ({total:.1f} s of {wall:.1f} s)",
                  f"More than {SHARE_WARNING:.0%} of the wall time went into compiling." if high else "",
                  "compile fewer graphs (see the findings above) and keep the Neuron compile cache "
                  "between runs so repeated graphs load instead of compiling" if high else "",
                  "warning" if high else "info", nums)


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
    found = (_limit_hits(function, evs, ranks) + failure_findings(function, evs, ranks)
             + _shape_findings(function, evs, multiple, ranks))
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
    found += _ranks(events, labels) + neff_findings(events) + kernel_findings(events)
    graphs = {} if found else {f: graphs_per_rank(evs) for f, evs in by_function.items()}
    if not found and all(n <= 1 for n in graphs.values()):
        found.append(Advice(
            "shapes are static: one graph per function",
            "Graphs: " + ", ".join(f"{f} {n}" for f, n in graphs.items()) + ". Nothing recompiled.",
            "", "info", {"graphs": graphs}))
    found.sort(key=lambda a: SEVERITIES.index(a.severity))
    # the timing finding comes last whatever its severity: it depends on the machine's speed,
    # so the shape findings above it keep their place from run to run
    return found + [_compile_share(events, wall)]
