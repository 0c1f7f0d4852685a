"""The bucket finding: a length that took many values, and the buckets to pad it to instead.

Suggested boundaries are ``nk.plan_buckets`` over the lengths the log saw, rounded up to the
device's multiple (:func:`bucket_multiple`), at the planner's own prices (:class:`BucketPrice`),
stated in the finding with the arguments that give the same plan.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronkit.advice.finding import Advice
from neuronkit.advice.shapes import Series
from neuronkit.advice.wording import cause, count, dims, listed, named, span
from neuronkit.events.event import CompileEvent
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S, DEFAULT_TOKEN_COST_S

__all__ = ["BUCKET_MULTIPLE", "MAX_SUGGESTED_BUCKETS", "BucketPrice", "bucket_finding",
           "bucket_multiple", "suggest_buckets"]

# Suggested bucket boundaries are rounded up to these multiples. Neuron: neuronx-cc lays tensors out
# in 128-row partitions, and round lengths (64, 128, 192, ...) keep few, reusable graph shapes whose
# NEFFs the compile cache shares between runs and models. CUDA: tensor cores want multiples of 8
# (fp16) or 16 (bf16, int8); CPU: 16 fp32 lanes in an AVX-512 register. 16 where the device is unknown.
BUCKET_MULTIPLE = {"neuron": 64, "cuda": 16, "cpu": 16}
MAX_SUGGESTED_BUCKETS = 4


@dataclass(frozen=True)
class BucketPrice:
    """What a suggested plan trades: seconds a graph compiles, seconds a padded token costs
    (per request the log saw). The defaults are ``nk.plan_buckets``'s own, so the advice and the
    planner give one answer on the same lengths; pass your own to ``nk.diagnose``."""

    compile_cost_s: float = DEFAULT_COMPILE_COST_S
    token_cost_s: float = DEFAULT_TOKEN_COST_S

    def text(self, graphs_per_bucket: int) -> str:
        per = f" x {graphs_per_bucket} graphs a bucket" if graphs_per_bucket > 1 else ""
        return (f"compile priced at {self.compile_cost_s:g} s a graph{per}, padding at "
                f"{self.token_cost_s:g} s a token; pass your own: nk.diagnose(log, "
                f"compile_cost_s=..., token_cost_s=...)")


def bucket_multiple(events: list[CompileEvent]) -> int:
    """The multiple suggested buckets are rounded to, for the device the events ran on."""
    device = next((e.device for e in events if e.device), "")
    return BUCKET_MULTIPLE.get(device.partition(":")[0], 16)


def suggest_buckets(seen: list[int], multiple_of: int, price: BucketPrice | None = None,
                    graphs_per_bucket: int = 1) -> tuple[list[int], dict[str, Any]]:
    """Bucket boundaries for the lengths a log saw (repeats weigh more), each a multiple of
    ``multiple_of``, at most MAX_SUGGESTED_BUCKETS: ``nk.plan_buckets`` at ``price``; with the
    keyword arguments that give the same plan from ``nk.plan_buckets(lengths, **kwargs)``."""
    from neuronkit.workloads.shapes import plan_buckets  # numpy: when needed

    price = price or BucketPrice()
    seen = sorted(n for n in seen if n > 0)  # an empty input (length 0) needs no bucket
    kwargs: dict[str, Any] = {
        "max_buckets": min(MAX_SUGGESTED_BUCKETS, len(set(seen))) or 1,
        "compile_cost_s": price.compile_cost_s, "token_cost_s": price.token_cost_s,
        "multiple_of": multiple_of, "graphs_per_bucket": graphs_per_bucket}
    if not seen:
        return [multiple_of], kwargs
    return [int(b) for b in plan_buckets(seen, **kwargs).boundaries], kwargs


def bucket_finding(function: str, group: list[Series], graphs: int, multiple_of: int,
                   eager: tuple[int, bool], generation: bool = False,
                   price: BucketPrice | None = None, graphs_per_bucket: int = 1) -> Advice:
    """One cause (``group``: the dims it moved, its leader first) compiled a graph per value;
    ``eager``: the shapes that ran eager after a limit hit, and whether that count is exact;
    ``graphs_per_bucket``: the graphs each value compiles (2 where the prompt length drives a
    prefill and a decode graph)."""
    values = group[0].distinct
    price = price or BucketPrice()
    seen = sorted(v for _, v in group[0].values)
    buckets, plan = suggest_buckets(seen, multiple_of, price, graphs_per_bucket)
    ran, exact = eager
    what = cause(group, generation)
    title = (f"{function}: {named(group, generation)} took {len(values)} values ({span(values)}) "
             f"-> {count(graphs, 'graph')}"
             + (f" + {'' if exact else 'at least '}{ran} run eagerly" if ran else ""))
    rounded = f", multiple_of={multiple_of}" if multiple_of > 1 else ""
    multiples = f" (rounded up to multiples of {multiple_of})" if multiple_of > 1 else ""
    graphs_each = (f" ({graphs_per_bucket} graphs a bucket: its prefill and decode)"
                   if graphs_per_bucket == 2 else "")
    seen_as = (f"{what[0].upper()}{what[1:]} is {dims(group)}. " if len(group) > 1 or
               what != f"{group[0].name} dim {group[0].dim}" else "")
    detail = (f"{seen_as}Every distinct value compiled its "
              f"own graph of `{function}`: {listed(values)}. On Neuron each graph is a separate "
              f"neuronx-cc compile (minutes each). Suggested buckets{multiples}: nk.plan_buckets(lengths"
              f"{rounded}, graphs_per_bucket={graphs_per_bucket}, max_buckets={plan['max_buckets']})"
              f" on the {len(seen)} lengths seen, {price.text(graphs_per_bucket)}: {buckets} -> at "
              f"most {count(len(buckets) * graphs_per_bucket, 'graph')}{graphs_each}.")
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
        "function": function, "cause": what, "input": group[0].name, "dim": group[0].dim,
        "values": values, "distinct": len(values), "min": min(values), "max": max(values),
        "graphs": graphs, "buckets": buckets, "multiple_of": multiple_of, "lengths": seen,
        "plan": plan, "follows": [f"{s.name} dim {s.dim}" for s in group[1:]]})
