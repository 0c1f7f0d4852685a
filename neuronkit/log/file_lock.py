"""One file, one writer: the hold a log takes on the file it writes.

A ``CompileLog`` holds the path it writes from its first write until it lets it go (``release()``,
or when it is garbage-collected; a recorder's log: from ``start()`` to ``stop()``), and every other
writer given that path (another log, another recorder, another process) is refused with
:class:`LogPathInUseError` instead of truncating it. In this process a table of held paths tells
writers apart (by real path: two names of one file are one file); across processes an exclusive
``flock`` on the file does, which the OS drops when a process dies. On Windows, and on network
filesystems without locks, only writers of the same process are told apart.
"""
from __future__ import annotations

import os
import threading
import weakref
from pathlib import Path
from typing import Protocol

try:
    import fcntl
except ImportError:  # Windows: writers of this process are told apart, not other processes
    fcntl = None  # type: ignore[assignment]

__all__ = ["FileHold", "LogPathInUseError", "Signature", "Writer", "lock_new", "signature"]


class LogPathInUseError(RuntimeError):
    """Another writer holds the log file given: two would mix or lose events."""


class Writer(Protocol):
    """What holds a file (a ``CompileLog``): it names itself when another writer is refused."""

    def describe_writer(self) -> str: ...


Signature = tuple[int, int, int, int] | None


def signature(path: str | os.PathLike[str]) -> Signature:
    """What tells whether a file changed: device, inode, size, mtime (None: no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


def _key(path: str | os.PathLike[str]) -> str:
    return os.path.normcase(os.path.realpath(path))


_HOLDERS: dict[str, weakref.ReferenceType[Writer]] = {}  # real path -> the log holding it
_HOLDERS_LOCK = threading.Lock()
_ANOTHER_PROCESS = "a writer in another process (a recorder in another process, or its CompileLog)"


def _in_use(path: Path, who: str) -> str:
    return (f"{path} is already the log of {who}: two writers on one file would interleave "
            f"their events and the second would truncate the first's. Give each its own file "
            f"(one per rank: nk.rank_log_path({str(path)!r})), or let the other go first "
            "(rec.stop(), log.release()); to see the same events twice, use one recorder and "
            "rec.subscribe(...)")


def lock_new(fd: int) -> None:
    """Lock a file no other writer knows yet (a temp file about to replace a held one), so that
    the hold never lapses when it takes the old file's place."""
    if fcntl is not None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a filesystem without locks: this process only
            pass


class FileHold:
    """A writer's hold on one path: its entry in this process's table and an exclusive ``flock``
    on the file (other processes); let go by :meth:`release` or with the writer."""

    def __init__(self, path: str | os.PathLike[str], owner: Writer) -> None:
        self.path = Path(path)
        self.key = _key(self.path)
        self.ref = weakref.ref(owner)
        with _HOLDERS_LOCK:
            other = _HOLDERS.get(self.key)
            holder = other() if other is not None else None
            if holder is not None and holder is not owner:
                message = _in_use(self.path, holder.describe_writer())
                del holder  # the refusal's traceback keeps no other writer alive
                raise LogPathInUseError(message)
            _HOLDERS[self.key] = self.ref
        self.fd: int | None = None
        try:
            self.fd = self._lock()
        except BaseException:
            self._forget()
            raise
        self._finalizer = weakref.finalize(owner, self.release)

    def holds(self, path: str | os.PathLike[str]) -> bool:
        return _key(path) == self.key

    def _lock(self) -> int | None:
        if fcntl is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            found, now = os.fstat(fd), os.stat(self.path)
        except BlockingIOError:
            os.close(fd)
            raise LogPathInUseError(_in_use(self.path, _ANOTHER_PROCESS)) from None
        except OSError:  # a filesystem without locks (some network mounts): this process only
            os.close(fd)
            return None
        if (found.st_dev, found.st_ino) != (now.st_dev, now.st_ino):  # replaced as we locked it
            os.close(fd)
            raise LogPathInUseError(_in_use(self.path, _ANOTHER_PROCESS))
        return fd

    def adopt(self, fd: int) -> None:
        """The file at the path is now the one ``fd`` is open on (locked by :func:`lock_new`,
        then moved there): hold it instead of the old one. Without a lock, ``fd`` is closed."""
        if self.fd is None:
            os.close(fd)
            return
        old, self.fd = self.fd, fd
        os.close(old)

    def _forget(self) -> None:
        with _HOLDERS_LOCK:
            if _HOLDERS.get(self.key) is self.ref:
                del _HOLDERS[self.key]

    def release(self) -> Signature:
        """Let the file go; returns its signature as left (to see, later, if it changed)."""
        left = signature(self.path)
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None
        self._forget()
        self._finalizer.detach()
        return left
