"""Facts about a list of compile events: graphs built, compile seconds, events of a kind, a key
of their shapes, readable function labels, one order for events from several ranks, and how views
read what an event holds (:func:`number`, :func:`readable`: one built in memory may hold anything)."""
from __future__ import annotations

import dataclasses
import itertools
import json
import numbers
import os
import sys
from collections import defaultdict
from operator import attrgetter
from typing import Any, Callable, Iterable

import msgspec

from neuronkit.events.event import FIELDS, GRAPH_KINDS, CompileEvent

__all__ = ["NEURONX_FIELD", "NUMBER_FIELDS", "TEXT_FIELDS", "as_events", "compile_seconds", "function_labels",
           "graphs", "in_start_order", "is_synthetic", "neff_seconds", "number", "of_kind",
           "readable", "shape_key", "short_label", "synthetic_reason", "text_of", "total_seconds"]


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


# -- reading what an event holds (one built in memory may hold anything) -------------------------

# the number fields and what a view reads where one holds no number (started_at: the earliest start)
NUMBER_FIELDS: dict[str, Any] = {"seq": 0, "started_at": None, "duration_s": 0.0,
                                 "graph_count": 0, "rank": 0, "calls": 0, "kernels": 0,
                                 "neff_compile_s": None}
TEXT_FIELDS: tuple[str, ...] = ("compile_id", "function", "location", "backend", "device",
                                "changed", "kind", "context")
_FLOAT_MAX = sys.float_info.max


def number(value: Any) -> int | float | None:
    """``value`` as a finite int or float (numpy's too); None when it is none (text, None, a
    bool, NaN, infinity, an int too large for a float). How a view reads a number."""
    n: int | float
    if type(value) is int or type(value) is float:
        n = value                                   # itself: an event read as it is
    elif isinstance(value, bool) or not isinstance(value, (numbers.Integral, float)):
        return None
    else:
        n = int(value) if isinstance(value, numbers.Integral) else float(value)
    return n if -_FLOAT_MAX <= n <= _FLOAT_MAX else None


def text_of(value: Any) -> str:
    """``value`` as text: itself when a str, "" for None, else ``str(value)``."""
    return value if type(value) is str else "" if value is None else str(value)


def _plain(e: CompileEvent) -> bool:
    """Every field of ``e`` holds the type a recorder writes there and its seconds are finite
    (``0.0 * x`` is 0 for a finite float, NaN for infinity or NaN): one expression, no call."""
    neff = e.neff_compile_s
    return (type(e.seq) is type(e.graph_count) is type(e.rank) is type(e.calls)
            is type(e.kernels) is int and type(e.started_at) is type(e.duration_s) is float
            and 0.0 * e.started_at * e.duration_s == 0.0
            and (neff is None or type(neff) is float and 0.0 * neff == 0.0)
            and type(e.compile_id) is type(e.function) is type(e.location) is type(e.backend)
            is type(e.device) is type(e.changed) is type(e.kind) is type(e.context) is str
            and (e.neff_cache is None or type(e.neff_cache) is str)
            and type(e.input_shapes) is type(e.metrics) is type(e.ops) is dict
            and type(e.reasons) is list and type(e.forecast) is bool
            and type(e.cache_key) is list and (not e.cache_key or _lookups(e.cache_key) is e.cache_key))


def _only(values: Iterable[Any], *types: type) -> bool:
    return set(map(type, values)) <= set(types)


def _contents_ok(name: str, values: list[Any]) -> bool:
    """What the reasons (strs), shapes (names, lists of sizes) or ops (names, counts) of every
    event hold has its type, in C."""
    chain = itertools.chain.from_iterable
    if name == "reasons":
        return _only(chain(values), str)
    inner = list if name == "input_shapes" else int
    return _only(chain(values), str) and _only(chain(map(dict.values, values)), inner)


def _suspects(events: list[CompileEvent], contents: bool) -> set[str]:
    """The fields in which some event may hold what a view cannot read (empty: none); with
    ``contents``, also what reasons, shapes and ops hold."""
    suspects = {name for e in itertools.filterfalse(_plain, events) for name in FIELDS
                if _read(name, getattr(e, name), 0.0) is not getattr(e, name)}
    if contents:
        suspects.update(name for name in ("reasons", "input_shapes", "ops") if name not in suspects
                        and not _contents_ok(name, list(map(attrgetter(name), events))))
    return suspects


def _shapes(value: Any) -> dict[str, list[int | str]]:
    """Input shapes as names and lists of sizes (a size neither an int nor a str: "?")."""
    if not isinstance(value, dict):
        return {}
    if all(type(k) is str and type(d) is list and _only(d, int, str) for k, d in value.items()):
        return value
    return {text_of(name): [d if type(d) in (int, str) else "?" for d in dims]
            if isinstance(dims, (list, tuple)) else ["?"] for name, dims in value.items()}


def _lookups(value: Any) -> list[dict[str, str | None]]:
    """Cache lookups as objects of texts (None kept); what is no object is left out."""
    if type(value) is list and all(type(lk) is dict and all(
            type(k) is str and (v is None or type(v) is str) for k, v in lk.items()) for lk in value):
        return value
    if not isinstance(value, (list, tuple)):
        return []
    return [{text_of(k): v if v is None or type(v) is str else text_of(v) for k, v in lk.items()}
            for lk in value if isinstance(lk, dict)]


def _reasons(value: Any) -> list[str]:
    if type(value) is list and _only(value, str):
        return value
    if isinstance(value, (list, tuple)):
        return [text_of(r) for r in value]
    return [text_of(value)] if value not in (None, "") else []


def _ops(value: Any) -> dict[str, int]:
    if not isinstance(value, dict):
        return {}
    if _only(value, str) and _only(value.values(), int):
        return value
    return {text_of(op): n if type(n) is int else 0 for op, n in value.items()}


_CONTAINERS: dict[str, Callable[[Any], Any]] = {
    "input_shapes": _shapes, "reasons": _reasons, "ops": _ops,
    "forecast": lambda v: v if type(v) is bool else v is True,
    "metrics": lambda v: v if isinstance(v, dict) else {},
    "cache_key": _lookups,
    "neff_cache": lambda v: v if v is None or type(v) is str else text_of(v)}


def _read(name: str, value: Any, start: float) -> Any:
    """What a view reads in field ``name`` holding ``value``: ``value`` itself where it can."""
    if name in NUMBER_FIELDS:
        n = number(value)
        if n is not None or name == "neff_compile_s":
            return n
        return start if name == "started_at" else NUMBER_FIELDS[name]
    return text_of(value) if name in TEXT_FIELDS else _CONTAINERS[name](value)


def readable(events: Iterable[CompileEvent], contents: bool = False) -> list[CompileEvent]:
    """The events as views read them: an event whose fields hold what a recorder writes there
    is itself; any other is a copy holding what can be read of it (the recorded event is not
    changed). A number field holding no number (:func:`number`) holds its default (0; None for
    ``neff_compile_s``; the earliest start for ``started_at``), a text field :func:`text_of`, a
    container what has its type. ``contents``: also what reasons, shapes and ops hold (a size
    neither an int nor a str: "?"), as ``diagnose`` needs; a log of 100k events costs a pass
    of about 50 ms, or twice that with ``contents``."""
    events = events if isinstance(events, list) else list(events)
    suspects = _suspects(events, contents) if events else set()
    if not suspects:
        return events       # the list given, when it is one
    starts = [n for n in map(number, map(attrgetter("started_at"), events)) if n is not None]
    start = min(starts, default=0.0)
    out = []
    for e in events:
        changed = {name: new for name in suspects
                   if (new := _read(name, old := getattr(e, name), start)) is not old}
        out.append(dataclasses.replace(e, **changed) if changed else e)
    return out


NEURONX_FIELD = "torch_neuronx"  # the header field of torch-neuronx's version (a string)


def synthetic_reason(header: Any) -> str:
    """Why a log's events are no measurement ("" when nothing says so): its header's
    ``synthetic`` is true, or its ``torch_neuronx`` names neuronkit's test fake (the fake
    reports the real snapshot's version, 0.1.0, so only a header that says "fake" tells)."""
    if not isinstance(header, dict):
        return ""
    reasons = []
    flag = header.get("synthetic")
    if flag is True or (isinstance(flag, str) and flag.strip().lower() in ("true", "yes")):
        reasons.append('the header says "synthetic": true')
    neuronx = header.get(NEURONX_FIELD)
    if isinstance(neuronx, str) and ("neuron_fake" in neuronx
                                     or neuronx.strip().lower().startswith("fake")):
        reasons.append("torch_neuronx is neuronkit's test fake")
    return "; ".join(reasons)


def is_synthetic(header: Any) -> bool:
    """Whether a log's header says its events are no measurement (:func:`synthetic_reason`)."""
    return bool(synthetic_reason(header))
