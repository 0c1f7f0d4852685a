"""The compile log: an ordered list of events, mirrored to an append-only JSONL file.

Each event is written and flushed as it happens, so a crash loses nothing recorded. What is only
known later (the NEFF build of a graph on Neuron finishes after Dynamo's compile returns) arrives
as an update line naming the event's ``seq``; a crash before it loses only that value. The line
format is in ``events/schema.py``; :meth:`CompileLog.load` checks every line against it
(``reader.py``) and skips what fails with one warning per file, keeping every good line (and every
event whose one value out of bounds it drops). A log whose writer never closed it (killed, or
still running) names its rank in ``header["unclosed_ranks"]``, as a merged log does.

One file, one writer (``file_lock.py``): a log holds the file it writes until :meth:`release`,
and another writer given it is refused. A save is written to a temp file beside the path, flushed
to disk and moved over the path in one step: a crash mid-save leaves the old file whole. A file
cut short by another program is written again whole at the next line.
"""
from __future__ import annotations

import contextlib
import json
import os
import stat
import threading
import uuid
from collections import defaultdict
from pathlib import Path
from typing import Any, Callable, Iterable, Mapping

from neuronkit.events.event import GRAPH_KINDS, UPDATABLE, CompileEvent, fields_of
from neuronkit.events.facts import compile_seconds, function_labels, in_start_order, neff_seconds, shape_key
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.file_lock import FileHold, Signature, lock_new, signature
from neuronkit.log.key_parts import KeyParts
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
        self.closed: bool | None = None  # read from a file: its writer stopped after its last line
        self.clock: dict[str, Any] | None = None  # {"barrier_at": t}: see set_clock
        self.key_parts = KeyParts()  # what each cache key its events name is made of
        self._lock = threading.Lock()
        self._torn = False  # a write failed, maybe mid-line: the next line starts on a new one
        self._hold: FileHold | None = None  # on the path this log writes (one file, one writer)
        self._size = 0  # the file's size as this log last wrote it: shorter later, it was cut
        self.writer: Callable[[], str] | None = None  # who writes it, said to a refused writer
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

    def set_clock(self, barrier_at: float, **about: str | int | float) -> None:
        """Note this host's wall time at a point every rank passed together (``barrier_at``), so
        that merged logs of hosts whose clocks disagree are aligned; the file gets a
        ``{"clock": ...}`` line."""
        clock = {"barrier_at": float(barrier_at), **about}
        with self._lock:
            self.clock = clock
            if self.path is not None:
                self._append_line(json.dumps({"clock": clock}))

    def add_key_parts(self, cache: str, key: str, parts: Mapping[str, tuple[str, str]]) -> None:
        """Keep what cache key ``key`` is made of (part name -> (digest, text)), once per key;
        the file gets a ``{"key_parts": ...}`` line with the texts it does not hold yet."""
        with self._lock:
            line = self.key_parts.add(cache, key, parts)
            if line is not None and self.path is not None:
                self._append_line(json.dumps({"key_parts": line}), sync=False)

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the whole log (header + events) to ``path`` in one step (a crash mid-save leaves
        the old file whole); the log holds ``path`` from now on and later appends go there too.
        Refused (``LogPathInUseError``) when another writer holds it; a failed save changes nothing."""
        with self._lock:
            old, self.path = self.path, Path(path)
            try:
                self._write_all()
            except BaseException:
                self.path = old
                raise
            return self.path

    def hold(self) -> None:
        """Hold the path now, before any write (a recorder holds its log from start to stop);
        ``LogPathInUseError`` when another writer holds it."""
        with self._lock:
            if self.path is not None:
                self._take(self._holding(self.path))

    def release(self) -> Signature:
        """Let the path go (another writer may take it; a later write here takes it again);
        returns the file's signature as left."""
        with self._lock:
            hold, self._hold = self._hold, None
        if hold is not None:
            return hold.release()
        return signature(self.path) if self.path is not None else None

    def describe_writer(self) -> str:
        """Who writes this log, as another writer refused its path is told."""
        if self.writer is not None:
            return self.writer()
        n = len(self.events)
        return (f"another CompileLog of this process ({n} event{'' if n == 1 else 's'}; "
                "log.release() lets it go)")

    def _holding(self, path: Path) -> FileHold:
        """This log's hold on ``path``: the one it has, else a new one (refused when another
        writer holds the path)."""
        if self._hold is not None and self._hold.holds(path):
            return self._hold
        return FileHold(path, self)

    def _take(self, hold: FileHold) -> None:
        if hold is not self._hold:
            if self._hold is not None:
                self._hold.release()
            self._hold = hold

    def _append_line(self, line: str, sync: bool = True) -> None:
        """One line at the end of the file, in one write (O_APPEND: never inside another
        writer's line); a file gone or cut short by another program is written again whole,
        never without a header."""
        assert self.path is not None
        self._take(self._holding(self.path))
        data = (("\n" if self._torn else "") + line + "\n").encode("utf-8")
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | getattr(os, "O_BINARY", 0))
        except FileNotFoundError:
            self._write_all()  # deleted (or moved) under us: header + every event, this one too
            return
        try:
            status = os.fstat(fd)
            if not stat.S_ISREG(status.st_mode):
                _refuse_special(self.path)
            size = status.st_size
            cut = size == 0 or size < self._size
            if not cut:
                self._torn = True
                view = memoryview(data)
                while view:
                    view = view[os.write(fd, view):]
                if sync:
                    os.fsync(fd)
                self._size = size + len(data)
        finally:
            os.close(fd)
        if cut:
            self._write_all()  # cut short under us: header + every event, this one too
        self._torn = False

    def _write_all(self) -> None:
        """Header + every event to a temp file beside the path, flushed to disk, then moved over
        the path in one step; the path held from then on (refused if another writer holds it)."""
        assert self.path is not None
        hold = self._holding(self.path)
        try:
            self._size = self._replace(hold)
        except BaseException:
            if hold is not self._hold:
                hold.release()
            raise
        self._take(hold)
        self._torn = False

    def _replace(self, hold: FileHold) -> int:
        """Write the file whole through a temp file (locked before it takes the old one's place);
        returns its size."""
        assert self.path is not None
        target = Path(os.path.realpath(self.path))  # a link's target is written, as before
        _refuse_special(target)
        target.parent.mkdir(parents=True, exist_ok=True)
        temp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:12]}.tmp")
        header = dict(self.header)
        if self.wall_time_s is not None:
            header["wall_time_s"] = self.wall_time_s
        fd = os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_BINARY", 0), 0o666)
        try:
            with open(fd, "w", encoding="utf-8", closefd=False) as fh:
                fh.write(json.dumps(header, default=str) + "\n")
                if self.clock is not None:
                    fh.write(json.dumps({"clock": self.clock}) + "\n")
                for line in self.key_parts.lines():
                    fh.write(json.dumps({"key_parts": line}) + "\n")
                for event in self.events:
                    fh.write(json.dumps(fields_of(event), default=str) + "\n")
            os.fsync(fd)
            size = os.fstat(fd).st_size
            lock_new(fd)
            os.replace(temp, target)
        except BaseException:
            os.close(fd)
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        hold.adopt(fd)
        return size

    # -- reading -----------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "CompileLog":
        """Read a log. Lines that fail the schema (not JSON, a wrong type, a missing field, a
        truncated last line from a crash mid-write) are skipped, and values out of bounds dropped
        from events that are kept, with one warning (``LogWarning``) naming them. A log not
        closed by its writer (killed, or still running) has ``closed`` False and its rank in
        ``header["unclosed_ranks"]``."""
        path = Path(path)
        header, events, wall_time_s, state = read_log(path)
        if not state.closed:
            rank = header.get("rank")
            header["unclosed_ranks"] = ([rank] if type(rank) is int and rank >= 0
                                        else sorted({e.rank for e in events}) or [0])
        log = cls(events, header=header)
        log.path = path
        log.wall_time_s = wall_time_s
        log.closed, log.clock = state.closed, state.clock
        log.key_parts = state.key_parts or log.key_parts
        log._size = (signature(path) or (0, 0, 0, 0))[2]  # appends check the file is still whole
        return log

    @classmethod
    def from_torch_trace(cls, folder: str | os.PathLike[str]) -> "CompileLog":
        """Read the trace files torch writes under ``TORCH_TRACE=folder`` (see
        :mod:`neuronkit.sources.trace_import`); bad lines are skipped with one warning per file."""
        header, events, parts = read_torch_trace(folder)
        log = cls(events, header=header)
        for key, (cache, key_parts) in parts.items():
            log.add_key_parts(cache, key, key_parts)
        return log

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
            elif kind in ("backward", "cpu_fallback"):  # a graph's backward; ops run on CPU
                pass
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
        unclosed = sorted({r for log in logs if isinstance(log.header.get("unclosed_ranks"), list)
                           for r in log.header["unclosed_ranks"] if type(r) is int})
        header.pop("unclosed_ranks", None)
        if unclosed:
            header["unclosed_ranks"] = unclosed
        merged = cls(events, header=header)
        merged.key_parts.merge(log.key_parts for log in logs)
        return merged


def _refuse_special(path: Path) -> None:
    """A device or a pipe is never replaced by a log file (``/dev/null`` stays a device): such a
    path is refused with an ``OSError`` naming it."""
    if path.exists() and not path.is_file():
        raise OSError(f"{path} is not a regular file (a device, pipe or folder): a compile log "
                      "is written to a file; give a file path")
