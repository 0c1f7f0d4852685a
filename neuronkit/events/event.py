"""One compile event: what the recorder saw for one compile (or refused compile, eager calls after
a limit hit, new eager kernels), and the kinds and fields an event may have.

The record every layer above shares; it imports nothing else of neuronkit. The log file format
(header, schema checks) is in ``schema.py``; facts about a list of events in ``facts.py``.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any, Literal

__all__ = ["BUILD_KINDS", "FIELDS", "GRAPH_KINDS", "KEY_CACHES", "KINDS", "NEFF_CACHE_STATES", "UPDATABLE",
           "CompileEvent", "EventKind", "fields_of"]

EventKind = Literal["first", "recompile", "limit_hit", "failed", "eager_fallback", "kernels",
                   "graph_break", "backward", "cpu_fallback"]
KINDS: tuple[str, ...] = ("first", "recompile", "limit_hit", "failed", "eager_fallback", "kernels",
                          "graph_break", "backward", "cpu_fallback")
GRAPH_KINDS: tuple[str, ...] = ("first", "recompile")  # the kinds that build a (Dynamo) graph
# the kinds whose graph has a NEFF build on Neuron: a Dynamo graph, and the backward graph that
# AOTAutograd builds at the graph's first ``.backward()`` (same function, compile id and step)
BUILD_KINDS: tuple[str, ...] = (*GRAPH_KINDS, "backward")
# where a graph's NEFF came from on Neuron: built by neuronx-cc, the disk cache, the in-memory cache
NEFF_CACHE_STATES: tuple[str, ...] = ("compiled", "disk_hit", "memory_hit")
UPDATABLE: tuple[str, ...] = ("neff_compile_s", "neff_cache", "cache_key")  # an update line may set
# the caches a build looks up (``CompileEvent.cache_key``): inductor's FX graph cache and
# AOTAutograd cache (states hit / miss / bypass) and torch-neuronx's NEFF cache (NEFF_CACHE_STATES)
KEY_CACHES: tuple[str, ...] = ("fx_graph", "aot_autograd", "neff")


@dataclass(slots=True)
class CompileEvent:
    """One Dynamo compile (or a refused one: ``limit_hit``) seen by the recorder, or calls torch
    ran uncompiled after a limit hit (``eager_fallback``: ``calls`` of them, counted by the
    neuronkit workload that made them; torch records nothing for them), or the eager-op kernels
    compiled since the last safe point (``kernels``: ``kernels`` new ones, ``ops`` per op name;
    ``forecast`` when counted on a machine without Neuron, as what Neuron would compile), or the
    backward graph of a compile, built at its first ``.backward()`` (``backward``), or eager ops
    that fell back to CPU on Neuron since the last safe point (``cpu_fallback``: ``ops``).

    ``cache_key``: the build's cache lookups, in order, each ``{"cache", "key", "state"}`` (a
    bypass adds ``"reason"``; a NEFF its ``"persistent_key"``); what each key is made of is
    kept once per key in the log (``log/key_parts.py``).

    ``duration_s`` is Dynamo's time (for ``kernels``: their compile seconds where known). On
    Neuron ``neff_compile_s`` is the neuronx-cc build of the event's graphs, which runs after
    Dynamo returns, and ``neff_cache`` where the NEFF came from; both None until resolved, and
    elsewhere. ``metrics["neff_in_duration"]``: the build blocked inside Dynamo's time
    (``NEURON_LAUNCH_BLOCKING=1``), so it is not added again.
    """

    seq: int = 0
    compile_id: str = ""
    function: str = ""
    location: str = ""
    backend: str = ""
    device: str = ""
    started_at: float = 0.0
    duration_s: float = 0.0
    input_shapes: dict[str, list[int | str]] = field(default_factory=dict)
    changed: str = ""
    reasons: list[str] = field(default_factory=list)
    kind: EventKind = "first"
    graph_count: int = 0
    rank: int = 0
    context: str = ""
    metrics: dict[str, Any] = field(default_factory=dict)
    calls: int = 0
    neff_compile_s: float | None = None
    neff_cache: str | None = None
    kernels: int = 0
    ops: dict[str, int] = field(default_factory=dict)
    forecast: bool = False
    cache_key: list[dict[str, Any]] = field(default_factory=list)

    @property
    def neff_in_duration(self) -> bool:
        """The NEFF build blocked inside Dynamo's time (``NEURON_LAUNCH_BLOCKING=1``), so
        ``duration_s`` holds it already."""
        return isinstance(self.metrics, dict) and bool(self.metrics.get("neff_in_duration"))

    @property
    def neff_s(self) -> float:
        """The NEFF build's seconds not already inside ``duration_s``: 0 where unresolved, off
        Neuron, or :attr:`neff_in_duration`. The one place that rule is written."""
        if not self.neff_compile_s or self.neff_in_duration:
            return 0.0
        return float(self.neff_compile_s)

    @property
    def total_s(self) -> float:
        """What compiling this event cost: Dynamo's seconds plus :attr:`neff_s`."""
        return float(self.duration_s or 0.0) + self.neff_s

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompileEvent":
        """An event from a dict, unknown keys ignored (no checks: the log reader checks)."""
        if len(data) == len(FIELDS) and data.keys() == _FIELD_SET:  # what to_dict() wrote
            return cls(*map(data.__getitem__, FIELDS))  # positional: no keyword matching
        return cls(**{k: v for k, v in data.items() if k in _FIELD_SET})


FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CompileEvent))
_FIELD_SET = frozenset(FIELDS)


def fields_of(event: CompileEvent) -> dict[str, Any]:
    """An event as the dict of its fields, uncopied (to write it; ``to_dict`` copies deeply)."""
    return {name: getattr(event, name) for name in FIELDS}
