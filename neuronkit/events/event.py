"""Compile events and the append-only JSONL log that holds them.

A log file is one header line followed by one JSON object per event, and update lines:

    {"format": "neuronkit-compile-log", "version": 2, "neuronkit": ..., "torch": ..., ...}
    {"seq": 0, "compile_id": "0/0", "function": "forward", ...}
    {"update": 0, "neff_compile_s": 94.2, "neff_cache": "compiled"}

Each event is written and flushed as it happens, so a crash loses nothing recorded. What is only
known later (the NEFF build of a graph on Neuron finishes after Dynamo's compile returns) arrives
as an update line naming the event's ``seq``; a crash before it loses only that value. Version 1
logs (no update lines, no Neuron fields) load unchanged.

A log file is untrusted input: :meth:`CompileLog.load` checks every line against the schema
(``REQUIRED`` fields, each field's type, ``kind`` in ``KINDS``, counts >= 0, finite seconds) and
skips what fails with one warning per file, keeping every good line.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
from collections import defaultdict
from operator import attrgetter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

import msgspec

__all__ = ["CompileEvent", "CompileLog", "EventKind", "FORMAT", "FORMAT_VERSION", "GRAPH_KINDS",
           "KINDS", "NEFF_CACHE_STATES", "REQUIRED", "UPDATABLE", "LogFolderError",
           "LogFormatError", "as_events",
           "compile_seconds", "function_labels", "graphs", "neff_seconds", "of_kind", "shape_key",
           "short_label", "total_seconds"]

FORMAT = "neuronkit-compile-log"
FORMAT_VERSION = 2  # 2: update lines, kinds "kernels" and "graph_break", neff_* / kernels / ops

EventKind = Literal["first", "recompile", "limit_hit", "failed", "eager_fallback", "kernels",
                   "graph_break"]
KINDS: tuple[str, ...] = ("first", "recompile", "limit_hit", "failed", "eager_fallback", "kernels",
                          "graph_break")
GRAPH_KINDS: tuple[str, ...] = ("first", "recompile")  # the kinds that build a graph
# where a graph's NEFF came from on Neuron: built by neuronx-cc, the disk cache, the in-memory cache
NEFF_CACHE_STATES: tuple[str, ...] = ("compiled", "disk_hit", "memory_hit")
UPDATABLE: tuple[str, ...] = ("neff_compile_s", "neff_cache")  # fields an update line may set
# what an event line must name to be an event (a ``{}`` line once became a graph at t=0); the
# other fields take their defaults, as in version 1 lines written without the newer ones
REQUIRED: tuple[str, ...] = ("seq", "function")


class LogFormatError(ValueError):
    """The file is not a neuronkit compile log, or was written by a newer neuronkit."""


class LogFolderError(IsADirectoryError, LogFormatError):
    """A folder was given where a compile log file belongs."""


@dataclass(slots=True)
class CompileEvent:
    """One Dynamo compile (or a refused one: ``limit_hit``) seen by the recorder, or calls torch
    ran uncompiled after a limit hit (``eager_fallback``: ``calls`` of them, counted by the
    neuronkit workload that made them; torch records nothing for them), or the eager-op kernels
    compiled since the last safe point (``kernels``: ``kernels`` new ones, ``ops`` per op name;
    ``forecast`` when counted on a machine without Neuron, as what Neuron would compile).

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

    @property
    def total_s(self) -> float:
        """Dynamo's seconds plus the NEFF build's (unless it already lies inside Dynamo's)."""
        neff = 0.0 if self.metrics.get("neff_in_duration") else float(self.neff_compile_s or 0.0)
        return float(self.duration_s or 0.0) + neff

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompileEvent":
        """An event from a dict, unknown keys ignored (no checks: :meth:`CompileLog.load` checks)."""
        if len(data) == len(_FIELDS) and data.keys() == _FIELD_SET:  # what to_dict() wrote
            return cls(*map(data.__getitem__, _FIELDS))  # positional: no keyword matching
        return cls(**{k: v for k, v in data.items() if k in _FIELD_SET})


_FIELDS: tuple[str, ...] = tuple(f.name for f in dataclasses.fields(CompileEvent))
_FIELD_SET = frozenset(_FIELDS)


def _row(event: CompileEvent) -> dict[str, Any]:
    """An event as the dict of its fields, uncopied (to write it; ``to_dict`` copies deeply)."""
    return {name: getattr(event, name) for name in _FIELDS}


def graphs(events: Iterable[CompileEvent]) -> int:
    """How many of the events built a graph (first compiles and recompiles)."""
    return sum(1 for e in events if e.kind in GRAPH_KINDS)


def compile_seconds(events: Iterable[CompileEvent]) -> float:
    """The compile seconds of the events (Dynamo's ``duration_s``)."""
    return sum(float(e.duration_s or 0.0) for e in events)


def neff_seconds(events: Iterable[CompileEvent]) -> float:
    """The NEFF build seconds of the events (0 where unresolved or not Neuron)."""
    built = [e for e in events if e.neff_compile_s]
    return sum(float(e.neff_compile_s or 0.0) for e in built
               if not e.metrics.get("neff_in_duration"))


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


def as_events(log_or_events: "CompileLog | Iterable[CompileEvent]") -> list[CompileEvent]:
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


class CompileLog:
    """An ordered list of compile events, optionally mirrored to a JSONL file."""

    def __init__(self, events: Iterable[CompileEvent] = (), header: dict[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None) -> None:
        self.events: list[CompileEvent] = list(events)
        self.header: dict[str, Any] = dict(header) if header else {"format": FORMAT,
                                                                   "version": FORMAT_VERSION}
        self.path: Path | None = Path(path) if path is not None else None
        self.wall_time_s: float | None = self.header.get("wall_time_s")
        self._lock = threading.Lock()
        self._torn = False  # a write failed, maybe mid-line: the next line starts on a new one
        if self.path is not None:
            self._write_all()

    # -- writing -----------------------------------------------------------------
    def append(self, event: CompileEvent) -> CompileEvent:
        """Add an event (its ``seq`` is set here) and flush it to the file, if any. The event is
        in memory before the write: if the write fails (OSError), it is still in the log."""
        with self._lock:
            event.seq = len(self.events)
            self.events.append(event)
            if self.path is not None:
                self._append_line(json.dumps(_row(event), default=str))
        return event

    def update(self, seq: int, **fields: Any) -> CompileEvent:
        """Set fields known only after an event was written (``UPDATABLE``: the NEFF build time
        and cache state on Neuron); the file gets an update line, flushed."""
        unknown = sorted(set(fields) - set(UPDATABLE))
        if unknown:
            raise ValueError(f"an update may set only {UPDATABLE}, not {unknown}")
        with self._lock:
            event = self.events[seq] if 0 <= seq < len(self.events) else None
            if event is None or event.seq != seq:  # a list built by hand: look for it
                event = next((e for e in self.events if e.seq == seq), None)
            if event is None:
                raise KeyError(f"no event with seq {seq} in this log")
            for name, value in fields.items():
                setattr(event, name, value)
            if self.path is not None:
                self._append_line(json.dumps({"update": seq, **fields}, default=str))
        return event

    def set_wall_time(self, seconds: float) -> None:
        """Set the active wall time; the file gets a ``{"wall_time_s": ...}`` line (last one wins)."""
        with self._lock:
            self.wall_time_s = float(seconds)
            if self.path is not None:
                self._append_line(json.dumps({"wall_time_s": self.wall_time_s}), sync=False)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the whole log (header + events) to ``path``; later appends go there too."""
        self.path = Path(path)
        self._write_all()
        return self.path

    def _append_line(self, line: str, sync: bool = True) -> None:
        """One line at the end of the file, in one write (O_APPEND: never inside another
        writer's line); a file that went away is written again whole, never without a header."""
        assert self.path is not None
        data = (("\n" if self._torn else "") + line + "\n").encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            self._write_all()  # deleted (or moved) under us: header + every event, this one too
            return
        self._torn = True
        try:
            view = memoryview(data)
            while view:
                view = view[os.write(fd, view):]
            if sync:
                os.fsync(fd)
        finally:
            os.close(fd)
        self._torn = False

    def _write_all(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = dict(self.header)
        if self.wall_time_s is not None:
            header["wall_time_s"] = self.wall_time_s
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(header, default=str) + "\n")
            for event in self.events:
                fh.write(json.dumps(_row(event), default=str) + "\n")
            fh.flush()
        self._torn = False

    # -- reading -----------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "CompileLog":
        """Read a log. Lines that fail the schema (not JSON, a wrong type, a missing field, a
        truncated last line from a crash mid-write) are skipped with one warning naming them."""
        from neuronkit.log.reader import read_log  # the schema checks live there

        path = Path(path)
        header, events, wall_time_s = read_log(path)
        log = cls(events, header=header)
        log.path = path
        log.wall_time_s = wall_time_s
        return log

    @classmethod
    def from_torch_trace(cls, folder: str | os.PathLike[str]) -> "CompileLog":
        """Read the trace files torch writes under ``TORCH_TRACE=folder`` (see
        :mod:`neuronkit.sources.trace_import`); bad lines are skipped with one warning per file."""
        from neuronkit.sources.trace_import import read_torch_trace

        return read_torch_trace(folder)

    # -- views -------------------------------------------------------------------
    def __len__(self) -> int:
        return len(self.events)

    def __iter__(self):
        return iter(list(self.events))

    def __repr__(self) -> str:
        return f"CompileLog({len(self.events)} events, path={str(self.path) if self.path else None!r})"

    @property
    def total_compile_s(self) -> float:
        """Dynamo's compile seconds (``duration_s``) of every event."""
        return compile_seconds(self.events)

    @property
    def total_neff_s(self) -> float:
        """NEFF build seconds resolved so far (Neuron only)."""
        return neff_seconds(self.events)

    def compile_share(self, events: Iterable[CompileEvent] | None = None) -> float | None:
        """Compile seconds / wall time, per rank: the most any one rank spent compiling.

        Ranks compile side by side, so in a merged log the share is that of the rank that
        compiled longest (never the ranks' sum over one rank's wall time). ``events`` limits
        it to some events (one function); None when the wall time is unknown.
        """
        if not self.wall_time_s:
            return None
        per_rank: dict[int, float] = defaultdict(float)
        for e in self.events if events is None else events:
            per_rank[e.rank] += e.total_s
        return max(per_rank.values(), default=0.0) / self.wall_time_s

    def graph_counts(self) -> dict[str, int]:
        """Graphs built per function, over all ranks (limit hits and failures build none).

        Keys are :func:`function_labels`: the name, with its place when names repeat.
        """
        labels = function_labels(self.events)
        counts: dict[str, int] = defaultdict(int)
        for e in self.events:
            if e.kind in GRAPH_KINDS:
                counts[labels[e.function, e.location]] += 1
        return dict(counts)

    def summary(self, shapes: bool = True) -> list[dict[str, Any]]:
        """Per function: graphs, shapes, limit hits, failures, eager calls after a limit hit,
        eager kernels, Dynamo and NEFF compile s, mean s, share of wall (of both).

        Counts and seconds add up all ranks; ``share_of_wall`` is per rank (see
        :meth:`compile_share`). ``function`` is the :func:`function_labels` label.
        ``shapes=False`` skips the distinct input shapes (``distinct_shapes`` is None), the
        costliest count, for a view that does not show it.
        """
        labels = function_labels(self.events)
        rows: dict[tuple[str, str], dict[str, Any]] = {}
        seen: dict[tuple[str, str], set[str]] = {}
        per_rank: dict[tuple[str, str], dict[int, float]] = {}
        for e in self.events:
            key = (e.function, e.location)
            row = rows.get(key)
            if row is None:
                row = rows[key] = {"function": labels[key], "location": e.location, "graphs": 0,
                                   "limit_hits": 0, "failed": 0, "graph_breaks": 0,
                                   "eager_calls": 0, "kernels": 0, "compile_s": 0.0,
                                   "neff_s": 0.0}
                seen[key], per_rank[key] = set(), defaultdict(float)
            kind = e.kind
            if kind in GRAPH_KINDS:
                row["graphs"] += 1
            elif kind == "limit_hit":
                row["limit_hits"] += 1
            elif kind == "eager_fallback":
                row["eager_calls"] += e.calls
            elif kind == "kernels":
                row["kernels"] += e.kernels
            elif kind == "graph_break":
                row["graph_breaks"] += 1
            else:
                row["failed"] += 1
            seconds = e.duration_s
            row["compile_s"] += seconds
            if e.neff_compile_s and not e.metrics.get("neff_in_duration"):
                row["neff_s"] += e.neff_compile_s
                seconds += e.neff_compile_s
            if shapes and kind != "graph_break":  # a resumed break has no shapes of its own
                seen[key].add(shape_key(e))
            per_rank[key][e.rank] += seconds
        for key, row in rows.items():
            row["distinct_shapes"] = len(seen[key]) if shapes else None
            n = row["graphs"] + row["failed"]
            row["mean_s"] = row["compile_s"] / n if n else 0.0
            row["share_of_wall"] = (max(per_rank[key].values()) / self.wall_time_s
                                    if self.wall_time_s else None)
        return list(rows.values())

    @classmethod
    def merge(cls, logs: Iterable["CompileLog"]) -> "CompileLog":
        """One log from several (e.g. one per rank), ordered by start time."""
        logs = list(logs)
        events = sorted((dataclasses.replace(e) for log in logs for e in log.events),
                        key=lambda e: (e.started_at, e.rank))
        for seq, e in enumerate(events):
            e.seq = seq
        header = dict(logs[0].header) if logs else {"format": FORMAT, "version": FORMAT_VERSION}
        header["ranks"] = sorted({e.rank for e in events})
        walls = [log.wall_time_s for log in logs if log.wall_time_s]
        if walls:
            header["wall_time_s"] = max(walls)
        return cls(events, header=header)
