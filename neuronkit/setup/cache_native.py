"""The NEFF cache of native torch-neuronx ("TorchNeuron"): scan it, and prune what is left over.

One folder (``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``/tmp/neff_cache``) holds two layouts:

- C++ path (async eager ops, ``torch.compile``): ``<dir>/<k[0:2]>/<k[2:4]>/<k>.neff``, ``k`` = 32
  hex; written through ``.tmp.XXXXXX`` in the shard folder, then renamed. A file of size 0 reads
  as a miss. Lock: ``<local>/locks/<k>.lock``.
- Python path (sync-mode eager ops): ``<dir>/<h>/<h>.neff``, ``h`` = 64 hex (sha256); written
  through ``tmpXXXXXXXX.tmp`` in ``<h>/``. A file of size 0 is read back as an empty NEFF.
  Lock: ``<local>/<h>/locks/compile.lock``.

``<local>`` is ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`` (default ``/tmp/local_cache``). Locks are
``flock`` files left behind after use; a waiter breaks one after
``TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT`` seconds (default 1200). Only the files named above are
ever removed here, and only when no compile can be using them. Links are never followed: a
linked file or folder (which could lead out of the cache, or back into it) is neither counted nor
removed, and nothing is removed through one.
"""
from __future__ import annotations

import errno
import os
import re
import stat
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
LOCAL_DIR_ENV = "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"
DISABLE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"
LOCK_TIMEOUT_ENV = "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT"
NATIVE_CACHE_DIR = "/tmp/neff_cache"
NATIVE_LOCAL_DIR = "/tmp/local_cache"
DEFAULT_LOCK_TIMEOUT_S = 1200

_HEX2 = re.compile(r"[0-9a-f]{2}")
_HEX32 = re.compile(r"[0-9a-f]{32}")
_HEX64 = re.compile(r"[0-9a-f]{64}")

__all__ = ["CACHE_DIR_ENV", "DISABLE_ENV", "LOCAL_DIR_ENV", "LOCK_TIMEOUT_ENV", "NATIVE_CACHE_DIR",
           "NATIVE_LOCAL_DIR", "CacheFile", "LockFile", "NativeCache", "PruneItem", "PruneResult",
           "ago", "cache_switch", "human_size", "is_native_shard", "lock_timeout", "native_cache_dir",
           "native_local_dir", "printable", "prune_native", "scan_native"]


def printable(value: object) -> str:
    """``str(value)`` with control and other non-printable characters escaped (``\\x1b``)."""
    text = str(value)
    return text if text.isprintable() else \
        "".join(c if c.isprintable() else repr(c)[1:-1] for c in text)


def human_size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


def ago(seconds: float) -> str:
    """``90`` -> ``"2 min"``: a readable duration."""
    seconds = max(0.0, seconds)
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit}"
    return f"{seconds:.0f} s"


def native_cache_dir() -> tuple[Path, str]:
    """The NEFF cache folder native torch-neuronx uses here, and why (the C++ rule)."""
    value = os.environ.get(CACHE_DIR_ENV)
    if value:
        return Path(value).expanduser(), f"from {CACHE_DIR_ENV}"
    return Path(NATIVE_CACHE_DIR), "the torch-neuronx default"


def native_local_dir() -> tuple[Path, str]:
    """The folder holding the lock files, and why."""
    value = os.environ.get(LOCAL_DIR_ENV)
    if value:
        return Path(value).expanduser(), f"from {LOCAL_DIR_ENV}"
    return Path(NATIVE_LOCAL_DIR), "the default"


def lock_timeout() -> tuple[int, str]:
    """(seconds, why): ``TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT`` as the C++ side reads it."""
    value = os.environ.get(LOCK_TIMEOUT_ENV)
    if value is None:
        return DEFAULT_LOCK_TIMEOUT_S, "the default"
    match = re.match(r"\s*[+-]?\d+", value)  # std::stoi reads a leading integer
    if match and 0 < int(match.group()) < 2**31:
        return int(match.group()), f"from {LOCK_TIMEOUT_ENV}"
    return DEFAULT_LOCK_TIMEOUT_S, f"{LOCK_TIMEOUT_ENV}={printable(repr(value))} is not a " \
        "positive number of seconds, so the C++ side uses the default"


def cache_switch() -> tuple[str, str]:
    """(``"on"`` | ``"off"`` | ``"python-off"``, why) from ``TORCH_NEURONX_NEFF_DISABLE_CACHE``:
    the C++ path counts only ``"1"``, the Python path also ``true`` / ``yes``."""
    value = os.environ.get(DISABLE_ENV)
    if value is None:
        return "on", f"enabled ({DISABLE_ENV} not set)"
    if value == "1":
        return "off", f"DISABLED by {DISABLE_ENV}=1: nothing is read from or written to it"
    shown = printable(repr(value))
    if value.lower() in ("1", "true", "yes"):
        return "python-off", (f"{DISABLE_ENV}={shown} disables it for the Python sync-mode path "
                              "only; the C++ path needs exactly '1'")
    return "on", f"enabled ({DISABLE_ENV}={shown} is not '1', so it changes nothing)"


def is_native_shard(name: str) -> bool:
    """A top-level folder name of the native cache (``ab`` or a 64-hex sha256)."""
    return bool(_HEX2.fullmatch(name) or _HEX64.fullmatch(name))


@dataclass
class CacheFile:
    """A ``.neff`` or a temp file of the native cache."""

    path: Path
    kind: str  # "cpp" | "python": which writer's layout
    size: int
    mtime: float
    key: str = ""  # the cache key, where the name gives it

    def lock_path(self, local_dir: Path) -> Path | None:
        """The lock a writer of this file holds, where the key is known."""
        if self.kind == "python":
            return local_dir / self.key / "locks" / "compile.lock"
        return local_dir / "locks" / f"{self.key}.lock" if self.key else None


@dataclass
class LockFile:
    """A lock file; ``stale`` = older than the timeout and not held by anyone now."""

    path: Path
    kind: str  # "cpp" | "python"
    key: str
    age_s: float
    held: bool | None  # None: could not check
    stale: bool


@dataclass
class NativeCache:
    """The files of one native NEFF cache folder and its lock folder."""

    local_dir: Path
    local_source: str
    timeout_s: int
    timeout_source: str
    neffs: list[CacheFile] = field(default_factory=list)       # size > 0
    zero_size: list[CacheFile] = field(default_factory=list)   # size 0: a miss / an empty NEFF
    temps: list[CacheFile] = field(default_factory=list)       # .tmp.XXXXXX / tmpXXXXXXXX.tmp
    locks: list[LockFile] = field(default_factory=list)
    other: list[Path] = field(default_factory=list)            # not a native cache file: kept
    unreadable: list[str] = field(default_factory=list)        # folders that could not be listed

    def count(self, kind: str) -> int:
        """NEFFs (size > 0) written by the ``"cpp"`` or the ``"python"`` path."""
        return sum(f.kind == kind for f in self.neffs)

    @property
    def neff_bytes(self) -> int:
        return sum(f.size for f in self.neffs)

    @property
    def leftovers(self) -> list[CacheFile]:
        """Temp files older than the lock timeout: their writer died before the rename."""
        now = time.time()
        return [f for f in self.temps if now - f.mtime > self.timeout_s]

    @property
    def stale_locks(self) -> list[LockFile]:
        return [lk for lk in self.locks if lk.stale]

    def lines(self) -> list[str]:
        """The body of the readable summary (``CacheReport.__str__`` adds the header)."""
        now, size = time.time(), human_size
        out = [f"  NEFFs      {len(self.neffs)} ({size(self.neff_bytes)}): "
               f"{self.count('cpp')} from the C++ path (ab/cd/<key>.neff), "
               f"{self.count('python')} from the Python sync-mode path (<sha256>/<sha256>.neff)"]
        newest = max(self.neffs, key=lambda f: f.mtime, default=None)
        if newest is not None:
            out.append(f"  newest     {printable(newest.path.name)} "
                       f"({ago(now - newest.mtime)} ago)")
        if self.zero_size:
            out.append(f"  zero-size  {len(self.zero_size)} .neff of 0 bytes: the C++ path reads "
                       "it as a miss, the Python path as an empty NEFF (--prune removes them)")
            out += _listed(self.zero_size, now)
        if self.temps:
            young = len(self.temps) - len(self.leftovers)
            out.append(f"  temp files {len(self.temps)} ({size(sum(f.size for f in self.temps))})"
                       f": {len(self.leftovers)} left by writes that died (older than the lock "
                       f"timeout; --prune removes them), {young} being written now")
            out += _listed(self.leftovers, now)
        held = sum(lk.held is True for lk in self.locks)
        out.append(f"  locks      {len(self.locks)} in {printable(self.local_dir)} "
                   f"({self.local_source}): {len(self.stale_locks)} stale (older than "
                   f"{self.timeout_s} s, {self.timeout_source}; --prune removes them), "
                   f"{held} held by a running compile")
        for lk in sorted(self.locks, key=lambda lk: -lk.age_s)[:10]:
            state = "held now" if lk.held else "stale" if lk.stale else "fresh"
            out.append(f"    {printable(lk.path)}  {ago(lk.age_s)} old, {state}")
        if len(self.locks) > 10:
            out.append(f"    ... and {len(self.locks) - 10} more")
        if self.other:
            out.append(f"  other      {len(self.other)} file(s) that are not native cache files "
                       "(left alone), e.g. " + printable(self.other[0]))
        if self.unreadable:
            out.append(f"  unreadable {len(self.unreadable)} folder(s), e.g. "
                       f"{self.unreadable[0]}: run as the user who compiled")
        return out

    @property
    def prunable(self) -> list[tuple[str, Path]]:
        """(what, path) of everything ``prune_native`` would remove."""
        return ([("temp leftover", f.path) for f in self.leftovers]
                + [("zero-size NEFF", f.path) for f in self.zero_size]
                + [("stale lock", lk.path) for lk in self.stale_locks])


def _listed(files: list[CacheFile], now: float, limit: int = 5) -> list[str]:
    out = [f"    {printable(f.path)}  ({ago(now - f.mtime)} old)" for f in files[:limit]]
    return out + ([f"    ... and {len(files) - limit} more"] if len(files) > limit else [])


def _lstat(path: Path) -> os.stat_result | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None  # never follows or counts a link


def _beneath(base: Path, path: Path) -> os.stat_result | None:
    """``path``'s stat if it is a regular file reached from ``base`` through real folders only;
    None if it is missing, not a regular file, or any folder on the way is a link (which could
    lead out of the cache or lock folder). ``base`` itself may be a link: the user named it."""
    try:
        rel = path.relative_to(base).parts
    except ValueError:
        return None
    folder = base
    for part in rel[:-1]:
        folder = folder / part
        try:
            if not stat.S_ISDIR(folder.lstat().st_mode):
                return None
        except OSError:
            return None
    return _lstat(path) if rel else None


def _unlink_beneath(base: Path, path: Path) -> None:
    """Remove the regular file ``path`` below ``base`` without following any link on the way:
    each folder is opened relative to the one above with ``O_NOFOLLOW``, so a folder swapped
    for a link after the checks raises instead of leading elsewhere."""
    rel = path.relative_to(base).parts
    if os.unlink not in os.supports_dir_fd or not hasattr(os, "O_NOFOLLOW"):  # pragma: no cover
        if _beneath(base, path) is None:
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


def _classify(root: Path, rel: tuple[str, ...], st: os.stat_result) -> tuple[str, CacheFile]:
    """("neff" | "temp" | "other", file) for a regular file at ``root/rel``."""
    path = root.joinpath(*rel)
    if len(rel) == 3 and _HEX2.fullmatch(rel[0]) and _HEX2.fullmatch(rel[1]):
        key = rel[2].removesuffix(".neff")
        if rel[2].endswith(".neff") and _HEX32.fullmatch(key) and key[:2] == rel[0] \
                and key[2:4] == rel[1]:
            return "neff", CacheFile(path, "cpp", st.st_size, st.st_mtime, key)
        if rel[2].startswith(".tmp."):
            return "temp", CacheFile(path, "cpp", st.st_size, st.st_mtime)
    if len(rel) == 2 and _HEX64.fullmatch(rel[0]):
        if rel[1] == f"{rel[0]}.neff":
            return "neff", CacheFile(path, "python", st.st_size, st.st_mtime, rel[0])
        if rel[1].startswith("tmp") and rel[1].endswith(".tmp"):
            return "temp", CacheFile(path, "python", st.st_size, st.st_mtime, rel[0])
    return "other", CacheFile(path, "", st.st_size, st.st_mtime)


def _held(path: Path) -> bool | None:
    """Whether someone holds the flock on ``path`` now (takes and drops a shared lock)."""
    try:
        import fcntl

        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW)
    except (ImportError, OSError):
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except BlockingIOError:
        return True
    except OSError:
        return None
    finally:
        os.close(fd)  # closing drops our shared lock


def _scan_locks(local_dir: Path, timeout_s: int, now: float) -> list[LockFile]:
    found: list[tuple[Path, str, str]] = []
    try:
        found += [(p, "cpp", p.stem) for p in (local_dir / "locks").glob("*.lock")
                  if _HEX32.fullmatch(p.stem)]
        found += [(p / "locks" / "compile.lock", "python", p.name) for p in local_dir.iterdir()
                  if _HEX64.fullmatch(p.name)]
    except OSError:
        pass  # no local folder yet, or not ours to read
    locks = []
    for path, kind, key in sorted(found):
        st = _beneath(local_dir, path)  # a linked locks/ or <h>/ folder is never followed
        if st is None:
            continue
        age = now - st.st_mtime
        held = _held(path)
        locks.append(LockFile(path, kind, key, age, held, age > timeout_s and held is not True))
    return locks


def scan_native(root: Path) -> NativeCache:
    """Every file under ``root`` sorted into NEFFs / zero-size / temp / other, plus the locks."""
    local_dir, local_source = native_local_dir()
    timeout_s, timeout_source = lock_timeout()
    cache = NativeCache(local_dir, local_source, timeout_s, timeout_source)
    now = time.time()

    def onerror(exc: OSError) -> None:
        if Path(exc.filename or "") == root:
            raise ValueError(f"cannot read the NEFF cache {printable(root)}: {exc.strerror}; run "
                             "as the user who compiled, or pass a folder you can read") from exc
        cache.unreadable.append(printable(exc.filename))

    for dirpath, _dirs, files in os.walk(root, onerror=onerror):
        base = Path(dirpath).relative_to(root).parts
        for name in sorted(files):
            st = _lstat(Path(dirpath) / name)
            what, f = _classify(root, (*base, name), st) if st else \
                ("other", CacheFile(Path(dirpath) / name, "", 0, 0.0))
            if what == "neff":
                (cache.neffs if f.size > 0 else cache.zero_size).append(f)
            elif what == "temp":
                cache.temps.append(f)
            else:
                cache.other.append(f.path)
    cache.locks = _scan_locks(local_dir, timeout_s, now)
    return cache


@dataclass
class PruneItem:
    """One file prune looked at, and what happened to it."""

    what: str   # "temp leftover" | "zero-size NEFF" | "stale lock"
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
                    "stale locks.")
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
    """Remove the temp leftovers, zero-size NEFFs and stale locks of ``cache`` (a dry run lists
    them). Each file is checked again while holding its key's lock (the lock writers hold), so
    a running compile never loses a file; good NEFFs and fresh or held locks are never touched.
    As with torch-neuronx's own stale-lock breaking, a process that opened a lock just before it
    is removed may compile that graph once more; the NEFF is the same."""
    result = PruneResult(root, cache.local_dir, dry_run)

    def old(base: Path, path: Path) -> bool:
        st = _beneath(base, path)
        return st is not None and time.time() - st.st_mtime > cache.timeout_s

    def empty(base: Path, path: Path) -> bool:
        st = _beneath(base, path)
        return st is not None and st.st_size == 0

    for f in cache.leftovers:
        result.items.append(_remove("temp leftover", root, f.path,
                                    f.lock_path(cache.local_dir), old, dry_run))
    for f in cache.zero_size:
        result.items.append(_remove("zero-size NEFF", root, f.path,
                                    f.lock_path(cache.local_dir), empty, dry_run))
    for lk in cache.stale_locks:
        result.items.append(_remove("stale lock", cache.local_dir, lk.path, lk.path, old,
                                    dry_run))
    return result
