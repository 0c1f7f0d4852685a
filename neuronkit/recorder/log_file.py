"""One log file, one recorder: a recorder's log and its hold on the file.

A recorder holds its ``log_path`` from ``start()`` to ``stop()`` (and for each write while
stopped), and another recorder given that path, in this process or another, is refused
(``LogPathInUseError``) instead of truncating it. Across processes the hold is an exclusive
``flock`` on the file, which the OS drops when a process dies; on Windows, and on network
filesystems without locks, only recorders of the same process are told apart. A stopped
recorder lets its path go: a new recorder there starts the file afresh, and the stopped one is
then refused a restart rather than mix two logs in one file. A failed write costs no event (it
is in memory before the write); the failure is said once.
"""
from __future__ import annotations

import contextlib
import os
import threading
import weakref
from pathlib import Path
from typing import Any, Iterator, Protocol

try:
    import fcntl
except ImportError:  # Windows: recorders of this process are told apart, not other processes
    fcntl = None  # type: ignore[assignment]

from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.sink import say

__all__ = ["Holder", "LogFile", "LogPathInUseError"]


class LogPathInUseError(RuntimeError):
    """Another recorder writes the log file this one was given: two would mix or lose events."""


class Holder(Protocol):
    """What holds a log file (a ``CompileRecorder``): named in the refusal of another."""

    rank: int

    @property
    def active(self) -> bool: ...


_Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    """What tells whether a file changed: device, inode, size, mtime (None: no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


_HOLDERS: dict[str, weakref.ReferenceType[Holder]] = {}  # real path -> its recorder
_HOLDERS_LOCK = threading.Lock()


def _in_use(path: Path, who: str) -> str:
    return (f"{path} is already the log of {who}: two recorders on one file would interleave "
            f"their events and the second would truncate the first's. Give each recorder its own "
            f"log_path (one per rank: nk.rank_log_path({str(path)!r})), or stop the other one "
            "first; to see the same events twice, use one recorder and rec.subscribe(...)")


class _Hold:
    """A recorder's hold on its log file: its entry in this process's table, and an exclusive
    ``flock`` on the file (other processes); released by :meth:`release` or with the recorder."""

    def __init__(self, path: Path, owner: Holder) -> None:
        self.path = path
        self.key = os.path.normcase(os.path.realpath(path))
        self.ref = weakref.ref(owner)
        with _HOLDERS_LOCK:
            other = _HOLDERS.get(self.key)
            holder = other() if other is not None else None
            if holder is not None and holder is not owner:
                state = "recording" if holder.active else "writing"
                raise LogPathInUseError(_in_use(path, f"another CompileRecorder of this process "
                                                      f"(rank {holder.rank}, {state})"))
            _HOLDERS[self.key] = self.ref
        self.fd: int | None = None
        try:
            self.fd = self._lock()
        except BaseException:
            self._forget()
            raise
        self._finalizer = weakref.finalize(owner, self.release)

    def _lock(self) -> int | None:
        if fcntl is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogPathInUseError(_in_use(self.path, "a recorder in another process")) from None
        except OSError:  # a filesystem without locks (some network mounts): this process only
            os.close(fd)
            return None
        return fd

    def _forget(self) -> None:
        with _HOLDERS_LOCK:
            if _HOLDERS.get(self.key) is self.ref:
                del _HOLDERS[self.key]

    def release(self) -> _Signature:
        """Let the file go; returns its signature as left (to see, later, if it changed)."""
        left = _signature(self.path)
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None
        self._forget()
        self._finalizer.detach()
        return left


class LogFile:
    """A recorder's log (``log``, in memory and mirrored to its path) and the hold on that path:
    taken while recording and around each write while stopped. ``errors``: the failed writes."""

    def __init__(self, owner: Holder, header: dict[str, Any],
                 log_path: str | os.PathLike[str] | None) -> None:
        self.errors: list[Exception] = []  # failed writes to the path (events are kept)
        self._owner = weakref.ref(owner)    # not kept alive by its own log file
        self._hold: _Hold | None = None
        self._left: tuple[Path, _Signature] | None = None  # the file as the recorder left it
        self._lock = threading.Lock()
        if log_path is None:
            self.log = CompileLog(header=header)
            return
        path = Path(log_path)
        if path.is_dir():
            raise IsADirectoryError(f"log_path {path} is a folder: pass a .jsonl file, e.g. "
                                    f"{path / 'compile.jsonl'} (one per rank: "
                                    f"nk.rank_log_path({str(path)!r}))")
        hold = _Hold(path, owner)  # refused if another recorder writes it: nothing truncated
        try:
            self.log = CompileLog(header=header, path=path)
        finally:
            self._left = (path, hold.release())

    def take(self) -> None:
        """Hold the log's path while recording. Refused (LogPathInUseError) when another
        recorder holds it, or when the file changed since this recorder last wrote it (another
        recorder wrote it meanwhile: appending would mix two logs). A file gone is written again
        whole."""
        path, owner = self.log.path, self._owner()
        if path is None or self._hold is not None or owner is None:
            return
        found = _signature(path)
        try:
            hold = _Hold(path, owner)
        except OSError as exc:  # not LogPathInUseError: record in memory, say so once
            self.failed(exc, "the log")
            return
        if found is not None and self._left is not None and self._left[0] == path and (
                found != self._left[1]):  # (a path of rec.log.save() is the user's to choose)
            hold.release()
            raise LogPathInUseError(
                f"{path} changed since this recorder stopped (another recorder or program wrote "
                f"it); restarting would mix two logs in one file. This recorder's "
                f"{len(self.log)} events are in rec.log: save them with rec.log.save(other_path), "
                "or give each recorder its own log_path")
        self._hold = hold
        if found is None:
            try:
                self.log.save(path)
            except OSError as exc:
                self.failed(exc, "the log")

    def leave(self) -> None:
        """Let the path go (to another recorder), remembering the file as left."""
        if self._hold is not None:
            self._left = (self._hold.path, self._hold.release())
            self._hold = None

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
