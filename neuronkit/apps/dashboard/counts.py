"""Graphs per function of the log the dashboard shows, counted as events arrive."""
from __future__ import annotations

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import function_labels
from neuronkit.log.compile_log import CompileLog

__all__ = ["GraphCounter"]


class GraphCounter:
    """``log.graph_counts()``, counting only the events new since the last call (a live event
    costs one event's work, not the whole log's); another log, or a shorter one, starts over."""

    def __init__(self) -> None:
        self._log: CompileLog | None = None
        self._counted = 0
        self._pairs: dict[tuple[str, str], int] = {}  # (function, location) -> graphs

    def counts(self, log: CompileLog) -> dict[str, int]:
        if log is not self._log or len(log.events) < self._counted:
            self._log, self._counted, self._pairs = log, 0, {}
        pairs = self._pairs
        for e in log.events[self._counted:]:
            key = (e.function, e.location)
            pairs[key] = pairs.get(key, 0) + (e.kind in GRAPH_KINDS)
        self._counted = len(log.events)
        labels = function_labels(CompileEvent(function=f, location=loc) for f, loc in pairs)
        counts: dict[str, int] = {}
        for key, n in pairs.items():
            if n:
                counts[labels[key]] = counts.get(labels[key], 0) + n
        return counts
