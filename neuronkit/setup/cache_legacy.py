"""The legacy (XLA-era) compile cache: where it is, and its ``neuronxcc-<version>/MODULE_*``
folders read into entries (ok, failed, locked or empty). Links are never followed."""
from __future__ import annotations

import os
import shlex
import stat
from dataclasses import dataclass
from pathlib import Path

from neuronkit.setup.cache_text import printable

DEFAULT_CACHE_DIR = "/var/tmp/neuron-compile-cache"
STATES = ("ok", "failed", "locked", "empty")

__all__ = ["DEFAULT_CACHE_DIR", "STATES", "CacheEntry", "default_cache_dir", "scan_legacy"]


@dataclass
class CacheEntry:
    """One compiled graph: ``neuronxcc-<version>/MODULE_.../``."""

    path: Path
    version: str
    state: str  # "ok" | "failed" | "locked" | "empty"
    size: int
    mtime: float
    error: str = ""  # for failed entries: the last error-looking line of model.log


def default_cache_dir() -> tuple[Path, str]:
    """The legacy (XLA-era) cache folder the Neuron compiler uses here, and why."""
    flags = os.environ.get("NEURON_CC_FLAGS", "")
    try:
        words = shlex.split(flags)
    except ValueError:
        words = flags.split()
    for i, word in enumerate(words):
        if word.startswith("--cache_dir="):
            return Path(word.split("=", 1)[1]).expanduser(), "from NEURON_CC_FLAGS --cache_dir"
        if word == "--cache_dir" and i + 1 < len(words):
            return Path(words[i + 1]).expanduser(), "from NEURON_CC_FLAGS --cache_dir"
    url = os.environ.get("NEURON_COMPILE_CACHE_URL")
    if url and "://" not in url:
        return Path(url).expanduser(), "from NEURON_COMPILE_CACHE_URL"
    return Path(DEFAULT_CACHE_DIR), "the Neuron default"


def _subfolders(folder: Path, prefix: str, links: list[Path]) -> list[Path]:
    """The real sub-folders of ``folder`` whose names start with ``prefix``; links are never
    followed (one may point out of the cache, or back into it): they go to ``links``."""
    found = []
    with os.scandir(folder) as it:
        for item in it:
            if not item.name.startswith(prefix):
                continue
            if item.is_symlink():
                links.append(Path(item.path))
            elif item.is_dir(follow_symlinks=False):
                found.append(Path(item.path))
    return sorted(found)


def _state(names: set[str], neff: bool) -> str:
    """An entry's state from the names of its files and whether it holds a non-empty NEFF."""
    if any(n.endswith(".lock") for n in names):
        return "locked"
    if "model.done" in names or neff:
        return "ok"
    return "failed" if names else "empty"


def _entry(path: Path, version: str, links: list[Path]) -> CacheEntry:
    """One entry, from the real files below ``path``; links (to files or folders) are neither
    followed nor counted, only added to ``links``."""
    size, mtime = 0, path.lstat().st_mtime
    names: set[str] = set()     # file names at any depth, for the state checks below
    neff = False                # a non-empty model.neff somewhere in the entry
    for dirpath, dirs, files in os.walk(path, followlinks=False):
        folder = Path(dirpath)
        links += [folder / d for d in sorted(dirs) if (folder / d).is_symlink()]
        for name in sorted(files):
            f = folder / name
            try:  # a running compile may remove a lock file while we look
                st = f.lstat()
            except FileNotFoundError:
                continue
            if stat.S_ISLNK(st.st_mode):
                links.append(f)
                continue
            if not stat.S_ISREG(st.st_mode):
                continue
            size += st.st_size  # every file counts, even nested ones sharing a name
            mtime = max(mtime, st.st_mtime)
            names.add(name)
            neff = neff or (name == "model.neff" and st.st_size > 0)
    state = _state(names, neff)
    error = _last_error(path / "model.log") if state == "failed" else ""
    return CacheEntry(path=path, version=version, state=state, size=size, mtime=mtime, error=error)


def _last_error(log: Path) -> str:
    """The last error-looking line of ``log``; "" when it is missing, not a regular file, or a
    link (never read through: it could point anywhere)."""
    try:
        fd = os.open(log, os.O_RDONLY | getattr(os, "O_NOFOLLOW", 0))
    except OSError:
        return ""
    with os.fdopen(fd, "rb") as f:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return ""
        text = f.read().decode(errors="replace")
    lines = [ln.strip() for ln in text.splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error" in ln.lower()]
    line = (errors or lines or [""])[-1]
    return line if len(line) <= 120 else line[:117] + "..."


def _links_note(links: list[Path]) -> str:
    n = len(links)
    what = "1 symbolic link in the cache was" if n == 1 else \
        f"{n} symbolic links in the cache were"
    return (f"{what} not followed (a link can lead out of the cache or back into it; neither its "
            f"target nor what lies behind it is counted), e.g. {printable(links[0])}")


def scan_legacy(root: Path) -> tuple[list[CacheEntry], list[str]]:
    """The entries below ``root`` (the cache root, or one ``neuronxcc-<version>`` folder), and
    notes on what was not read (linked folders and files)."""
    links: list[Path] = []
    try:
        versions = [root] if root.name.startswith("neuronxcc-") else \
            _subfolders(root, "neuronxcc-", links)
        entries = [_entry(module, vdir.name.removeprefix("neuronxcc-"), links)
                   for vdir in versions
                   for module in _subfolders(vdir, "MODULE_", links)]
    except PermissionError as exc:
        raise ValueError(f"cannot read the compile cache {printable(root)}: {exc.strerror} "
                         f"({printable(exc.filename)}); run as the user who compiled, or pass a "
                         "folder you can read") from exc
    return entries, [_links_note(links)] if links else []
