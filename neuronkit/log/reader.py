"""Reading a compile log file: every line checked against the schema, bad ones skipped and named.

A log is untrusted input (logs travel between machines and people). Each line must be the header,
an event (``REQUIRED`` fields, each field's JSON type, ``kind`` in ``KINDS``, counts >= 0, finite
seconds), an update line or a wall-time line; what fails is skipped with one warning per file that
names the line and the field, and every good line is kept.

Speed: a file is read 4 MB at a time; the event lines neuronkit writes are decoded and checked
against the schema together, in C (msgspec); only a block with a doubt in it is read line by
line, which names what is wrong.
"""
from __future__ import annotations

import json
import math
import warnings
from itertools import chain, compress, starmap
from operator import attrgetter
from pathlib import Path
from typing import Annotated, Any, Literal

import msgspec

from neuronkit.log.gc_pause import paused_gc
from neuronkit.events.event import (_FIELDS, FORMAT, FORMAT_VERSION, KINDS, NEFF_CACHE_STATES, REQUIRED,
                                    UPDATABLE, CompileEvent, EventKind, LogFolderError, LogFormatError)

__all__ = ["explain_event", "read_log"]


def read_log(path: Path) -> tuple[dict[str, Any], list[CompileEvent], float | None]:
    """The header, the good events (update lines applied) and the wall time of a log file;
    one warning names the lines skipped."""
    if path.is_dir():
        raise LogFolderError(f"{path} is a folder, not a compile log: pass a .jsonl file "
                             "(per-rank logs in a folder: nk.merge_logs(folder))")
    if not path.is_file():
        raise FileNotFoundError(f"compile log not found: {path}")
    reader = _Reader(path)
    with paused_gc(keep=True), open(path, "rb") as fh:
        header = reader.header(fh.readline())
        number, tail = 2, b""
        while block := fh.read(_BLOCK):
            block = tail + block
            cut = block.rfind(b"\n")
            if cut < 0:  # one line longer than a block: read on
                tail = block
                continue
            tail = block[cut + 1:]
            reader.lines(number, block[:cut])
            number += block.count(b"\n", 0, cut) + 1
        if tail:
            reader.line(number, tail, terminated=False)
    return header, reader.events, reader.finish()


_NUMBER = (int, float)
_TYPES: dict[str, tuple[type, ...]] = {  # the JSON types of each field (bool is not an int here)
    "seq": (int,), "compile_id": (str,), "function": (str,), "location": (str,), "backend": (str,),
    "device": (str,), "started_at": _NUMBER, "duration_s": _NUMBER, "input_shapes": (dict,),
    "changed": (str,), "reasons": (list,), "kind": (str,), "graph_count": (int,), "rank": (int,),
    "context": (str,), "metrics": (dict,), "calls": (int,), "neff_compile_s": (int, float, type(None)),
    "neff_cache": (str, type(None)), "kernels": (int,), "ops": (dict,), "forecast": (bool,)}
_WORDS = {(int,): "an integer", _NUMBER: "a number", (str,): "a string", (dict,): "an object",
          (list,): "a list", (bool,): "true or false", (int, float, type(None)): "a number or null",
          (str, type(None)): "a string or null"}
_COUNTS = ("seq", "graph_count", "rank", "calls", "kernels")  # integers >= 0
_KIND_SET = frozenset(KINDS)
_CACHE_SET = frozenset(NEFF_CACHE_STATES)
_EMPTY: dict[str, Any] = {}
_DIM_TYPES = frozenset((int, str))
_STR_TYPE = frozenset((str,))
_LIST_TYPE = frozenset((list,))
_INF = math.inf
_SHOWN = 10  # bad lines named in the warning; the rest are counted
_BLOCK = 4 << 20  # bytes read (and lines parsed) at a time



_EVENT_START = b'{"seq": '  # how neuronkit writes an event line (json.dumps of its fields)
_Count = Annotated[int, msgspec.Meta(ge=0)]
_Seconds = Annotated[float, msgspec.Meta(ge=0)]


class _Event(msgspec.Struct, kw_only=True):
    """An event line's schema (``CompileEvent``'s fields, in its order), checked in C: JSON
    types (a bool is not an int), ``kind`` and ``neff_cache`` in their sets, counts and seconds
    >= 0, ``seq`` and ``function`` required. JSON has no NaN or infinity to check for."""

    seq: _Count
    compile_id: str = ""
    function: str
    location: str = ""
    backend: str = ""
    device: str = ""
    started_at: float = 0.0
    duration_s: _Seconds = 0.0
    input_shapes: dict[str, list[int | str]] = {}
    changed: str = ""
    reasons: list[str] = []
    kind: EventKind = "first"
    graph_count: _Count = 0
    rank: _Count = 0
    context: str = ""
    metrics: dict[str, Any] = {}
    calls: _Count = 0
    neff_compile_s: _Seconds | None = None
    neff_cache: Literal["compiled", "disk_hit", "memory_hit"] | None = None
    kernels: _Count = 0
    ops: dict[str, _Count] = {}
    forecast: bool = False


_EVENTS = msgspec.json.Decoder(list[_Event])
_ALL_FIELDS = attrgetter(*_FIELDS)


def _show(value: Any) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:39] + "…"


def _seconds_problem(name: str, value: Any, nullable: bool = False) -> str | None:
    if (value is None and nullable) or 0 <= value < _INF:
        return None
    return f"{name}: expected seconds (a finite number >= 0), got {_show(value)}"


def _event_problem(data: dict[str, Any], checked: set[tuple]) -> str | None:
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
    if (get("kind", "first") in _KIND_SET and data["seq"] >= 0 and get("rank", 0) >= 0
            and get("graph_count", 0) >= 0 and get("calls", 0) >= 0 and get("kernels", 0) >= 0
            and -_INF < get("started_at", 0) < _INF and 0 <= get("duration_s", 0) < _INF
            and (neff is None or 0 <= neff < _INF) and (cache is None or cache in _CACHE_SET)
            and _LIST_TYPE.issuperset(map(type, dims))
            and _DIM_TYPES.issuperset(map(type, chain.from_iterable(dims)))
            and _STR_TYPE.issuperset(map(type, get("reasons", ())))
            and (not get("ops") or all(type(n) is int and n >= 0 for n in data["ops"].values()))):
        return None
    return explain_event(data)


def explain_event(data: dict[str, Any]) -> str | None:
    """The first thing wrong with an event line, field by field (None: nothing)."""
    missing = [name for name in REQUIRED if name not in data]
    if missing:
        return "missing " + ", ".join(missing)
    for name, value in data.items():
        allowed = _TYPES.get(name)
        if allowed is not None and type(value) not in allowed:
            return f"{name}: expected {_WORDS[allowed]}, got {_show(value)}"
    if data.get("kind", "first") not in _KIND_SET:
        return f"kind: expected one of {', '.join(KINDS)}, got {_show(data['kind'])}"
    for name in _COUNTS:
        if data.get(name, 0) < 0:
            return f"{name}: expected an integer >= 0, got {data[name]!r}"
    if not -_INF < data.get("started_at", 0) < _INF:
        return f"started_at: expected a finite time, got {data['started_at']!r}"
    problem = (_seconds_problem("duration_s", data.get("duration_s", 0))
               or _seconds_problem("neff_compile_s", data.get("neff_compile_s"), nullable=True))
    if problem:
        return problem
    cache = data.get("neff_cache")
    if cache is not None and cache not in _CACHE_SET:
        return f"neff_cache: expected one of {', '.join(NEFF_CACHE_STATES)} or null, got {_show(cache)}"
    for name, dims in data.get("input_shapes", {}).items():
        if type(dims) is not list or not _DIM_TYPES.issuperset(map(type, dims)):
            return f"input_shapes: {name!r} expected a list of sizes, got {_show(dims)}"
    if not _STR_TYPE.issuperset(map(type, data.get("reasons", ()))):
        return f"reasons: expected a list of strings, got {_show(data['reasons'])}"
    for op, n in data.get("ops", {}).items():
        if type(n) is not int or n < 0:
            return f"ops: {op!r} expected an integer >= 0, got {_show(n)}"
    return None


def _update_problem(data: dict[str, Any]) -> str | None:
    seq = data["update"]
    if type(seq) is not int or seq < 0:
        return f"update: expected an event's seq (an integer >= 0), got {_show(seq)}"
    for name in data:
        if name != "update" and name not in UPDATABLE:
            return f"{name}: an update line may set only {', '.join(UPDATABLE)}"
    if type(data.get("neff_compile_s")) not in (int, float, type(None)):
        return f"neff_compile_s: expected a number or null, got {_show(data['neff_compile_s'])}"
    cache = data.get("neff_cache")
    if cache is not None and cache not in _CACHE_SET:
        return f"neff_cache: expected one of {', '.join(NEFF_CACHE_STATES)} or null, got {_show(cache)}"
    return _seconds_problem("neff_compile_s", data.get("neff_compile_s"), nullable=True)


def _wall_problem(value: Any) -> str | None:
    if type(value) not in _NUMBER:
        return f"wall_time_s: expected a number, got {_show(value)}"
    return _seconds_problem("wall_time_s", value)


class _Reader:
    """Reads one log file line by line: the header, events, update and wall-time lines; keeps
    the good lines and notes the bad ones for one warning."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.events: list[CompileEvent] = []
        self.updates: list[tuple[int, dict[str, Any]]] = []
        self.wall_time_s: float | None = None
        self.bad: list[tuple[int, str]] = []
        self.replaced: list[int] = []  # lines with invalid UTF-8, read with U+FFFD
        self._checked: set[tuple] = set()
        self._strings: dict[str, str] = {}  # one copy of each repeated name, place and label

    def _text(self, number: int, raw: bytes) -> str:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            self.replaced.append(number)
            return raw.decode("utf-8", errors="replace")

    def header(self, raw: bytes) -> dict[str, Any]:
        path = self.path
        if not raw:
            raise LogFormatError(f"{path} is empty: not a neuronkit compile log")
        try:
            header = json.loads(self._text(1, raw))
        except json.JSONDecodeError as exc:
            raise LogFormatError(f"{path} does not start with a neuronkit header line: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise LogFormatError(
                f"{path} is not a neuronkit compile log (first line has no "
                f"\"format\": \"{FORMAT}\"); write logs with neuronkit.CompileRecorder(log_path=...)")
        expected = f"(neuronkit writes \"version\": {FORMAT_VERSION} on the first line)"
        if "version" not in header:
            raise LogFormatError(f"{path}: its header line has no \"version\": a damaged header, "
                                 f"not a log neuronkit can read {expected}")
        version = header["version"]
        if type(version) is not int or version < 1:
            raise LogFormatError(f"{path}: its header names log format version {version!r}, not a "
                                 f"version number: a damaged header {expected}")
        if version > FORMAT_VERSION:
            raise LogFormatError(
                f"{path} uses log format version {version!r}; this neuronkit reads up to "
                f"{FORMAT_VERSION}. Upgrade neuronkit (pip install -U neuronkit) to read it.")
        if "wall_time_s" in header:
            problem = _wall_problem(header["wall_time_s"])
            if problem:
                self.bad.append((1, f"header {problem}"))
                del header["wall_time_s"]
            else:
                self.wall_time_s = header["wall_time_s"]
        ranks = header.get("ranks", [])
        if type(ranks) is not list or any(type(r) is not int or r < 0 for r in ranks):
            self.bad.append((1, f"header ranks: expected a list of ranks, got {_show(ranks)}"))
            del header["ranks"]
        return header

    def lines(self, first: int, text: bytes) -> None:
        """Whole lines from ``first`` (``text``: them without the last newline). The event lines
        neuronkit writes are decoded and checked against the schema together (:class:`_Event`);
        update and wall-time lines one by one. Any doubt (an event line that fails, a count that
        does not match, an event in another layout) and every line is read on its own, which
        names what is wrong."""
        rows = text.split(b"\n")
        is_event = [row.startswith(_EVENT_START) and row.endswith(b"}") for row in rows]
        others = [k for k, event in enumerate(is_event) if not event]
        events: list[_Event] | None = None
        if not any(b'"seq"' in rows[k] for k in others):  # else events would change order
            try:
                events = _EVENTS.decode(b"[" + b",".join(compress(rows, is_event)) + b"]")
            except (msgspec.ValidationError, msgspec.DecodeError):
                events = None
        if events is None or len(events) != len(rows) - len(others):
            for number, raw in enumerate(rows, start=first):
                self.line(number, raw)
            return
        self.events.extend(starmap(CompileEvent, map(_ALL_FIELDS, events)))
        for k in others:
            self.line(first + k, rows[k])

    def line(self, number: int, raw: bytes, terminated: bool = True) -> None:
        text = self._text(number, raw)
        if not text or text.isspace():
            return
        try:
            data = json.loads(text)
        except json.JSONDecodeError as exc:
            if not terminated:
                self.bad.append((number, "truncated last line: the writer stopped mid-line"))
            else:
                self.bad.append((number, f"not JSON: {exc.msg} at column {exc.colno}"))
            return
        if type(data) is not dict:
            self.bad.append((number, f"expected a JSON object, got {type(data).__name__}"))
            return
        self.item(number, data)

    def item(self, number: int, data: dict[str, Any]) -> None:
        """One line's object: an event, an update or a wall time, kept if it fits the schema."""
        if "seq" not in data:
            if "update" in data:
                problem = _update_problem(data)
                if problem is None:
                    self.updates.append((number, data))
                    return
            elif "wall_time_s" in data:
                problem = _wall_problem(data["wall_time_s"])
                if problem is None:
                    self.wall_time_s = data["wall_time_s"]
                    return
            elif "format" in data:
                problem = "a second header line: two writers shared this file"
            else:
                problem = _event_problem(data, self._checked)
            self.bad.append((number, problem or "not an event, update or wall-time line"))
            return
        problem = _event_problem(data, self._checked)
        if problem is not None:
            self.bad.append((number, problem))
            return
        strings = self._strings  # one copy of each name, place and label a long log repeats
        for name in ("function", "location", "backend", "device", "kind", "context"):
            if name in data:
                value = data[name]
                data[name] = strings.setdefault(value, value)
        self.events.append(CompileEvent.from_dict(data))

    def finish(self) -> float | None:
        """Apply the update lines, say what was skipped (one warning), return the wall time."""
        by_seq = {e.seq: e for e in self.events}
        for number, data in self.updates:
            target = by_seq.get(data["update"])
            if target is None:
                self.bad.append((number, f"updates event {data['update']}, which the log does "
                                 "not hold"))
                continue
            for name in UPDATABLE:
                if name in data:
                    setattr(target, name, data[name])
        notes = []
        if self.bad:
            self.bad.sort()
            shown = ", ".join(f"line {n} ({why})" for n, why in self.bad[:_SHOWN])
            more = f", and {len(self.bad) - _SHOWN} more" if len(self.bad) > _SHOWN else ""
            notes.append(f"skipped {len(self.bad)} bad line{'s' if len(self.bad) > 1 else ''}: "
                         f"{shown}{more}")
        if self.replaced:
            lines = ", ".join(str(n) for n in self.replaced[:_SHOWN])
            more = f" and {len(self.replaced) - _SHOWN} more" if len(self.replaced) > _SHOWN else ""
            notes.append(f"invalid UTF-8 read as U+FFFD on line {lines}{more}")
        if notes:
            warnings.warn(f"{self.path}: " + "; ".join(notes) + f"; kept {len(self.events)} "
                          "events", stacklevel=4)
        return self.wall_time_s


