"""Progress of a generate() call between its batches: done / total, and an ETA from the plan.

``nk.generate(..., on_batch=fn, stop=event)`` calls ``fn(BatchProgress)`` after every batch and
stops cleanly before the next one once ``event`` is set (what was recorded stays recorded).
The ETA prices each batch left at the run time seen so far, plus one compile for each batch
shape (bucket, cache length) the call has not compiled yet: on Trainium the compiles dominate.
"""
from __future__ import annotations

from dataclasses import dataclass
from statistics import fmean

__all__ = ["BatchProgress", "BatchTiming", "eta_s", "new_shapes"]


@dataclass
class BatchTiming:
    """One ``model.generate`` call: its shapes, and where its time went."""

    bucket: int            # prompt length every row was left-padded to
    cache_len: int         # static cache length (what the decode graph is keyed on)
    rows: int              # batch rows, dummy rows included
    real_rows: int         # rows holding a prompt
    prefill_s: float       # start of the call to the first token's logits (time to first token)
    decode_s: float        # first token's logits to the end of the call
    new_tokens: int        # new tokens of the real rows, up to and including eos
    compiles: int = 0      # compile events during this batch
    compile_s: float = 0.0  # their duration (inside prefill_s / decode_s)


@dataclass(frozen=True)
class BatchProgress:
    """Where a generate() call stands after a batch."""

    done: int                   # batches finished
    total: int                  # batches planned
    timing: BatchTiming         # the batch just finished
    new_graphs_left: int        # batch shapes still to compile
    eta_s: float | None         # seconds left, estimated (None: nothing to go on yet)

    def __str__(self) -> str:
        eta = "" if self.eta_s is None else f", about {_clock(self.eta_s)} left"
        graphs = f", {self.new_graphs_left} graph(s) to compile" if self.new_graphs_left else ""
        return f"batch {self.done} of {self.total}{graphs}{eta}"


def new_shapes(timings: list[BatchTiming], remaining: list[tuple[int, int]]) -> int:
    """Batch shapes (bucket, cache length) left that no finished batch had."""
    seen = {(t.bucket, t.cache_len) for t in timings}
    return len(set(remaining) - seen)


def eta_s(timings: list[BatchTiming], remaining: list[tuple[int, int]]) -> float | None:
    """Seconds the ``remaining`` batch shapes should take: each at the mean run time (compiles
    taken out), plus the mean compile time once per shape not compiled yet."""
    if not timings:
        return None
    run = fmean(max(t.prefill_s + t.decode_s - t.compile_s, 0.0) for t in timings)
    compiles = [t.compile_s for t in timings if t.compiles]
    per_graph = fmean(compiles) if compiles else 0.0
    return len(remaining) * run + new_shapes(timings, remaining) * per_graph


def _clock(seconds: float) -> str:
    whole = int(round(seconds))
    return f"{whole // 60}:{whole % 60:02d}" if whole >= 60 else f"{seconds:.0f} s"
