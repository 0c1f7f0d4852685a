"""The log file format: its header's name and version, what an event line must hold, and the
checks that name what is wrong with a line (logs are untrusted input: they travel between
machines and people).

A log file is one header line, then one JSON object per event, and update lines:

    {"format": "neuronkit-compile-log", "version": 2, "neuronkit": ..., "torch": ..., ...}
    {"seq": 0, "compile_id": "0/0", "function": "forward", ...}
    {"update": 0, "neff_compile_s": 94.2, "neff_cache": "compiled"}

An event line needs ``REQUIRED`` fields, each field of its JSON type, ``kind`` in ``KINDS``,
and every number in range (past these bounds a number is damage, not a measurement, and no view
can show it): seconds (``duration_s``, ``neff_compile_s``, ``wall_time_s``) from 0 to
``MAX_SECONDS`` (1e9, 31 years); ``started_at`` within +-``MAX_TIME`` (1e10 s: epoch seconds up
to the year 2286, or any clock); counts (``seq``, ``rank``, ``graph_count``, ``calls``,
``kernels``, ``ops``) and input sizes from 0 to ``MAX_COUNT`` (2**53 - 1, the largest integer a
double, and so JSON in a browser, holds exactly); inside ``metrics`` lists and objects nested at
most ``MAX_DEPTH`` (8) deep, integers of 64 bits and finite numbers. Version 1 logs (no update
lines, no Neuron fields) still load.

A line that is no event (a field missing or of the wrong JSON type, an unknown ``kind``, a bad
``seq``) is skipped; a well-formed event with a value out of its bounds is kept with that value
dropped (:func:`repair_event`): one absurd number does not hide a compile.
"""
from __future__ import annotations

import math
from itertools import chain
from typing import TYPE_CHECKING, Annotated, Any, Literal, Optional, Union

import msgspec

from neuronkit.events.event import KINDS, NEFF_CACHE_STATES, UPDATABLE, EventKind

__all__ = ["EVENT_LINE_START", "FORMAT", "FORMAT_VERSION", "MAX_COUNT", "MAX_DEPTH", "MAX_SECONDS",
           "MAX_TIME", "REQUIRED", "EventLine", "LogFolderError", "LogFormatError", "LogWarning",
           "decode_event_lines", "event_problem", "explain_event", "repair_event", "show",
           "update_problem", "wall_problem", "clock_problem"]

FORMAT = "neuronkit-compile-log"
FORMAT_VERSION = 4  # 2: update lines, kinds "kernels" and "graph_break", neff_* / kernels / ops
# 3: kinds "backward" and "cpu_fallback"; 4: field cache_key and key_parts lines
# what an event line must name to be an event (a ``{}`` line once became a graph at t=0); the
# other fields take their defaults, as in version 1 lines written without the newer ones
REQUIRED: tuple[str, ...] = ("seq", "function")
MAX_SECONDS = 1e9  # durations and wall times: 31 years
MAX_TIME = 1e10  # |started_at|: epoch seconds up to the year 2286
MAX_COUNT = 2**53 - 1  # counts, ranks, seq, input sizes: exact in a double (JSON in a browser)
MAX_LOOKUPS = 64  # cache lookups of one build (two or three in practice)
MAX_DEPTH = 8  # lists and objects nested in a metrics value (the msgspec type grows 2x a level)
_METRIC_INT = 2**63  # integers in metrics: 64 bits, -2**63 <= n < 2**63


class LogFormatError(ValueError):
    """The file is not a neuronkit compile log, or was written by a newer neuronkit."""


class LogFolderError(IsADirectoryError, LogFormatError):
    """A folder was given where a compile log file belongs."""


class LogWarning(UserWarning):
    """A log read with lines skipped or values dropped (one per file): its message stands alone
    (it names the file), so a command line can print it without Python's source line."""


_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {  # the JSON types of each field (bool is not an int here)
    "seq": (int,), "compile_id": (str,), "function": (str,), "location": (str,), "backend": (str,),
    "device": (str,), "started_at": _NUMBER, "duration_s": _NUMBER, "input_shapes": (dict,),
    "changed": (str,), "reasons": (list,), "kind": (str,), "graph_count": (int,), "rank": (int,),
    "context": (str,), "metrics": (dict,), "calls": (int,), "neff_compile_s": (int, float, type(None)),
    "neff_cache": (str, type(None)), "kernels": (int,), "ops": (dict,), "forecast": (bool,),
    "cache_key": (list,)}
_WORDS = {(int,): "an integer", _NUMBER: "a number", (str,): "a string", (dict,): "an object",
          (list,): "a list", (bool,): "true or false", (int, float, type(None)): "a number or null",
          (str, type(None)): "a string or null"}
_COUNTS = ("seq", "graph_count", "rank", "calls", "kernels")  # integers 0..MAX_COUNT
_KIND_SET = frozenset(KINDS)
_CACHE_SET = frozenset(NEFF_CACHE_STATES)
_EMPTY: dict[str, Any] = {}
_STR_TYPE = frozenset((str,))
_LIST_TYPE = frozenset((list,))
_INF = math.inf


EVENT_LINE_START = b'{"seq": '  # how neuronkit writes an event line (json.dumps of its fields)
_Count = Annotated[int, msgspec.Meta(ge=0, le=MAX_COUNT)]
_Seconds = Annotated[float, msgspec.Meta(ge=0, le=MAX_SECONDS)]
_Time = Annotated[float, msgspec.Meta(ge=-MAX_TIME, le=MAX_TIME)]


def _nested(depth: int) -> Any:
    """The JSON values of a metric, nested at most ``depth`` deep, as a msgspec type."""
    leaf = Union[str, bool, None, float,
                 Annotated[int, msgspec.Meta(ge=-_METRIC_INT, le=_METRIC_INT - 1)]]
    value: Any = leaf
    for _ in range(depth):
        value = Union[leaf, list[value], dict[str, value]]
    return value


if TYPE_CHECKING:
    _Metrics = dict[str, Any]
else:
    _Metrics = dict[str, _nested(MAX_DEPTH)]


class EventLine(msgspec.Struct, kw_only=True):
    """An event line's schema (``CompileEvent``'s fields, in its order), checked in C: JSON
    types (a bool is not an int), ``kind`` and ``neff_cache`` in their sets, every number in
    its bounds, ``seq`` and ``function`` required. JSON has no NaN or infinity to check for."""

    seq: _Count
    compile_id: str = ""
    function: str
    location: str = ""
    backend: str = ""
    device: str = ""
    started_at: _Time = 0.0
    duration_s: _Seconds = 0.0
    input_shapes: dict[str, list[_Count | str]] = {}
    changed: str = ""
    reasons: list[str] = []
    kind: EventKind = "first"
    graph_count: _Count = 0
    rank: _Count = 0
    context: str = ""
    metrics: _Metrics = {}
    calls: _Count = 0
    neff_compile_s: _Seconds | None = None
    neff_cache: Literal["compiled", "disk_hit", "memory_hit"] | None = None
    kernels: _Count = 0
    ops: dict[str, _Count] = {}
    forecast: bool = False
    cache_key: list[dict[str, Optional[str]]] = []


_EVENT_LINES = msgspec.json.Decoder(list[EventLine])


def decode_event_lines(array: bytes) -> list[EventLine]:
    """Event lines joined as one JSON array, decoded and checked in C (msgspec errors raise)."""
    return _EVENT_LINES.decode(array)


def show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _seconds_problem(name: str, value: Any, nullable: bool = False) -> str | None:
    if (value is None and nullable) or 0 <= value <= MAX_SECONDS:
        return None
    if 0 <= value < _INF:
        return f"{name}: expected seconds <= {MAX_SECONDS:g} (31 years), got {show(value)}"
    return f"{name}: expected seconds (a finite number >= 0), got {show(value)}"


def _count_problem(name: str, value: int) -> str | None:
    """``name``: what the message starts with (``"seq:"``, ``"ops: 'aten::mm'"``)."""
    if value < 0:
        return f"{name} expected an integer >= 0, got {show(value)}"
    if value > MAX_COUNT:
        return f"{name} expected an integer <= {MAX_COUNT}, got {show(value)}"
    return None


def _metrics_problem(metrics: dict[str, Any]) -> str | None:
    """What is wrong inside ``metrics`` (None: nothing): lists and objects nested deeper than
    ``MAX_DEPTH``, an integer wider than 64 bits, a number that is not finite."""
    stack = [(value, MAX_DEPTH) for value in metrics.values()]
    while stack:
        value, depth = stack.pop()
        kind = type(value)
        if kind is dict or kind is list:
            if depth == 0:
                return f"metrics: nested deeper than {MAX_DEPTH} levels"
            stack.extend((v, depth - 1) for v in (value.values() if kind is dict else value))
        elif (kind is int and not -_METRIC_INT <= value < _METRIC_INT) or (
                kind is float and not -_INF < value < _INF):
            return ("metrics: a number out of range (integers of 64 bits, finite numbers), got "
                    f"{show(value)}")
    return None


def event_problem(data: dict[str, Any], checked: set[tuple]) -> str | None:
    """What is wrong with an event line, or None. ``checked``: the (keys, types) signatures seen
    well typed, so the usual line costs one set lookup and one expression; a line that fails
    them is looked at field by field (:func:`explain_event`) to name what is wrong."""
    signature = (tuple(data), tuple(map(type, data.values())))
    if signature not in checked:
        problem = explain_event(data)
        if problem is None and len(checked) < 512:  # untrusted input: the table stays small
            checked.add(signature)
        return problem
    get = data.get
    neff, cache = get("neff_compile_s"), get("neff_cache")
    dims = get("input_shapes", _EMPTY).values()
    counts = (data["seq"], get("rank", 0), get("graph_count", 0), get("calls", 0),
              get("kernels", 0))
    if (get("kind", "first") in _KIND_SET and 0 <= min(counts) and max(counts) <= MAX_COUNT
            and -MAX_TIME <= get("started_at", 0) <= MAX_TIME
            and 0 <= get("duration_s", 0) <= MAX_SECONDS
            and (neff is None or 0 <= neff <= MAX_SECONDS) and (cache is None or cache in _CACHE_SET)
            and _LIST_TYPE.issuperset(map(type, dims))
            and all(type(d) is str or (type(d) is int and 0 <= d <= MAX_COUNT)
                    for d in chain.from_iterable(dims))
            and _STR_TYPE.issuperset(map(type, get("reasons", ())))
            and (not get("ops") or all(type(n) is int and 0 <= n <= MAX_COUNT
                                       for n in data["ops"].values()))
            and (not get("metrics") or _metrics_problem(data["metrics"]) is None)
            and (not get("cache_key") or lookups_problem(data["cache_key"]) is None)):
        return None
    return explain_event(data)


def explain_event(data: dict[str, Any]) -> str | None:
    """The first thing wrong with an event line, field by field (None: nothing)."""
    problem = _form_problem(data)
    if problem is None:
        bad = _bad_values(dict(data))  # a copy: nested values are replaced, never changed
        problem = bad[0][1] if bad else None
    return problem


def repair_event(data: dict[str, Any]) -> tuple[str | None, list[tuple[str, str]]]:
    """An event line that failed :func:`event_problem`, looked at again: (what makes it no event,
    else None; its values out of bounds as (field, why), dropped from ``data``: a number reset
    to its field's default, a size to ``"?"``, an op count or a metric removed). The line is an
    event only when the repaired ``data`` passes every check."""
    problem = _form_problem(data)
    if problem is not None:
        return problem, []
    bad = _bad_values(data)
    return explain_event(data), bad


def _form_problem(data: dict[str, Any]) -> str | None:
    """What makes a line no event: a required field missing, a field of the wrong JSON type, an
    unknown kind, a bad ``seq`` (what update lines name), sizes, reasons or op counts of the
    wrong type (None: an event, whose values :func:`_bad_values` bounds)."""
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        return "missing " + ", ".join(missing)
    for name, value in data.items():
        allowed = _TYPES.get(name)
        if allowed is not None and type(value) not in allowed:
            return f"{name}: expected {_WORDS[allowed]}, got {show(value)}"
    if data.get("kind", "first") not in _KIND_SET:
        return f"kind: expected one of {', '.join(KINDS)}, got {show(data['kind'])}"
    problem = _count_problem("seq:", data["seq"])
    if problem:
        return problem
    for name, dims in data.get("input_shapes", {}).items():
        if type(dims) is not list or not all(type(d) is str or type(d) is int for d in dims):
            return f"input_shapes: {name!r} expected a list of sizes, got {show(dims)}"
    if not _STR_TYPE.issuperset(map(type, data.get("reasons", ()))):
        return f"reasons: expected a list of strings, got {show(data['reasons'])}"
    for op, n in data.get("ops", {}).items():
        if type(n) is not int:
            return f"ops: {op!r} expected an integer >= 0, got {show(n)}"
    return None


def lookups_problem(lookups: Any) -> str | None:
    """``cache_key``: a list of objects of strings (or null), at most ``MAX_LOOKUPS``."""
    if type(lookups) is not list or len(lookups) > MAX_LOOKUPS:
        return f"cache_key: expected a list of at most {MAX_LOOKUPS} lookups, got {show(lookups)}"
    for lookup in lookups:
        if type(lookup) is not dict or not all(type(v) is str or v is None for v in lookup.values()):
            return f"cache_key: expected objects of strings, got {show(lookup)}"
    return None


def _bad_values(data: dict[str, Any]) -> list[tuple[str, str]]:
    """The values of a well-formed event line (:func:`_form_problem`) out of their bounds, as
    (field, why); each is dropped from ``data`` (nested objects replaced, not changed)."""
    bad: list[tuple[str, str]] = []
    for name in _COUNTS[1:]:  # seq names the event: a bad one is no event
        problem = _count_problem(f"{name}:", data.get(name, 0))
        if problem:
            bad.append((name, problem))
            data[name] = 0
    start = data.get("started_at", 0)
    if not -MAX_TIME <= start <= MAX_TIME:  # NaN too
        bad.append(("started_at", f"started_at: expected a finite time, got {show(start)}"
                     if not -_INF < start < _INF else
                     f"started_at: expected a time within ±{MAX_TIME:g} s, got {show(start)}"))
        data["started_at"] = 0.0
    for name, nullable in (("duration_s", False), ("neff_compile_s", True)):
        problem = _seconds_problem(name, data.get(name), nullable) if name in data else None
        if problem:
            bad.append((name, problem))
            data[name] = None if nullable else 0.0
    cache = data.get("neff_cache")
    if cache is not None and cache not in _CACHE_SET:
        bad.append(("neff_cache", f"neff_cache: expected one of {', '.join(NEFF_CACHE_STATES)} or "
                                  f"null, got {show(cache)}"))
        data["neff_cache"] = None
    shapes = data.get("input_shapes", _EMPTY)
    if any(not _size_ok(d) for d in chain.from_iterable(shapes.values())):
        bad.extend(("input_shapes", f"input_shapes: {name!r} expected a list of sizes, got "
                                    f"{show(dims)}")
                   for name, dims in shapes.items() if not all(map(_size_ok, dims)))
        data["input_shapes"] = {name: [d if _size_ok(d) else "?" for d in dims]
                                for name, dims in shapes.items()}
    lookups = lookups_problem(data.get("cache_key", []))
    if lookups:
        bad.append(("cache_key", lookups))
        data["cache_key"] = []
    for name, check in (("ops", lambda op, n: _count_problem(f"ops: {op!r}", n)),
                        ("metrics", lambda key, value: _metrics_problem({key: value}))):
        items = data.get(name, _EMPTY)
        problems = {key: check(key, value) for key, value in items.items()}
        if any(problems.values()):
            bad.extend((name, why) for why in problems.values() if why)
            data[name] = {key: value for key, value in items.items() if not problems[key]}
    return bad


def _size_ok(dim: Any) -> bool:
    return type(dim) is str or 0 <= dim <= MAX_COUNT


def update_problem(data: dict[str, Any]) -> str | None:
    seq = data["update"]
    if type(seq) is not int or not 0 <= seq <= MAX_COUNT:
        return f"update: expected an event's seq (an integer >= 0), got {show(seq)}"
    for name in data:
        if name != "update" and name not in UPDATABLE:  # a key neuronkit does not know: quoted
            return (f"{name if name in _TYPES else show(name)}: an update line may set only "
                    f"{', '.join(UPDATABLE)}")
    if type(data.get("neff_compile_s")) not in (int, float, type(None)):
        return f"neff_compile_s: expected a number or null, got {show(data['neff_compile_s'])}"
    cache = data.get("neff_cache")
    if cache is not None and cache not in _CACHE_SET:
        return f"neff_cache: expected one of {', '.join(NEFF_CACHE_STATES)} or null, got {show(cache)}"
    if "cache_key" in data and lookups_problem(data["cache_key"]):
        return lookups_problem(data["cache_key"])
    return _seconds_problem("neff_compile_s", data.get("neff_compile_s"), nullable=True)


def clock_problem(value: Any) -> str | None:
    """A ``{"clock": {"barrier_at": t}}`` line: the wall time at a point every rank passed
    together (the first barrier after ``init_process_group``), to align hosts' clocks."""
    if type(value) is not dict or type(value.get("barrier_at")) not in _NUMBER:
        return f"clock: expected {{\"barrier_at\": <epoch seconds>}}, got {show(value)}"
    at = value["barrier_at"]
    if not -MAX_TIME <= at <= MAX_TIME:
        return f"clock barrier_at: expected epoch seconds, got {show(at)}"
    if any(type(v) not in (str, int, float) for v in value.values()):
        return "clock: expected numbers and names only"
    return None


def wall_problem(value: Any) -> str | None:
    if type(value) not in _NUMBER:
        return f"wall_time_s: expected a number, got {show(value)}"
    return _seconds_problem("wall_time_s", value)
