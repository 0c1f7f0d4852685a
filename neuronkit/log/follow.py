"""Following compile logs while they are written: ``nk.follow(folder_or_file)``.

``poll()`` returns the events written since the last poll, across every log of the run in the
folder (a rank's log is picked up when it appears; which files are the run's, and that a folder
of separate logs or of runs is refused with a ``ValueError`` naming them, is ``runs.py``'s rule);
each file is read on from where the last poll stopped, never from the start, and a half-written
last line waits for the next poll. Only file sizes are
polled: inotify does not see writes made by other hosts on a shared file system (NFS, FSx). Lines
are checked as the log reader checks them (``reader.py``); update lines (NEFF times) set the
fields of the events already returned, so ``follower.log`` holds them resolved.
"""
from __future__ import annotations

import dataclasses
import os
import warnings
from pathlib import Path

from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import LogFormatError
from neuronkit.log.clock import host_of, host_offsets
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.reader import LogReader
from neuronkit.log.runs import classify, folder_error
from neuronkit.safe import strip_control

__all__ = ["Follower", "follow"]


@dataclasses.dataclass
class _Tail:
    """One log file followed: where the last read ended, the line cut short, its reader."""

    path: Path
    offset: int = 0
    partial: bytes = b""
    number: int = 1                     # the number of the next whole line
    reader: LogReader | None = None
    header: dict | None = None
    rank: int = 0
    by_seq: dict[int, CompileEvent] = dataclasses.field(default_factory=dict)
    warned: int = 0                     # bad lines already said
    refused: str = ""                   # not a neuronkit log: why (said once, then skipped)
    offset_s: float = 0.0               # its host clock's lead over the reference host's
    keys_merged: int = 0                # its cache keys' parts already in the merged log

    @property
    def closed(self) -> bool:
        return self.reader is not None and self.reader.closed

    def read(self) -> list[CompileEvent]:
        """The events of the whole lines written since the last read."""
        try:
            size = self.path.stat().st_size
        except OSError:
            return []
        if size < self.offset:  # cut or rewritten by its writer: read it again from the top
            return self._restart()
        if size == self.offset or self.refused:
            return []
        with open(self.path, "rb") as fh:
            fh.seek(self.offset)
            data = self.partial + fh.read(size - self.offset)
        self.offset = size
        cut = data.rfind(b"\n")
        if cut < 0:
            self.partial = data
            return []
        self.partial = data[cut + 1:]
        rows = data[:cut].split(b"\n")
        if self.reader is None:
            rows = self._open(rows)
        return self._lines(rows) if self.reader is not None else []

    def _restart(self) -> list[CompileEvent]:
        self.offset, self.partial, self.number, self.reader, self.header = 0, b"", 1, None, None
        self.by_seq.clear()
        return self.read()

    def _open(self, rows: list[bytes]) -> list[bytes]:
        reader = LogReader(self.path)
        try:
            self.header = reader.header(rows[0])
        except LogFormatError as exc:
            self.refused = str(exc)
            warnings.warn(f"neuronkit follow: skipping {strip_control(exc, keep_newlines=False)}",
                          stacklevel=4)
            return []
        rank = self.header.get("rank")
        self.rank = rank if type(rank) is int and rank >= 0 else 0
        self.reader, self.number = reader, 2
        return rows[1:]

    def _lines(self, rows: list[bytes]) -> list[CompileEvent]:
        reader = self.reader
        assert reader is not None
        before, updates = len(reader.events), len(reader.updates)
        for raw in rows:
            reader.line(self.number, raw)
            self.number += 1
        new = reader.events[before:]
        for event in new:
            event.rank = self.rank
            if self.offset_s and isinstance(event.started_at, (int, float)):
                event.started_at -= self.offset_s
            self.by_seq[event.seq] = event
        reader.apply_updates(reader.updates[updates:], self.by_seq)
        if len(reader.bad) > self.warned:
            self.warned = len(reader.bad)
            line, why = reader.bad[-1]
            warnings.warn(strip_control(f"{self.path}: skipped {self.warned} bad line(s) so far; "
                                        f"the last: line {line} ({why})", keep_newlines=False),
                          stacklevel=4)
        return new


class Follower:
    """Follows one log file, or the logs of the run in a folder (its ``*.rank<N>.jsonl``, else
    its ``*.pid<P>.jsonl``, else its one ``*.jsonl``), as they are written."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._tails: dict[Path, _Tail] = {}
        self._offsets: dict[str, float] = {}
        self.log = CompileLog()  # the events so far, in the order they were read
        self.log.header["ranks"] = []
        self._files()  # a folder that is no one run is said now, not at the first poll

    def _files(self) -> list[Path]:
        """The logs of the run followed, by the rule ``open_log`` reads a folder with
        (``runs.classify``); a folder of separate logs or of runs raises ``ValueError``."""
        if not self.path.is_dir():
            return [self.path]
        try:
            found = classify(self.path)
        except OSError:
            return []
        if found.kind == "trace":
            raise ValueError(f"{self.path} holds torch trace files (TORCH_TRACE), which are read "
                             f"when the run is over, not followed: neuronkit report {self.path}")
        if found.kind in ("separate", "runs"):
            raise folder_error(found)
        return list(found.files)

    def poll(self) -> list[CompileEvent]:
        """The events written since the last poll, in start order (new ranks included)."""
        new: list[CompileEvent] = []
        files = self._files()
        for gone in set(self._tails) - set(files):  # removed by its writer (a process that
            del self._tails[gone]                     # compiled nothing); its events stay
        for path in files:
            tail = self._tails.get(path)
            if tail is None:
                tail = self._tails[path] = _Tail(path)
            new += tail.read()
        self._align()
        new.sort(key=lambda e: e.started_at if isinstance(e.started_at, (int, float)) else 0.0)
        for event in new:
            event.seq = len(self.log.events)
            self.log.events.append(event)
        self._merge_header()
        for tail in self._tails.values():  # the cache keys' parts: only a log with new keys
            if tail.reader is not None and len(tail.reader.key_parts) > tail.keys_merged:
                self.log.key_parts.merge([tail.reader.key_parts])
                tail.keys_merged = len(tail.reader.key_parts)
        return new

    def _merge_header(self) -> None:
        """The header and wall time ``merge_logs`` gives the same logs: the first rank's header
        (its versions, device, backend), every rank, the longest wall time of the logs closed so
        far, the clock offsets; changed in place (views hold the dict)."""
        tails = sorted((t for t in self._tails.values() if t.reader is not None and t.header),
                       key=lambda t: (t.rank, t.path.name))
        header = dict(tails[0].header or {}) if tails else {}
        header.pop("rank", None)
        header.pop("wall_time_s", None)
        header["ranks"] = sorted({t.rank for t in tails})
        walls = [t.reader.wall_time_s for t in tails if t.reader and t.reader.wall_time_s]
        if walls:
            header["wall_time_s"] = self.log.wall_time_s = max(walls)
        if self.offsets:
            header["clock_offsets"] = dict(self.offsets)
        if tails:
            self.log.header.clear()
            self.log.header.update(header)
        else:
            self.log.header["ranks"] = []

    def _align(self) -> None:
        """Shift each host's events by its clock's lead, once the hosts' clock lines are in."""
        open_tails = [t for t in self._tails.values() if t.reader is not None and t.header]
        offsets = host_offsets([(t.header or {}, t.reader.clock if t.reader else None, t.rank)
                                for t in open_tails])
        for tail in open_tails:
            host = host_of(tail.header or {}, tail.reader.clock if tail.reader else None)
            offset = offsets.get(host, 0.0) if host is not None else 0.0
            if offset != tail.offset_s:  # shift what it returned before, by the difference
                for event in tail.by_seq.values():
                    if isinstance(event.started_at, (int, float)):
                        event.started_at -= offset - tail.offset_s
                tail.offset_s = offset
        self._offsets = offsets

    @property
    def offsets(self) -> dict[str, float]:
        """Seconds each host's clock ran ahead of the reference host's, taken off its times."""
        return {h: s for h, s in self._offsets.items() if s}

    @property
    def logs(self) -> dict[Path, bool]:
        """Each neuronkit log found so far, and whether its writer closed it."""
        return {p: t.closed for p, t in self._tails.items() if t.reader is not None}

    @property
    def unclosed_ranks(self) -> list[int]:
        """Ranks whose log has no close after its last line: still running, or killed."""
        return sorted({t.rank for t in self._tails.values() if t.reader and not t.closed})

    @property
    def finished(self) -> bool:
        """Every log found so far was closed by its writer (there is at least one), and as many
        ranks wrote one as their headers' ``world_size`` says (a late rank is waited for)."""
        logs = self.logs
        tails = [t for t in self._tails.values() if t.reader is not None]
        worlds = [w for t in tails for w in [(t.header or {}).get("world_size")]
                  if type(w) is int and w > 0]
        ranked = {t.rank for t in tails if "rank" in (t.header or {})}
        return bool(logs) and all(logs.values()) and len(ranked) >= max(worlds, default=0)


def follow(path: str | os.PathLike[str]) -> Follower:
    """A :class:`Follower` of a log file or of a run's folder (e.g. ``neuronkit record``'s);
    a folder of separate logs or of runs raises ``ValueError`` naming them."""
    return Follower(path)
