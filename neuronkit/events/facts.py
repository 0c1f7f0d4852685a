"""Facts about a list of compile events: graphs built, compile seconds, events of a kind, a key
of their shapes, readable function labels, and one order for events from several ranks."""
from __future__ import annotations

import dataclasses
import json
import os
from collections import defaultdict
from operator import attrgetter
from typing import Any, Iterable

import msgspec

from neuronkit.events.event import GRAPH_KINDS, CompileEvent

__all__ = ["as_events", "compile_seconds", "function_labels", "graphs", "in_start_order",
           "neff_seconds", "of_kind", "shape_key", "short_label", "total_seconds"]


def graphs(events: Iterable[CompileEvent]) -> int:
    """How many of the events built a graph (first compiles and recompiles)."""
    return sum(1 for e in events if e.kind in GRAPH_KINDS)


def compile_seconds(events: Iterable[CompileEvent]) -> float:
    """The compile seconds of the events (Dynamo's ``duration_s``)."""
    return sum(float(e.duration_s or 0.0) for e in events)


def neff_seconds(events: Iterable[CompileEvent]) -> float:
    """The NEFF build seconds of the events not already in their Dynamo time
    (:attr:`CompileEvent.neff_s`; 0 where unresolved or not Neuron)."""
    return sum(e.neff_s for e in events)


def total_seconds(events: Iterable[CompileEvent]) -> float:
    """Dynamo + NEFF seconds of the events: what compiling cost the run."""
    return sum(e.total_s for e in events)


def of_kind(events: Iterable[CompileEvent], *kinds: str) -> list[CompileEvent]:
    """The events of the given kinds, in order."""
    wanted = frozenset(kinds)
    return [e for e in events if e.kind in wanted]


_SORTED_JSON = msgspec.json.Encoder(order="sorted").encode


def shape_key(event: CompileEvent) -> str:
    """A hashable key of an event's input shapes (equal shapes, equal keys): sorted JSON."""
    try:
        return _SORTED_JSON(event.input_shapes).decode()
    except TypeError:  # a hand-built event holding something JSON has no type for
        return json.dumps(event.input_shapes, sort_keys=True, default=str)


def as_events(log_or_events: Any) -> list[CompileEvent]:
    """The events of a :class:`CompileLog` (or anything with ``.events``), or a list of events."""
    if hasattr(log_or_events, "events"):
        return list(log_or_events.events)
    if isinstance(log_or_events, (list, tuple)) and all(
            isinstance(e, CompileEvent) for e in log_or_events):
        return list(log_or_events)
    raise TypeError("expected a CompileLog or a list of CompileEvent, got "
                    f"{type(log_or_events).__name__}; load a log with CompileLog.load(path)")


def function_labels(events: Iterable[CompileEvent]) -> dict[tuple[str, str], str]:
    """A readable name per (function, location): the name alone where the events hold one
    function of that name, else ``name (file.py:line)`` (``forward (modeling_qwen3.py:440)``)."""
    events = events if isinstance(events, list) else list(events)
    places: dict[str, list[str]] = defaultdict(list)
    for name, location in dict.fromkeys(zip(map(attrgetter("function"), events),
                                            map(attrgetter("location"), events), strict=True)):
        places[name].append(location)  # each place once, in order of appearance
    labels: dict[tuple[str, str], str] = {}
    for name, locations in places.items():
        if len(locations) == 1:
            labels[name, locations[0]] = name
            continue
        short = {loc: os.path.basename(loc.replace("\\", "/")) or "?" for loc in locations}
        unique = len(set(short.values())) == len(locations)  # else the full paths tell them apart
        for loc in locations:
            labels[name, loc] = f"{name} ({short[loc] if unique else loc or '?'})"
    return labels


def short_label(label: str, width: int) -> str:
    """A label cut to about ``width`` characters, keeping its place and the end of its name
    (``torch_dynamo_resume_in_…d_at_375``, ``forward_with_ch… (layers.py:89)``)."""
    name, sep, where = label.partition(" (")
    room = max(width - len(where) - 2, 12) if sep else width
    if len(name) > room:  # the end tells resume functions apart: ..._at_375 / ..._at_472
        name = name[: room - 9] + "…" + name[-8:] if room >= 20 else name[: room - 1] + "…"
    return name + sep + where


def in_start_order(event_lists: Iterable[Iterable[CompileEvent]]) -> list[CompileEvent]:
    """Copies of the events of several lists (one per rank or process) in one list, ordered by
    start time then rank, numbered again from 0."""
    events = sorted((dataclasses.replace(e) for events in event_lists for e in events),
                    key=lambda e: (e.started_at, e.rank))
    for seq, e in enumerate(events):
        e.seq = seq
    return events
