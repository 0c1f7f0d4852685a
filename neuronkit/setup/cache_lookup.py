"""Where one cache key's entry lives in a cache folder, and whether it is there now.

Three caches, as recorded in an event's ``cache_key`` lookups (torch 2.13 and the torch-neuronx
snapshot; checked by compiling with ``TORCHINDUCTOR_CACHE_DIR`` set and listing the folder):

- ``fx_graph``, inductor's FX graph cache: ``<dir>/fxgraph/<key[1:3]>/<key>/<entry files>``
  (``torch/_inductor/codecache.py:1884,1891``). Each file is one compiled version (its name a
  hash of its bytes, ``:2119``); a lookup reads every file not starting with ``.`` (those are
  ``write_atomic``'s temp files, ``:538,1709``) and serves the first whose guards hold (``:1770``).
- ``aot_autograd``: ``<dir>/aotautograd/<key>/<entry files>``
  (``torch/_functorch/_aot_autograd/autograd_cache.py:1155-1166``). Its entry only points at the
  FX graph entry: a hit loads that by its key, and without it the lookup is a miss
  (``aot_autograd_result.py:193-214``, ``autograd_cache.py:1060``). So the FX key decides.
- ``neff``, native torch-neuronx's NEFF cache: ``<dir>/<pk[0:2]>/<pk[2:4]>/<pk>.neff`` by the
  persistent key, 32 lowercase hex of an XXH3-128 of the in-memory key and the HLO
  (``core/cache/CacheUtils.cpp:11-34``, ``PersistentCacheBackend.cpp:64``); a file of size 0
  reads as a miss (``:91``). The folder is ``cache_native.native_cache_dir``.

``<dir>`` for inductor: ``TORCHINDUCTOR_CACHE_DIR``, else ``<tempdir>/torchinductor_<user>``
(``torch/_inductor/runtime/cache_dir_utils.py:14-33``). Links are followed, as torch and the C++
``ifstream`` do. Entries are never opened or unpickled: whether an FX entry's guards hold (only
graphs with dynamic shapes have any) cannot be told from outside.
"""
from __future__ import annotations

import getpass
import os
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path

from neuronkit.setup.cache_native import CACHE_DIR_ENV, native_cache_dir

__all__ = ["DIR_ENV", "INDUCTOR_DIR_ENV", "LOOKUP_CACHES", "Entry", "cache_dir_for", "entry_path",
           "find_entry", "inductor_cache_dir"]

INDUCTOR_DIR_ENV = "TORCHINDUCTOR_CACHE_DIR"
LOOKUP_CACHES: tuple[str, ...] = ("fx_graph", "aot_autograd", "neff")
_INDUCTOR_KEY = re.compile(r"[A-Za-z0-9_-]{3,200}")  # "f" + base32 of a sha256 in practice
_PERSISTENT_KEY = re.compile(r"[0-9a-f]{32}")


def inductor_cache_dir() -> tuple[Path, str]:
    """Inductor's cache folder here, and why (torch's ``cache_dir()``, without creating it)."""
    value = os.environ.get(INDUCTOR_DIR_ENV)
    if value is not None:
        return Path(os.path.abspath(os.path.expanduser(value))), f"from {INDUCTOR_DIR_ENV}"
    try:
        user = getpass.getuser()
    except (KeyError, ModuleNotFoundError, OSError):
        getuid = getattr(os, "getuid", None)
        user = f"uid_{getuid()}" if callable(getuid) else "unknown_user"
    user = re.sub(r'[\\/:*?"<>|]', "_", user)
    return Path(tempfile.gettempdir()) / f"torchinductor_{user}", "the inductor default"


def cache_dir_for(cache: str) -> tuple[Path, str]:
    """The default folder of a lookup's cache here, and why."""
    if cache == "neff":
        return native_cache_dir()
    return inductor_cache_dir()


def entry_path(cache: str, cache_dir: Path, key: str) -> Path | None:
    """Where ``key``'s entry lives (a folder for inductor's caches, a file for a NEFF); None
    for a key that cannot be one of that cache (it could name a path outside the folder)."""
    if cache == "neff":
        return (cache_dir / key[0:2] / key[2:4] / f"{key}.neff"
                if _PERSISTENT_KEY.fullmatch(key) else None)
    if not _INDUCTOR_KEY.fullmatch(key):
        return None
    if cache == "fx_graph":
        return cache_dir / "fxgraph" / key[1:3] / key
    if cache == "aot_autograd":
        return cache_dir / "aotautograd" / key
    return None


@dataclass
class Entry:
    """What a folder holds for one key: ``found`` (an entry torch would read) and why not."""

    cache: str
    key: str
    path: Path | None
    found: bool
    note: str = ""  # why not found, or what a found entry leaves open


def _entry_files(folder: Path) -> int:
    """Files of an inductor key folder that a lookup would read: size > 0, not ``.``-temp."""
    try:
        names = os.listdir(folder)
    except OSError:
        return 0
    count = 0
    for name in names:
        if name.startswith("."):
            continue
        try:
            if (folder / name).is_file() and (folder / name).stat().st_size > 0:
                count += 1
        except OSError:
            continue
    return count


def find_entry(cache: str, cache_dir: Path, key: str) -> Entry:
    """Whether ``cache_dir`` holds an entry for ``key`` of ``cache`` now."""
    path = entry_path(cache, cache_dir, key)
    if path is None:
        what = "a 32-hex persistent key" if cache == "neff" else "a key of inductor's cache"
        return Entry(cache, key, None, False, f"not {what}")
    if cache == "neff":
        try:
            size = path.stat().st_size if path.is_file() else -1
        except OSError:
            size = -1
        if size > 0:
            return Entry(cache, key, path, True)
        return Entry(cache, key, path, False, "its NEFF file is empty (read as a miss)"
                     if size == 0 else "no NEFF file for its key")
    files = _entry_files(path)
    if files:
        return Entry(cache, key, path, True, f"{files} version(s) stored" if files > 1 else "")
    return Entry(cache, key, path, False, "no entry for its key")


# the environment variable that moves each cache's default folder (for messages)
DIR_ENV = {"fx_graph": INDUCTOR_DIR_ENV, "aot_autograd": INDUCTOR_DIR_ENV, "neff": CACHE_DIR_ENV}
