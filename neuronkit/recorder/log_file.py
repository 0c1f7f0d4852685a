"""One log file, one recorder: a recorder's log and when it holds the file.

The hold itself is the log's (``log/file_lock.py``: one file, one writer, whoever writes it). A
recorder's log holds its ``log_path`` from ``start()`` to ``stop()`` (and for each write while
stopped), and another writer given that path, in this process or another, is refused
(``LogPathInUseError``) instead of truncating it. A stopped recorder lets its path go: a new
recorder there starts the file afresh, and the stopped one is then refused a restart rather than
mix two logs in one file. A failed write costs no event (it is in memory before the write); the
failure is said once.
"""
from __future__ import annotations

import contextlib
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator, Protocol

from neuronkit.log.compile_log import CompileLog
from neuronkit.log.file_lock import LogPathInUseError, Signature, signature
from neuronkit.sources.sink import say

__all__ = ["Holder", "LogFile"]


class Holder(Protocol):
    """What holds a log file (a ``CompileRecorder``): named in the refusal of another."""

    rank: int

    @property
    def active(self) -> bool: ...


def _describe(owner: weakref.ReferenceType[Holder]) -> Callable[[], str]:
    """How the recorder is named to a writer refused its file (the recorder held weakly)."""
    def describe() -> str:
        holder = owner()
        if holder is None:
            return "a CompileRecorder of this process"
        state = "recording" if holder.active else "writing"
        return f"another CompileRecorder of this process (rank {holder.rank}, {state})"
    return describe


class LogFile:
    """A recorder's log (``log``, in memory and mirrored to its path) and the hold on that path:
    taken while recording and around each write while stopped. ``errors``: the failed writes."""

    def __init__(self, owner: Holder, header: dict[str, Any],
                 log_path: str | os.PathLike[str] | None) -> None:
        self.errors: list[Exception] = []  # failed writes to the path (events are kept)
        self._owner = weakref.ref(owner)    # not kept alive by its own log file
        self._holding = False
        self._left: tuple[Path, Signature] | None = None  # the file as the recorder left it
        self._lock = threading.Lock()
        if log_path is None:
            self.log = CompileLog(header=header)
            self.log.writer = _describe(self._owner)  # for a path it is saved to later
            return
        path = Path(log_path)
        if path.is_dir():
            raise IsADirectoryError(f"log_path {path} is a folder: pass a .jsonl file, e.g. "
                                    f"{path / 'compile.jsonl'} (one per rank: "
                                    f"nk.rank_log_path({str(path)!r}))")
        self.log = CompileLog(header=header, path=path)  # refused if another writer holds it
        self.log.writer = _describe(self._owner)
        self._left = (path, self.log.release())

    def take(self) -> None:
        """Hold the log's path while recording. Refused (LogPathInUseError) when another
        writer holds it, or when the file changed since this recorder last wrote it (another
        recorder wrote it meanwhile: appending would mix two logs). A file gone is written again
        whole."""
        path = self.log.path
        if path is None or self._holding or self._owner() is None:
            return
        found = signature(path)
        try:
            self.log.hold()
        except OSError as exc:  # not LogPathInUseError: record in memory, say so once
            self.failed(exc, "the log")
            return
        if found is not None and self._left is not None and self._left[0] == path and (
                found != self._left[1]):  # (a path of rec.log.save() is the user's to choose)
            self.log.release()
            raise LogPathInUseError(
                f"{path} changed since this recorder stopped (another recorder or program wrote "
                f"it); restarting would mix two logs in one file. This recorder's "
                f"{len(self.log)} events are in rec.log: save them with rec.log.save(other_path), "
                "or give each recorder its own log_path")
        self._holding = True
        if found is None:
            try:
                self.log.save(path)
            except OSError as exc:
                self.failed(exc, "the log")

    def leave(self) -> None:
        """Let the path go (to another writer), remembering the file as left."""
        if self._holding:
            path, left = self.log.path, self.log.release()
            self._left = (path, left) if path is not None else self._left
            self._holding = False

    @contextlib.contextmanager
    def writing(self, what: str, recording: bool) -> Iterator[None]:
        """Around one write to the log: a stopped recorder holds its file for the write (one
        that another recorder took keeps its events in memory from then on); a failed write
        is said once and costs no event (it is in memory before the write)."""
        if recording or self.log.path is None:
            try:
                yield
            except OSError as exc:
                self.failed(exc, what)
            return
        with self._lock:
            try:
                self.take()
            except LogPathInUseError as exc:
                self.log.path = None  # the file is another recorder's now
                self.failed(exc, what)
            try:
                yield
            except OSError as exc:
                self.failed(exc, what)
            finally:
                self.leave()

    def failed(self, exc: Exception, what: str) -> None:
        """A write failed: kept in ``errors``, said once."""
        self.errors.append(exc)
        if len(self.errors) == 1:
            say(f"could not write {what} to {self.log.path or 'the log file'}: {exc}; recording "
                f"goes on in memory (rec.events; the dashboard and subscribers get every event). "
                "Save them with rec.log.save(path) (all errors: rec.write_errors)")
