"""Prune the native NEFF cache: remove temp leftovers, zero-size NEFFs and old lock files that
no process holds, each checked again under its key's lock, never through a link; a dry run only
lists them. A held lock is never removed, however old its file: it is a build in progress (lock
files are reused, so their time says nothing of how long one is held; torch-neuronx's own waiters
break a lock after TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT s of their own wait,
``core/cache/FileLock.cpp:114-167``)."""
from __future__ import annotations

import errno
import os
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.setup.cache_native import NativeCache, file_beneath
from neuronkit.setup.cache_text import printable

__all__ = ["PruneItem", "PruneResult", "prune_native"]


@dataclass
class PruneItem:
    """One file prune looked at, and what happened to it."""

    what: str   # "temp leftover" | "zero-size NEFF" | "old lock file"
    path: Path
    outcome: str  # "would remove" | "removed" | "kept: <why>" | "failed: <OS error>"


@dataclass
class PruneResult:
    """What ``--prune`` removed (or, in a dry run, would remove); ``str()`` lists it."""

    root: Path
    local_dir: Path
    dry_run: bool
    items: list[PruneItem] = field(default_factory=list)

    @property
    def removed(self) -> list[Path]:
        return [i.path for i in self.items if i.outcome == "removed"]

    @property
    def failed(self) -> list[PruneItem]:
        """Files that could not be removed (permissions, ...)."""
        return [i for i in self.items if i.outcome.startswith("failed")]

    def __str__(self) -> str:
        where = f"{printable(self.root)} (locks: {printable(self.local_dir)})"
        if not self.items:
            return (f"Nothing to prune in {where}: no temp leftovers, zero-size NEFFs or "
                    "old lock files no process holds.")
        width = max(len(i.what) for i in self.items)
        rows = [f"  {i.what:<{width}}  {printable(i.path)}"
                + ("" if i.outcome in ("would remove", "removed") else f"  [{i.outcome}]")
                for i in self.items]
        if self.dry_run:
            n = sum(i.outcome == "would remove" for i in self.items)
            return "\n".join([f"Dry run: would remove {n} file(s) from {where}:",
                              *rows, "Nothing was removed. To remove them, run again with --yes."])
        return "\n".join([f"Removed {len(self.removed)} of {len(self.items)} file(s) from "
                          f"{where}:", *rows])


@contextmanager
def _holding(lock: Path | None) -> Iterator[bool]:
    """Holds ``lock`` exclusively if its file exists; yields False if another process has it
    (a compile is running) or it cannot be checked."""
    fd, free = -1, True
    try:
        if lock is not None:
            try:
                import fcntl

                fd = os.open(lock, os.O_RDONLY | os.O_NOFOLLOW)
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except FileNotFoundError:
                pass  # no lock file: nobody is compiling this key
            except (ImportError, OSError):
                free = False
        yield free
    finally:
        if fd >= 0:
            os.close(fd)


def _unlink_beneath(base: Path, path: Path) -> None:
    """Remove the regular file ``path`` below ``base`` without following any link on the way:
    each folder is opened relative to the one above with ``O_NOFOLLOW``, so a folder swapped
    for a link after the checks raises instead of leading elsewhere."""
    rel = path.relative_to(base).parts
    if os.unlink not in os.supports_dir_fd or not hasattr(os, "O_NOFOLLOW"):  # pragma: no cover
        if file_beneath(base, path) is None:
            raise OSError(errno.ELOOP, "not a regular file below the cache folder", str(path))
        path.unlink()
        return
    directory = os.O_RDONLY | getattr(os, "O_DIRECTORY", 0)
    fd = os.open(base, directory)
    try:
        for part in rel[:-1]:
            below = os.open(part, directory | os.O_NOFOLLOW, dir_fd=fd)
            os.close(fd)
            fd = below
        if not stat.S_ISREG(os.stat(rel[-1], dir_fd=fd, follow_symlinks=False).st_mode):
            raise OSError(errno.ELOOP, "not a regular file", str(path))
        os.unlink(rel[-1], dir_fd=fd)
    finally:
        os.close(fd)


def _remove(what: str, base: Path, path: Path, lock: Path | None,
            still: Callable[[Path, Path], bool], dry_run: bool) -> PruneItem:
    """Remove ``path`` (below ``base``) if ``still(base, path)`` holds, checked again while
    holding ``lock``; never through a link."""
    if dry_run:
        return PruneItem(what, path, "would remove" if still(base, path) else
                         "kept: changed since the scan")
    with _holding(lock) as free:
        if not free:
            return PruneItem(what, path, "kept: locked by a running compile")
        if not still(base, path):
            return PruneItem(what, path, "kept: changed since the scan")
        try:
            _unlink_beneath(base, path)
        except OSError as exc:
            return PruneItem(what, path, f"failed: {exc.strerror}")
    return PruneItem(what, path, "removed")


def prune_native(root: Path, cache: NativeCache, *, dry_run: bool = True) -> PruneResult:
    """Remove the temp leftovers, zero-size NEFFs and old unheld lock files of ``cache`` (a dry
    run lists them). Each file is checked again while holding its key's lock (the lock writers
    hold), so a running compile never loses a file; good NEFFs and recent or held locks are never
    touched. As when a torch-neuronx waiter breaks a lock, a process that opened a lock just
    before it is removed may compile that graph once more; the NEFF is the same."""
    result = PruneResult(root, cache.local_dir, dry_run)

    def old(base: Path, path: Path) -> bool:
        st = file_beneath(base, path)
        return st is not None and time.time() - st.st_mtime > cache.timeout_s

    def empty(base: Path, path: Path) -> bool:
        st = file_beneath(base, path)
        return st is not None and st.st_size == 0

    for f in cache.leftovers:
        result.items.append(_remove("temp leftover", root, f.path,
                                    f.lock_path(cache.local_dir), old, dry_run))
    for f in cache.zero_size:
        result.items.append(_remove("zero-size NEFF", root, f.path,
                                    f.lock_path(cache.local_dir), empty, dry_run))
    for lk in cache.leftover_locks:
        result.items.append(_remove("old lock file", cache.local_dir, lk.path, lk.path, old,
                                    dry_run))
    return result
