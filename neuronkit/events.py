"""Compile events and the append-only JSONL log that holds them.

A log file is one header line followed by one JSON object per event:

    {"format": "neuronkit-compile-log", "version": 1, "neuronkit": ..., "torch": ..., ...}
    {"seq": 0, "compile_id": "0/0", "function": "forward", ...}

Each event is written and flushed as it happens, so a crash loses nothing recorded.
"""
from __future__ import annotations

import dataclasses
import json
import os
import threading
import warnings
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterable, Literal

FORMAT = "neuronkit-compile-log"
FORMAT_VERSION = 1

EventKind = Literal["first", "recompile", "limit_hit", "failed"]
KINDS: tuple[str, ...] = ("first", "recompile", "limit_hit", "failed")


class LogFormatError(ValueError):
    """The file is not a neuronkit compile log, or was written by a newer neuronkit."""


@dataclass
class CompileEvent:
    """One Dynamo compile (or a refused one: ``limit_hit``) seen by the recorder."""

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

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> "CompileEvent":
        known = {f.name for f in dataclasses.fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})


def default_header(device: str = "", backend: str = "", **extra: Any) -> dict[str, Any]:
    """The header line: format, versions, device and backend."""
    from . import __version__

    versions: dict[str, Any] = {"neuronkit": __version__}
    for name in ("torch", "transformers", "torch_neuronx"):
        versions[name] = _version_of(name)
    return {"format": FORMAT, "version": FORMAT_VERSION, **versions,
            "device": device, "backend": backend, **extra}


def _version_of(module: str) -> str | None:
    from importlib import metadata

    dist = module.replace("_", "-")
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


class CompileLog:
    """An ordered list of compile events, optionally mirrored to a JSONL file."""

    def __init__(self, events: Iterable[CompileEvent] = (), header: dict[str, Any] | None = None,
                 path: str | os.PathLike[str] | None = None) -> None:
        self.events: list[CompileEvent] = list(events)
        self.header: dict[str, Any] = dict(header) if header else default_header()
        self.path: Path | None = Path(path) if path is not None else None
        self.wall_time_s: float | None = self.header.get("wall_time_s")
        self._lock = threading.Lock()
        if self.path is not None:
            self._write_all()

    # -- writing -----------------------------------------------------------------
    def append(self, event: CompileEvent) -> CompileEvent:
        """Add an event (its ``seq`` is set here) and flush it to the file, if any."""
        with self._lock:
            event.seq = len(self.events)
            self.events.append(event)
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps(event.to_dict(), default=str) + "\n")
                    fh.flush()
                    os.fsync(fh.fileno())
        return event

    def set_wall_time(self, seconds: float) -> None:
        """Set the active wall time; the file gets a ``{"wall_time_s": ...}`` line (last one wins)."""
        with self._lock:
            self.wall_time_s = float(seconds)
            if self.path is not None:
                with open(self.path, "a", encoding="utf-8") as fh:
                    fh.write(json.dumps({"wall_time_s": self.wall_time_s}) + "\n")
                    fh.flush()

    def save(self, path: str | os.PathLike[str]) -> Path:
        """Write the whole log (header + events) to ``path``; later appends go there too."""
        self.path = Path(path)
        self._write_all()
        return self.path

    def _write_all(self) -> None:
        assert self.path is not None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        header = dict(self.header)
        if self.wall_time_s is not None:
            header["wall_time_s"] = self.wall_time_s
        with open(self.path, "w", encoding="utf-8") as fh:
            fh.write(json.dumps(header, default=str) + "\n")
            for event in self.events:
                fh.write(json.dumps(event.to_dict(), default=str) + "\n")
            fh.flush()

    # -- reading -----------------------------------------------------------------
    @classmethod
    def load(cls, path: str | os.PathLike[str]) -> "CompileLog":
        """Read a log; a truncated last line (a crash mid-write) is skipped with a warning."""
        path = Path(path)
        if not path.is_file():
            raise FileNotFoundError(f"compile log not found: {path}")
        lines = path.read_text(encoding="utf-8").splitlines()
        if not lines:
            raise LogFormatError(f"{path} is empty: not a neuronkit compile log")
        try:
            header = json.loads(lines[0])
        except json.JSONDecodeError as exc:
            raise LogFormatError(f"{path} does not start with a neuronkit header line: {exc}") from exc
        if not isinstance(header, dict) or header.get("format") != FORMAT:
            raise LogFormatError(
                f"{path} is not a neuronkit compile log (first line has no "
                f"\"format\": \"{FORMAT}\"); write logs with neuronkit.CompileRecorder(log_path=...)")
        version = header.get("version")
        if not isinstance(version, int) or version > FORMAT_VERSION:
            raise LogFormatError(
                f"{path} uses log format version {version!r}; this neuronkit reads up to "
                f"{FORMAT_VERSION}. Upgrade neuronkit (pip install -U neuronkit) to read it.")
        events: list[CompileEvent] = []
        wall_time_s = header.get("wall_time_s")
        last = len(lines)
        for number, line in enumerate(lines[1:], start=2):
            if not line.strip():
                continue
            try:
                data = json.loads(line)
                if not isinstance(data, dict):
                    raise TypeError(f"expected a JSON object, got {type(data).__name__}")
                if "seq" not in data and "wall_time_s" in data:
                    wall_time_s = data["wall_time_s"]
                    continue
                events.append(CompileEvent.from_dict(data))
            except (json.JSONDecodeError, TypeError, ValueError) as exc:
                what = "a truncated last line" if number == last else "a damaged line"
                warnings.warn(f"{path}: skipped {what} ({number}): {exc}", stacklevel=2)
        log = cls(events, header=header)
        log.path = path
        log.wall_time_s = wall_time_s
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
        return sum(e.duration_s for e in self.events)

    def graph_counts(self) -> dict[str, int]:
        """Graphs built per function (limit hits and failures do not build a graph)."""
        counts: dict[str, int] = defaultdict(int)
        for e in self.events:
            if e.kind in ("first", "recompile"):
                counts[e.function] += 1
        return dict(counts)

    def summary(self) -> list[dict[str, Any]]:
        """Per function: graphs, distinct shapes, limit hits, total/mean compile seconds, share of wall."""
        rows: dict[str, dict[str, Any]] = {}
        shapes: dict[str, set[str]] = defaultdict(set)
        for e in self.events:
            row = rows.setdefault(e.function, {"function": e.function, "graphs": 0, "limit_hits": 0,
                                               "failed": 0, "compile_s": 0.0})
            if e.kind in ("first", "recompile"):
                row["graphs"] += 1
            elif e.kind == "limit_hit":
                row["limit_hits"] += 1
            else:
                row["failed"] += 1
            row["compile_s"] += e.duration_s
            shapes[e.function].add(json.dumps(e.input_shapes, sort_keys=True))
        for name, row in rows.items():
            row["distinct_shapes"] = len(shapes[name])
            n = row["graphs"] + row["failed"]
            row["mean_s"] = row["compile_s"] / n if n else 0.0
            row["share_of_wall"] = (row["compile_s"] / self.wall_time_s
                                    if self.wall_time_s else None)
        return list(rows.values())

    def to_chrome_trace(self, path: str | os.PathLike[str]) -> Path:
        """Write a Chrome trace (Perfetto / chrome://tracing): one slice per event.

        One process per rank, one thread row per function; times are relative to the first event.
        """
        events = list(self.events)
        t0 = min((e.started_at for e in events), default=0.0)
        tids: dict[tuple[int, str], int] = {}
        trace: list[dict[str, Any]] = []
        for e in events:
            key = (e.rank, e.function)
            if key not in tids:
                tids[key] = len(tids) + 1
                trace.append({"name": "thread_name", "ph": "M", "pid": e.rank, "tid": tids[key],
                              "args": {"name": e.function or "?"}})
            trace.append({
                "name": f"{e.function} [{e.kind}]", "cat": "compile", "ph": "X",
                "ts": round((e.started_at - t0) * 1e6, 3),
                "dur": round(max(e.duration_s, 0.0) * 1e6, 3),
                "pid": e.rank, "tid": tids[key],
                "args": {"compile_id": e.compile_id, "kind": e.kind, "location": e.location,
                         "changed": e.changed, "reasons": e.reasons, "context": e.context,
                         "input_shapes": e.input_shapes, "graph_count": e.graph_count},
            })
        for rank in sorted({e.rank for e in events}):
            trace.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                          "args": {"name": f"rank {rank}"}})
        out = Path(path)
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(json.dumps({"traceEvents": trace, "displayTimeUnit": "ms"}, default=str),
                       encoding="utf-8")
        return out

    @classmethod
    def merge(cls, logs: Iterable["CompileLog"]) -> "CompileLog":
        """One log from several (e.g. one per rank), ordered by start time."""
        logs = list(logs)
        events = sorted((dataclasses.replace(e) for log in logs for e in log.events),
                        key=lambda e: (e.started_at, e.rank))
        for seq, e in enumerate(events):
            e.seq = seq
        header = dict(logs[0].header) if logs else default_header()
        header["ranks"] = sorted({e.rank for e in events})
        walls = [log.wall_time_s for log in logs if log.wall_time_s]
        if walls:
            header["wall_time_s"] = max(walls)
        return cls(events, header=header)
