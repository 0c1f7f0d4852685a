"""The NEFF cache of native torch-neuronx ("TorchNeuron"): where it is, and its files read into
NEFFs, zero-size NEFFs, temp files and locks (pruning them is in ``cache_prune``).

One folder (``TORCH_NEURONX_NEFF_CACHE_DIR``, default ``/tmp/neff_cache``) holds two layouts:

- C++ path (async eager ops, ``torch.compile``): ``<dir>/<k[0:2]>/<k[2:4]>/<k>.neff``, ``k`` = 32
  hex; written through ``.tmp.XXXXXX`` in the shard folder, then renamed. A file of size 0 reads
  as a miss. Lock: ``<local>/locks/<k>.lock``.
- Python path (sync-mode eager ops): ``<dir>/<h>/<h>.neff``, ``h`` = 64 hex (sha256); written
  through ``tmpXXXXXXXX.tmp`` in ``<h>/``. A file of size 0 is read back as an empty NEFF.
  Lock: ``<local>/<h>/locks/compile.lock``.

``<local>`` is ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`` (default ``/tmp/local_cache``). Locks are
``flock`` files left behind after use and reused by the next build of the same key: C++ opens
with ``O_CREAT`` and never touches the file's time (``core/cache/FileLock.cpp:87``), so a lock
file's mtime says when it was made, not when it was last taken. A held lock is a build in
progress; how long it has been held cannot be read from the file. A waiter breaks it (removes
the file and takes a new one) after ``TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT`` seconds (default
1200) counted from the start of *its own* wait (``FileLock.cpp:114-167``). The holder is named
where ``/proc/locks`` tells. An old lock file nobody holds is a normal leftover. Only the files
named above are ever removed (by ``cache_prune``), and only when no compile can be using them.
Links are never followed: a linked file or folder (which could lead out of the cache, or back
into it) is neither counted nor removed, and nothing is removed through one.
"""
from __future__ import annotations

import os
import re
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.setup.cache_text import printable

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
# the writers' temp names exactly: C++ mkstemp(".tmp.XXXXXX"), Python NamedTemporaryFile(suffix=".tmp")
_CPP_TEMP = re.compile(r"\.tmp\.[A-Za-z0-9]{6}")
_PYTHON_TEMP = re.compile(r"tmp[a-z0-9_]{8}\.tmp")

__all__ = ["CACHE_DIR_ENV", "DISABLE_ENV", "LOCAL_DIR_ENV", "LOCK_TIMEOUT_ENV", "NATIVE_CACHE_DIR",
           "NATIVE_LOCAL_DIR", "CacheFile", "LockFile", "LockHolder", "NativeCache", "cache_switch",
           "file_beneath", "flock_holders", "is_native_shard", "lock_timeout", "native_cache_dir",
           "native_local_dir", "process_command", "scan_native"]

PROC_LOCKS = "/proc/locks"  # Linux: every file lock, with the pid that took it and its inode


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
class LockHolder:
    """The process ``/proc/locks`` names for a held flock: the pid that took it. ``command``:
    its command line where readable. ``running`` False: that pid is gone, and a process that
    inherited the lock's descriptor holds it, e.g. a neuronx-cc it started (C++ opens the lock
    without ``O_CLOEXEC``, ``FileLock.cpp:87``, then fork/execs the compiler,
    ``core/compilation/NeuronCompiler.cpp:121,158``)."""

    pid: int
    command: str | None
    running: bool

    def __str__(self) -> str:
        me = " (this process)" if self.pid == os.getpid() else ""
        if not self.running:
            return (f"pid {self.pid}, no longer running (a process it started, e.g. its "
                    "neuronx-cc, still holds the lock)")
        return f"pid {self.pid}{me}" + (f" ({self.command})" if self.command else "")


@dataclass
class LockFile:
    """A lock file. ``held``: someone holds its flock now (a non-blocking ``flock`` attempt
    failed; None: could not check): a build in progress. ``holders``: who, from ``/proc/locks``
    (empty where it does not say). ``age_s``: since the file was made; lock files are reused and
    their time never refreshed, so it says nothing of how long a held lock has been held.
    ``leftover``: not held and older than the lock timeout, what a finished compile leaves."""

    path: Path
    kind: str  # "cpp" | "python"
    key: str
    age_s: float
    held: bool | None  # None: could not check
    holders: list[LockHolder] = field(default_factory=list)
    leftover: bool = False


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
    def held_locks(self) -> list[LockFile]:
        """Locks someone holds now: builds in progress (for how long, no file tells)."""
        return [lk for lk in self.locks if lk.held is True]

    @property
    def leftover_locks(self) -> list[LockFile]:
        """Lock files older than the timeout that nobody holds: normal leftovers."""
        return [lk for lk in self.locks if lk.leftover]

    @property
    def prunable(self) -> list[tuple[str, Path]]:
        """(what, path) of everything ``prune_native`` would remove (never a held lock)."""
        return ([("temp leftover", f.path) for f in self.leftovers]
                + [("zero-size NEFF", f.path) for f in self.zero_size]
                + [("old lock file", lk.path) for lk in self.leftover_locks])


def _lstat(path: Path) -> os.stat_result | None:
    try:
        st = path.lstat()
    except OSError:
        return None
    return st if stat.S_ISREG(st.st_mode) else None  # never follows or counts a link


def file_beneath(base: Path, path: Path) -> os.stat_result | None:
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


def _classify(root: Path, rel: tuple[str, ...], st: os.stat_result) -> tuple[str, CacheFile]:
    """("neff" | "temp" | "other", file) for a regular file at ``root/rel``."""
    path = root.joinpath(*rel)
    if len(rel) == 3 and _HEX2.fullmatch(rel[0]) and _HEX2.fullmatch(rel[1]):
        key = rel[2].removesuffix(".neff")
        if rel[2].endswith(".neff") and _HEX32.fullmatch(key) and key[:2] == rel[0] \
                and key[2:4] == rel[1]:
            return "neff", CacheFile(path, "cpp", st.st_size, st.st_mtime, key)
        if _CPP_TEMP.fullmatch(rel[2]):
            return "temp", CacheFile(path, "cpp", st.st_size, st.st_mtime)
    if len(rel) == 2 and _HEX64.fullmatch(rel[0]):
        if rel[1] == f"{rel[0]}.neff":
            return "neff", CacheFile(path, "python", st.st_size, st.st_mtime, rel[0])
        if _PYTHON_TEMP.fullmatch(rel[1]):
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


def flock_holders(locks_text: str) -> dict[tuple[int, int, int], list[int]]:
    """``{(major, minor, inode): [pid, ...]}`` of the granted FLOCK locks in ``/proc/locks``
    text (lines ``1: FLOCK  ADVISORY  WRITE 4507 fe:00:2148327 0 EOF``; device numbers in hex;
    ``->`` lines are blocked waiters, not holders)."""
    found: dict[tuple[int, int, int], list[int]] = {}
    for line in locks_text.splitlines():
        parts = line.split()
        if len(parts) < 6 or parts[1] != "FLOCK":
            continue  # POSIX / OFDLCK locks, a waiter ("->"), or not a lock line
        device = parts[5].split(":")
        try:
            pid, key = int(parts[4]), (int(device[0], 16), int(device[1], 16), int(device[2]))
        except (ValueError, IndexError):
            continue
        if pid > 0:
            found.setdefault(key, []).append(pid)
    return found


def process_command(pid: int, limit: int = 160) -> str | None:
    """``/proc/<pid>/cmdline`` as one printable line (cut at ``limit``), or None if unreadable."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return None
    text = printable(raw.rstrip(b"\0").replace(b"\0", b" ").decode(errors="replace"))
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _holders(st: os.stat_result, table: dict[tuple[int, int, int], list[int]]) -> list[LockHolder]:
    pids = table.get((os.major(st.st_dev), os.minor(st.st_dev), st.st_ino), [])
    return [LockHolder(pid, process_command(pid), Path(f"/proc/{pid}").exists())
            for pid in sorted(set(pids))]


def _scan_locks(local_dir: Path, timeout_s: int, now: float) -> list[LockFile]:
    found: list[tuple[Path, str, str]] = []
    try:
        found += [(p, "cpp", p.stem) for p in (local_dir / "locks").glob("*.lock")
                  if _HEX32.fullmatch(p.stem)]
        found += [(p / "locks" / "compile.lock", "python", p.name) for p in local_dir.iterdir()
                  if _HEX64.fullmatch(p.name)]
    except OSError:
        pass  # no local folder yet, or not ours to read
    table: dict[tuple[int, int, int], list[int]] | None = None
    locks = []
    for path, kind, key in sorted(found):
        st = file_beneath(local_dir, path)  # a linked locks/ or <h>/ folder is never followed
        if st is None:
            continue
        held = _held(path)
        holders: list[LockHolder] = []
        if held:
            if table is None:
                try:
                    table = flock_holders(Path(PROC_LOCKS).read_text(errors="replace"))
                except OSError:
                    table = {}  # not Linux, or no /proc: the holder stays unnamed
            holders = _holders(st, table)
        age = now - st.st_mtime  # since the file was made: never how long it has been held
        locks.append(LockFile(path, kind, key, age, held, holders,
                              leftover=held is False and age > timeout_s))
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
