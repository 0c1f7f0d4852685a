"""Findings about what varied between one function's graphs: a length (see ``buckets.py``), the
batch size, a static cache's length, a cache growing per token, a Python int in the compiled code,
or no visible shape at all. Which dimensions varied: ``shapes.py``."""
from __future__ import annotations

from typing import Any

from neuronkit.advice.buckets import BucketPrice, bucket_finding
from neuronkit.advice.finding import Advice
from neuronkit.advice.limits import ran_eager
from neuronkit.advice.shapes import (
    DECODE,
    PREFILL,
    Series,
    consecutive,
    graphs_of,
    groups,
    is_generation,
    scalar_guards,
    series,
)
from neuronkit.advice.wording import count, dims, listed, span
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import of_kind
from neuronkit.sources.torch_text import first_guard, guard_text

__all__ = ["shape_findings"]


def shape_findings(function: str, events: list[CompileEvent], multiple_of: int,
                   ranks: list[int], price: BucketPrice | None = None,
                   graphs_per_bucket: int = 1) -> list[Advice]:
    """What varied between the graphs of one function (``function``: its label): one finding
    per cause (``shapes.groups``); ``price`` and ``graphs_per_bucket`` price suggested buckets."""
    shaped = of_kind(events, *GRAPH_KINDS, "limit_hit")
    varied = series(shaped)
    graphs = graphs_of(events)
    generation = (is_generation(events[0].function, shaped, varied)
                  or any(e.metrics.get("phase") for e in shaped)
                  or PREFILL in function or DECODE in function)
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
            found.append(bucket_finding(function, group, graphs, multiple_of,
                                        ran_eager(events, ranks), generation, price,
                                        graphs_per_bucket))
    if per_token:
        found.append(_dynamic_cache(function, per_token, graphs))
    found += _python_scalars(function, shaped, graphs)
    # several first compiles under one name are several code objects (nested wrappers of one
    # method, each compiled once after a graph break): only recompiles say a guard changed
    if not found and graphs > 1 and of_kind(events, "recompile"):
        found.append(_same_shapes(function, events, graphs))
    return found


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
            f"{function}: the batch size changed during generation ({listed(order)}) "
            f"-> {count(extra, 'extra graph')}",
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
            f"{count(len(smaller), 'extra graph')}",
            f"Dim 0 of {s.name} was {full} except at event {at}, where it dropped to {values[0]}: "
            f"the dataset size is not a multiple of the batch size, so the last batch of an epoch "
            f"is smaller and compiles a graph of its own.",
            "dataloader_drop_last=True in TrainingArguments (nk.fixed_shape_args sets it) or "
            "DataLoader(..., drop_last=True); for evaluation pad the last batch to the full size",
            "warning", {**nums, "partial_batch": values[0], "extra_graphs": len(smaller),
                        "events": [e.seq for e in where]})
    return Advice(
        f"{function}: the batch size (dim 0 of {s.name}) took {len(values)} values "
        f"({listed(values)}) -> {graphs} graphs",
        "Every batch size compiles its own graph.",
        "use one batch size for every step (same per_device_train_batch_size, "
        "dataloader_drop_last=True)", "warning", {**nums, "extra_graphs": len(values) - 1})


def _cache_growth(function: str, group: list[Series], graphs: int) -> Advice:
    """A static cache whose length changed: generate() sizes it from the prompt length, so the
    cause is the prompt length; the cache gets no buckets of its own (``diagnose`` points it to
    the prefill's finding where the log has one)."""
    s = group[0]
    values = s.distinct
    return Advice(
        f"{function}: the static cache length changed {count(len(values) - 1, 'time')} "
        f"({listed([v for _, v in s.values])}) -> {count(graphs, 'graph')}: it follows the "
        f"prompt length",
        f"The cache length, {dims(group)}, took {len(values)} values "
        f"({span(values)}): generate() sizes the static cache from the "
        f"prompt length + max_new_tokens, so each new prompt length compiles a new decode graph.",
        "pad the prompts to a few lengths: nk.generate(..., buckets=...) gives every bucket one "
        "cache length (one decode graph per bucket); or keep one static cache of a fixed "
        "max_cache_len for all calls", "warning",
        {"function": function, "cause": "the prompt length", "input": s.name, "dim": s.dim,
         "values": values, "distinct": len(values), "graphs": graphs,
         "follows": [f"{x.name} dim {x.dim}" for x in group[1:]]})


def _dynamic_cache(function: str, groups: list[list[Series]], graphs: int) -> Advice:
    values = groups[0][0].distinct
    names = ", ".join(f"{g[0].name} dim {g[0].dim}" for g in groups[:4])
    return Advice(
        f"{function}: a graph per generated token ({len(values)} values {span(values)}, one "
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
            f"({len(distinct)} values {span(distinct)}) -> {count(graphs, 'graph')}",
            f"Dynamo guards on `{name} == <value>`, and the value grew by one at every compile "
            f"({listed(values)}): each call has a new value, so each call compiles again until "
            "the recompile limit, then runs eagerly.", fix, "critical",
            {"function": function, "name": name, "values": distinct, "distinct": len(distinct),
             "graphs": graphs}))
    return found


def _same_shapes(function: str, events: list[CompileEvent], graphs: int) -> Advice:
    reasons = [r for e in of_kind(events, "recompile") for r in e.reasons]
    first = guard_text(reasons[0]) if reasons else "no reason recorded"
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
