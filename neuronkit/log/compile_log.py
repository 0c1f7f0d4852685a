"""The compile log: an ordered list of events, mirrored to an append-only JSONL file.

Each event is written and flushed as it happens, so a crash loses nothing recorded. What is only
known later (the NEFF build of a graph on Neuron finishes after Dynamo's compile returns) arrives
as an update line naming the event's ``seq``; a crash before it loses only that value. The line
format is in ``events/schema.py``; :meth:`CompileLog.load` checks every line against it
(``reader.py``) and skips what fails with one warning per file, keeping every good line.
"""
from __future__ import annotations

import json
import os
import threading
from collections import defaultdict
from pathlib import Path
from typing import Any, Iterable

from neuronkit.events.event import GRAPH_KINDS, UPDATABLE, CompileEvent, fields_of
from neuronkit.events.facts import compile_seconds, function_labels, in_start_order, neff_seconds, shape_key
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.reader import read_log
from neuronkit.sources.trace_import import read_torch_trace

__all__ = ["CompileLog"]


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
                self._append_line(json.dumps(fields_of(event), default=str))
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
                fh.write(json.dumps(fields_of(event), default=str) + "\n")
            fh.flush()
        self._torn = False

    # -- reading -----------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "CompileLog":
        """Read a log. Lines that fail the schema (not JSON, a wrong type, a missing field, a
        truncated last line from a crash mid-write) are skipped with one warning naming them."""
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
        header, events = read_torch_trace(folder)
        return cls(events, header=header)

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
            neff = e.neff_s
            row["compile_s"] += e.duration_s
            row["neff_s"] += neff
            if shapes and kind != "graph_break":  # a resumed break has no shapes of its own
                seen[key].add(shape_key(e))
            per_rank[key][e.rank] += e.duration_s + neff
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
        events = in_start_order(log.events for log in logs)
        header = dict(logs[0].header) if logs else {"format": FORMAT, "version": FORMAT_VERSION}
        header["ranks"] = sorted({e.rank for e in events})
        walls = [log.wall_time_s for log in logs if log.wall_time_s]
        if walls:
            header["wall_time_s"] = max(walls)
        return cls(events, header=header)
