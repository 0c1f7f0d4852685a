"""Writes the on-disk NEFF caches of native torch-neuronx, in both of its layouts.

Checked against (snapshot 98154b86):

- C++ (async eager ops, torch.compile): ``<TORCH_NEURONX_NEFF_CACHE_DIR>/<k[0:2]>/<k[2:4]>/<k>.neff``,
  ``k`` = 32 hex chars; written through ``.tmp.XXXXXX`` (``mkstemp``) in the shard dir, then
  renamed; a file of size <= 0 reads as a miss (``csrc/core/cache/PersistentCacheBackend.cpp:22-28,
  61-65,91-94,108-160``). Locks: ``<TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR>/locks/<k>.lock``, left
  behind after use (``csrc/core/compilation/CompilationCache.cpp:41-58,617-621``).
  Defaults ``/tmp/neff_cache`` and ``/tmp/local_cache``; an empty value means the default.
- Python (sync-mode eager ops): ``<cache dir>/<h>/<h>.neff``, ``h`` = 64 hex chars (sha256);
  lock ``<local dir>/<h>/locks/compile.lock`` (``torch_neuronx/kernels/compiler_subprocess.py:99-102,
  174-179``). Its temp files come from ``NamedTemporaryFile(suffix=".tmp")``, i.e. ``tmpXXXXXXXX.tmp``
  in ``<h>/`` (``torch_neuronx/kernels/cache_utils.py:28-38``), not ``.tmp.XXXXXX``.
  ⚠ ``cache_utils.py:8-15`` uses ``os.getenv(name, default)``, so there an *empty* value is kept
  (the current directory), unlike the C++ side.
"""
from __future__ import annotations

import hashlib
import itertools
import os
import secrets
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
LOCAL_CACHE_DIR_ENV = "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR"
DEFAULT_CACHE_DIR = "/tmp/neff_cache"
DEFAULT_LOCAL_CACHE_DIR = "/tmp/local_cache"
_seeds = itertools.count(1)


def cache_dirs(env: Mapping[str, str] | None = None) -> tuple[Path, Path]:
    """(NEFF cache dir, local cache dir) as the C++ side resolves them."""
    env = os.environ if env is None else env
    return (Path(env.get(CACHE_DIR_ENV) or DEFAULT_CACHE_DIR),
            Path(env.get(LOCAL_CACHE_DIR_ENV) or DEFAULT_LOCAL_CACHE_DIR))


def native_key(seed: object | None = None) -> str:
    """A 32-hex persistent key (C++ layout); random unless ``seed`` is given."""
    seed = next(_seeds) if seed is None else seed
    return hashlib.blake2b(f"native:{seed}".encode(), digest_size=16).hexdigest()


def python_key(seed: object | None = None) -> str:
    """A 64-hex sha256 key (Python layout)."""
    seed = next(_seeds) if seed is None else seed
    return hashlib.sha256(f"python:{seed}".encode()).hexdigest()


def atomic_write(path: Path, data: bytes) -> None:
    """``AtomicWrite``: ``.tmp.XXXXXX`` in the target dir, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.parent / f".tmp.{secrets.token_hex(3)}"
    tmp.write_bytes(data)
    tmp.rename(path)


def clear_neffs(cache_dir: Path) -> None:
    """``PersistentCacheBackend::Clear``: remove every ``*.neff`` below, then empty shard dirs."""
    if not cache_dir.exists():
        return
    for path in [p for p in cache_dir.rglob("*.neff") if p.is_file()]:
        path.unlink(missing_ok=True)
    for level1 in [p for p in cache_dir.iterdir() if p.is_dir()]:
        for level2 in [p for p in level1.iterdir() if p.is_dir()]:
            if not any(level2.iterdir()):
                level2.rmdir()
        if not any(level1.iterdir()):
            level1.rmdir()


def _stamp(path: Path, mtime: float | None) -> Path:
    if mtime is not None:
        os.utime(path, (mtime, mtime))
    return path


def _payload(size: int) -> bytes:
    return (b"NEFF" * (size // 4 + 1))[:size]


@dataclass
class NativeCacheWriter:
    """Creates cache files under ``cache_dir`` / ``local_cache_dir`` with chosen sizes and mtimes."""

    cache_dir: Path
    local_cache_dir: Path

    @classmethod
    def under(cls, root: Path | str) -> NativeCacheWriter:
        """``<root>/neff_cache`` and ``<root>/local_cache``."""
        root = Path(root)
        return cls(root / "neff_cache", root / "local_cache")

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> NativeCacheWriter:
        return cls(*cache_dirs(env))

    def env(self) -> dict[str, str]:
        """The environment variables that point torch-neuronx at these folders."""
        return {CACHE_DIR_ENV: str(self.cache_dir), LOCAL_CACHE_DIR_ENV: str(self.local_cache_dir)}

    # ---------------------------------------------------------------- C++ layout
    def neff_path(self, key: str) -> Path:
        return self.cache_dir / key[:2] / key[2:4] / f"{key}.neff"

    def neff(self, key: str | None = None, size: int = 1024, mtime: float | None = None) -> Path:
        """A complete ``ab/cd/<32 hex>.neff`` (``size=0``: the zero-size file read as a miss)."""
        path = self.neff_path(key or native_key())
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_payload(size))
        return _stamp(path, mtime)

    def tmp_leftover(self, key: str | None = None, size: int = 512,
                     mtime: float | None = None) -> Path:
        """A ``.tmp.XXXXXX`` left in a shard dir by a writer that died before ``rename``."""
        key = key or native_key()
        shard = self.cache_dir / key[:2] / key[2:4]
        shard.mkdir(parents=True, exist_ok=True)
        path = shard / f".tmp.{secrets.token_hex(3)}"
        path.write_bytes(_payload(size))
        return _stamp(path, mtime)

    def lock(self, key: str, mtime: float | None = None) -> Path:
        """``<local>/locks/<key>.lock`` (empty; flock files stay after use)."""
        path = self.local_cache_dir / "locks" / f"{key}.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return _stamp(path, mtime)

    # ---------------------------------------------------------------- Python layout
    def python_neff(self, key: str | None = None, size: int = 1024,
                    mtime: float | None = None) -> Path:
        """A ``<sha256>/<sha256>.neff`` of the sync-mode Python path."""
        key = key or python_key()
        path = self.cache_dir / key / f"{key}.neff"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(_payload(size))
        return _stamp(path, mtime)

    def python_tmp_leftover(self, key: str | None = None, size: int = 512,
                            mtime: float | None = None) -> Path:
        """A ``tmpXXXXXXXX.tmp`` left in ``<h>/`` by the Python writer."""
        key = key or python_key()
        folder = self.cache_dir / key
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"tmp{secrets.token_hex(4)}.tmp"
        path.write_bytes(_payload(size))
        return _stamp(path, mtime)

    def python_lock(self, key: str, mtime: float | None = None) -> Path:
        """``<local>/<h>/locks/compile.lock``."""
        path = self.local_cache_dir / key / "locks" / "compile.lock"
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return _stamp(path, mtime)

    # ---------------------------------------------------------------- a typical mix
    def populate(self, now: float, n_native: int = 3, n_python: int = 2,
                 size: int = 1024) -> dict[str, list[Path]]:
        """Both layouts, a zero-size NEFF, temp leftovers and locks, aged one hour apart."""
        made: dict[str, list[Path]] = {"native": [], "python": [], "zero": [], "tmp": [],
                                       "locks": []}
        for i in range(n_native):
            key = native_key(f"populate-{i}")
            made["native"].append(self.neff(key, size * (i + 1), now - 3600 * (i + 1)))
            made["locks"].append(self.lock(key, now - 3600 * (i + 1)))
        for i in range(n_python):
            key = python_key(f"populate-{i}")
            made["python"].append(self.python_neff(key, size, now - 7200 * (i + 1)))
            made["locks"].append(self.python_lock(key, now - 7200 * (i + 1)))
        made["zero"].append(self.neff(native_key("populate-zero"), 0, now - 60))
        made["tmp"].append(self.tmp_leftover(native_key("populate-tmp"), mtime=now - 86400))
        made["tmp"].append(self.python_tmp_leftover(python_key("populate-tmp"), mtime=now - 86400))
        made["locks"].append(self.lock(native_key("populate-stale"), now - 2 * 86400))
        return made
