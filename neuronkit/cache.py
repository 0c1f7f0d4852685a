"""Summarise a Neuron persistent compile cache folder (read-only).

Layout written by neuronx-cc: ``<cache>/neuronxcc-<version>/MODULE_<hlo-hash>+<flags-hash>/``
holding ``model.neff`` (the compiled graph), ``model.done`` (success marker), ``model.log`` and
``*.lock`` files while a compile runs. A failed entry blocks recompiling that graph until it is
removed, so the failed ones are listed by path.
"""
from __future__ import annotations

import os
import shlex
import time
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_CACHE_DIR = "/var/tmp/neuron-compile-cache"
STATES = ("ok", "failed", "locked", "empty")

__all__ = ["inspect_cache", "CacheReport", "default_cache_dir", "human_size"]


@dataclass
class CacheEntry:
    """One compiled graph: ``neuronxcc-<version>/MODULE_.../``."""

    path: Path
    version: str
    state: str  # "ok" | "failed" | "locked" | "empty"
    size: int
    mtime: float
    error: str = ""  # for failed entries: the last error-looking line of model.log


@dataclass
class CacheReport:
    """What the cache folder holds; ``str()`` is a readable summary."""

    path: Path
    source: str = ""  # where the folder came from (argument, NEURON_CC_FLAGS, default)
    exists: bool = True
    entries: list[CacheEntry] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(e.state == s for e in self.entries) for s in STATES}

    @property
    def total_size(self) -> int:
        return sum(e.size for e in self.entries)

    @property
    def newest(self) -> CacheEntry | None:
        return max(self.entries, key=lambda e: e.mtime, default=None)

    @property
    def failed(self) -> list[CacheEntry]:
        return [e for e in self.entries if e.state == "failed"]

    @property
    def by_version(self) -> dict[str, dict[str, int]]:
        table: dict[str, dict[str, int]] = {}
        for e in self.entries:
            table.setdefault(e.version, dict.fromkeys(STATES, 0))[e.state] += 1
        return dict(sorted(table.items()))

    def summary_line(self) -> str:
        """One line, as ``neuronkit doctor`` shows it."""
        if not self.exists:
            return f"{self.path}: not found (nothing compiled for Neuron here yet)"
        c = self.counts
        return (f"{self.path}: {len(self.entries)} graphs ({c['ok']} ok, {c['failed']} failed, "
                f"{c['locked']} locked, {c['empty']} empty), {human_size(self.total_size)}")

    def __str__(self) -> str:
        if not self.exists and self.source == "as given":
            return (f"Neuron compile cache: no folder at {self.path}. Check the path: pass the "
                    "folder holding the neuronxcc-<version> folders, or nothing for the default.")
        if not self.exists:
            return (f"Neuron compile cache: no folder at {self.path} ({self.source}).\n"
                    "Nothing has been compiled for Neuron on this machine with these settings; "
                    "the folder appears after the first Neuron compile. Pass another folder "
                    "with `neuronkit cache DIR`.")
        lines = [f"Neuron compile cache: {self.path} ({self.source})"]
        if not self.entries:
            lines.append("  no compiled graphs in it (no neuronxcc-*/MODULE_* folders)")
            return "\n".join(lines)
        c, newest = self.counts, self.newest
        assert newest is not None  # there are entries
        lines += [f"  graphs     {len(self.entries)}: {c['ok']} ok, {c['failed']} failed, "
                  f"{c['locked']} locked (compiling now, or a compile that died), "
                  f"{c['empty']} empty",
                  f"  size       {human_size(self.total_size)}",
                  f"  newest     {newest.path.name} ({newest.version}, {_ago(newest.mtime)})"]
        for version, counts in self.by_version.items():
            lines.append(f"  neuronxcc-{version}: "
                         + ", ".join(f"{n} {s}" for s, n in counts.items()))
        if self.failed:
            lines.append("  failed entries block recompiling their graph until removed "
                         "(rm -r the folder, then run again):")
            for e in self.failed[:10]:
                lines.append(f"    {e.path}" + (f"  [{e.error}]" if e.error else ""))
            if len(self.failed) > 10:
                lines.append(f"    ... and {len(self.failed) - 10} more")
        return "\n".join(lines)


def human_size(nbytes: int) -> str:
    size = float(nbytes)
    for unit in ("B", "KB", "MB", "GB"):
        if size < 1024 or unit == "GB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024
    return f"{size:.1f} GB"  # pragma: no cover


def _ago(mtime: float) -> str:
    seconds = max(0.0, time.time() - mtime)
    for unit, span in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= span:
            return f"{seconds / span:.0f} {unit} ago"
    return f"{seconds:.0f} s ago"


def default_cache_dir() -> tuple[Path, str]:
    """The cache folder the Neuron compiler uses here, and why."""
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


def _entry(path: Path, version: str) -> CacheEntry:
    size, mtime = 0, path.stat().st_mtime
    names: set[str] = set()     # file names at any depth, for the state checks below
    neff = False                # a non-empty model.neff somewhere in the entry
    for f in path.rglob("*"):
        try:  # a running compile may remove a lock file while we look
            if not f.is_file():
                continue
            st = f.stat()
        except FileNotFoundError:
            continue
        size += st.st_size      # every file counts, even nested ones sharing a name
        mtime = max(mtime, st.st_mtime)
        names.add(f.name)
        neff = neff or (f.name == "model.neff" and st.st_size > 0)
    error = ""
    if any(n.endswith(".lock") for n in names):
        state = "locked"
    elif "model.done" in names or neff:
        state = "ok"
    elif not names:
        state = "empty"
    else:
        state = "failed"
        error = _last_error(path / "model.log")
    return CacheEntry(path=path, version=version, state=state, size=size, mtime=mtime, error=error)


def _last_error(log: Path) -> str:
    try:
        lines = [ln.strip() for ln in log.read_text(errors="replace").splitlines() if ln.strip()]
    except OSError:
        return ""
    errors = [ln for ln in lines if "error" in ln.lower()]
    line = (errors or lines or [""])[-1]
    return line if len(line) <= 120 else line[:117] + "..."


def inspect_cache(path: str | os.PathLike | None = None) -> CacheReport:
    """Count the cache's graphs that succeeded / failed / are locked / are empty; never writes.

    ``path``: the cache root (holding ``neuronxcc-*`` folders) or one ``neuronxcc-<version>``
    folder. Default: ``--cache_dir`` in ``NEURON_CC_FLAGS``, else ``/var/tmp/neuron-compile-cache``.
    """
    if path is None:
        root, source = default_cache_dir()
    else:
        root, source = Path(path).expanduser(), "as given"
    if not root.exists():
        return CacheReport(path=root, source=source, exists=False)
    if not root.is_dir():
        raise ValueError(f"{root} is a file, not a Neuron compile cache folder "
                         "(expected a folder holding neuronxcc-<version>/MODULE_* folders)")
    try:
        versions = [root] if root.name.startswith("neuronxcc-") else \
            sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("neuronxcc-"))
        entries = [_entry(module, vdir.name.removeprefix("neuronxcc-"))
                   for vdir in versions for module in sorted(vdir.iterdir())
                   if module.is_dir() and module.name.startswith("MODULE_")]
    except PermissionError as exc:
        raise ValueError(f"cannot read the compile cache {root}: {exc.strerror} ({exc.filename}); "
                         "run as the user who compiled, or pass a folder you can read") from exc
    return CacheReport(path=root, source=source, exists=True, entries=entries)
