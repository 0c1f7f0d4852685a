"""The bucket finding: a length that took many values, and the buckets to pad it to instead.

Suggested boundaries come from ``nk.plan_buckets`` over the lengths the log saw, rounded up to
the device's multiple (:func:`bucket_multiple`).
"""
from __future__ import annotations

from neuronkit.advice.finding import Advice
from neuronkit.advice.shapes import Series
from neuronkit.advice.wording import count, dims, listed, span
from neuronkit.events.event import CompileEvent

__all__ = ["BUCKET_MULTIPLE", "CALLS_PER_LENGTH", "MAX_SUGGESTED_BUCKETS", "bucket_finding",
           "bucket_multiple", "suggest_buckets"]

# Suggested bucket boundaries are rounded up to these multiples. Neuron: neuronx-cc lays tensors out
# in 128-row partitions, and round lengths (64, 128, 192, ...) keep few, reusable graph shapes whose
# NEFFs the compile cache shares between runs and models. CUDA: tensor cores want multiples of 8
# (fp16) or 16 (bf16, int8); CPU: 16 fp32 lanes in an AVX-512 register. 16 where the device is unknown.
BUCKET_MULTIPLE = {"neuron": 64, "cuda": 16, "cpu": 16}
# A log shows which lengths compiled, not how often they will come back: assume each one recurs
# this many times (a serving run, or the steps of an epoch), so padding is paid that often while
# each bucket compiles once. Fewer calls would favour fewer buckets, more calls more buckets.
CALLS_PER_LENGTH = 1000
MAX_SUGGESTED_BUCKETS = 4


def bucket_multiple(events: list[CompileEvent]) -> int:
    """The multiple suggested buckets are rounded to, for the device the events ran on."""
    device = next((e.device for e in events if e.device), "")
    return BUCKET_MULTIPLE.get(device.partition(":")[0], 16)


def suggest_buckets(seen: list[int], multiple_of: int) -> list[int]:
    """Bucket boundaries for the lengths a log saw (repeats weigh more), each a multiple of
    ``multiple_of``, at most MAX_SUGGESTED_BUCKETS; each length assumed to recur CALLS_PER_LENGTH
    times."""
    from neuronkit.workloads.shapes import DEFAULT_TOKEN_COST_S, plan_buckets  # numpy: when needed

    seen = [n for n in seen if n > 0]  # an empty input (length 0) needs no bucket
    if not seen:
        return [multiple_of]
    plan = plan_buckets(sorted(seen), max_buckets=min(MAX_SUGGESTED_BUCKETS, len(set(seen))),
                        token_cost_s=DEFAULT_TOKEN_COST_S * CALLS_PER_LENGTH, multiple_of=multiple_of)
    return [int(b) for b in plan.boundaries]


def bucket_finding(function: str, group: list[Series], graphs: int, multiple_of: int,
                   eager: tuple[int, bool]) -> Advice:
    """One length (``group``: the dims that varied with it) compiled a graph per value; ``eager``:
    the shapes that ran eager after a limit hit, and whether that count is exact."""
    values = group[0].distinct
    buckets = suggest_buckets([v for _, v in group[0].values], multiple_of)
    ran, exact = eager
    title = (f"{function}: {dims(group)} took {len(values)} values ({span(values)}) "
             f"-> {count(graphs, 'graph')}"
             + (f" + {'' if exact else 'at least '}{ran} run eagerly" if ran else ""))
    rounded = f", rounded up to multiples of {multiple_of}" if multiple_of > 1 else ""
    detail = (f"Every distinct value compiled its own graph of `{function}`: {listed(values)}. "
              f"On Neuron each graph is a separate neuronx-cc compile (minutes each). "
              f"Suggested buckets (nk.plan_buckets{rounded}, each length assumed to recur "
              f"{CALLS_PER_LENGTH} times): {buckets} -> at most {count(len(buckets), 'graph')}.")
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
