"""A stop for graphs nobody planned: ``nk.generate`` ends a call at the first graph over its
plan and says what recompiled, instead of compiling one graph per token (minutes each on Neuron).

A plan allows each batch the distinct graphs of the batches up to it. Some models change a
Python value, or a shape, on every step in ways no static cache can hold (a per-step counter
kept on a module, a mask built from a Python length): their graphs are not bounded by any bucket.
:class:`GraphWatch` is a ``StoppingCriteria`` that counts the graphs recorded since the call began
after every step and ends generation when there are more than allowed;
:func:`raise_if_over` turns that into an :class:`UnboundedGraphsError` naming the last one's reason.
"""
from __future__ import annotations

from typing import Any

from neuronkit.events.event import GRAPH_KINDS
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.workloads.static_cache import UnboundedCacheError

__all__ = ["GraphWatch", "UnboundedGraphsError", "allowed_graphs"]


class UnboundedGraphsError(UnboundedCacheError):
    """The model compiled more graphs than the plan allows: it recompiles per step."""


def allowed_graphs(batches: Any) -> list[int]:
    """Per batch, the distinct graphs of the plan's batches up to and including it."""
    seen: set[Any] = set()
    allowed = []
    for batch in batches:
        seen.update(batch.graphs())
        allowed.append(len(seen))
    return allowed


class GraphWatch:
    """A stopping criterion: True (stop every row) once the call's graphs exceed ``allowed``."""

    def __init__(self, rec: CompileRecorder, first_event: int, allowed: int) -> None:
        self.rec, self.first_event, self.allowed = rec, first_event, allowed
        self.counted, self.graphs, self.over = first_event, 0, False

    def __call__(self, input_ids: Any, scores: Any, **kwargs: Any) -> Any:
        import torch

        events = self.rec.events
        self.graphs += sum(1 for e in events[self.counted:] if e.kind in GRAPH_KINDS)
        self.counted = len(events)
        self.over = self.over or self.graphs > self.allowed
        return torch.full((input_ids.shape[0],), self.over, dtype=torch.bool,
                          device=input_ids.device)

    def raise_if_over(self, model: Any) -> None:
        """Raise :class:`UnboundedGraphsError` when the watch stopped the call."""
        if not self.over:
            return
        last = next((e for e in reversed(self.rec.events[self.first_event:])
                     if e.kind in GRAPH_KINDS), None)
        why = (last.changed or (last.reasons[0] if last.reasons else "")) if last else ""
        brk = next((e for e in self.rec.events[self.first_event:] if e.kind == "graph_break"
                    and e.reasons), None)
        if brk is not None and last is not None and "resume_in" in last.function:
            why = f"a graph break in {brk.function}: {brk.reasons[0]}"
        raise UnboundedGraphsError(
            f"{type(model).__name__}: {self.graphs} graphs compiled where the plan allows "
            f"{self.allowed} (the last, of {last.function if last else '?'}: "
            f"{why[:200] or 'torch gave no reason'}); generation was stopped after the step "
            f"that passed the plan, and its events are recorded. Something in the model changes "
            f"on every step, or breaks its graph, in a way no bucket or static cache bounds; "
            f"generate without compiling (nk.generate(..., compile=False)), or run "
            f"model.generate under a CompileRecorder to see each recompile")
