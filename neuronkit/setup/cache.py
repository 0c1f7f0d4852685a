"""Summarise a Neuron compile cache folder (read-only), in either of its two layouts.

- ``"native"``: native torch-neuronx ("TorchNeuron") keeps NEFFs in ``TORCH_NEURONX_NEFF_CACHE_DIR``
  (default ``/tmp/neff_cache``) as ``ab/cd/<key>.neff`` and ``<sha256>/<sha256>.neff``, with
  lock files in ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR``; see :mod:`neuronkit.setup.cache_native`.
- ``"legacy"``: the XLA-based torch-neuronx (trn1/inf2) wrote
  ``<cache>/neuronxcc-<version>/MODULE_<hlo-hash>+<flags-hash>/`` holding ``model.neff`` (the
  compiled graph), ``model.done`` (success marker), ``model.log`` and ``*.lock`` files while a
  compile runs. A failed entry blocks recompiling that graph until it is removed, so the failed
  ones are listed by path.

Symbolic links in either layout are never followed (one may lead out of the cache, or back into
it): here a linked ``neuronxcc-*`` / ``MODULE_*`` folder, or a linked file or folder inside an
entry, is left out of the counts and named in a note.
"""
from __future__ import annotations

import os
import shlex
import stat
import time
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.setup.device import loaded_neuronx, module_installed, neuronx_installed
from neuronkit.setup.cache_native import (CACHE_DIR_ENV, NativeCache, PruneResult, ago, cache_switch,
                                          human_size, is_native_shard, native_cache_dir, printable,
                                          prune_native, scan_native)

DEFAULT_CACHE_DIR = "/var/tmp/neuron-compile-cache"
STATES = ("ok", "failed", "locked", "empty")
LAYOUTS = ("native", "legacy")

__all__ = ["LAYOUTS", "CacheReport", "PruneResult", "default_cache_dir", "detect_layout",
           "human_size", "inspect_cache", "printable", "prune_cache"]


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
    """What the cache folder holds; ``str()`` is a readable summary.

    ``layout`` says which layout was read: ``entries`` is filled for ``"legacy"``, ``native``
    for ``"native"``. Any text from disk in ``str()`` has its control characters escaped."""

    path: Path
    source: str = ""  # where the folder came from (argument, an env variable, default)
    exists: bool = True
    entries: list[CacheEntry] = field(default_factory=list)
    layout: str = "legacy"  # "native" | "legacy"
    layout_reason: str = ""
    native: NativeCache | None = None
    notes: list[str] = field(default_factory=list)  # settings worth a look

    @property
    def counts(self) -> dict[str, int]:
        return {s: sum(e.state == s for e in self.entries) for s in STATES}

    @property
    def total_size(self) -> int:
        if self.native is not None:
            n = self.native
            return n.neff_bytes + sum(f.size for f in n.zero_size + n.temps)
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

    @property
    def folder_fix(self) -> str:
        """How to point the compiler at another cache folder, for this layout."""
        if self.layout == "native":
            return f"set {CACHE_DIR_ENV}=<a folder you can write>"
        return "set NEURON_CC_FLAGS='--cache_dir=<a folder you can write>'"

    def summary_line(self) -> str:
        """One line, as ``neuronkit doctor`` shows it."""
        where = printable(self.path)
        if not self.exists:
            return f"{where}: not found (nothing compiled for Neuron here yet)"
        if self.native is not None:
            n = self.native
            return (f"{where}: {len(n.neffs)} NEFFs ({n.count('cpp')} C++, "
                    f"{n.count('python')} Python), {human_size(n.neff_bytes)}; "
                    f"{len(n.leftovers)} temp leftovers, {len(n.zero_size)} zero-size, "
                    f"{len(n.stale_locks)} stale locks (native layout)")
        c = self.counts
        return (f"{where}: {len(self.entries)} graphs ({c['ok']} ok, {c['failed']} failed, "
                f"{c['locked']} locked, {c['empty']} empty), {human_size(self.total_size)}")

    def __str__(self) -> str:
        where = printable(self.path)
        layout = (f"  layout     {self.layout}: "
                  + ("native torch-neuronx" if self.layout == "native"
                     else "XLA-era torch-neuronx, neuronxcc-*/MODULE_* folders")
                  + (f" ({self.layout_reason})" if self.layout_reason else ""))
        notes = [f"  note: {n}" for n in self.notes]
        if not self.exists and self.source == "as given":
            what = (f"the folder {CACHE_DIR_ENV} points at (default /tmp/neff_cache)"
                    if self.layout == "native" else "the folder holding the neuronxcc-<version> "
                    "folders")
            return "\n".join([f"Neuron compile cache: no folder at {where}. Check the path: pass "
                              f"{what}, or nothing for the default.", layout, *notes])
        if not self.exists:
            return "\n".join([
                f"Neuron compile cache: no folder at {where} ({self.source}).",
                "Nothing has been compiled for Neuron on this machine with these settings; the "
                "folder appears after the first Neuron compile. Pass another folder with "
                f"`neuronkit cache DIR`, or {self.folder_fix}.", layout, *notes])
        lines = [f"Neuron compile cache: {where} ({self.source})", layout]
        if self.native is not None:
            lines += self.native.lines()
            lines.append(f"  cache      {cache_switch()[1]}")
            if self.native.prunable:
                lines.append(f"  prune      run again with --prune to list the "
                             f"{len(self.native.prunable)} file(s) it would remove; add --yes "
                             "to remove them")
            return "\n".join(lines + notes)
        if not self.entries:
            lines.append("  no compiled graphs in it (no neuronxcc-*/MODULE_* folders)")
            return "\n".join(lines + notes)
        c, newest = self.counts, self.newest
        assert newest is not None  # there are entries
        lines += [f"  graphs     {len(self.entries)}: {c['ok']} ok, {c['failed']} failed, "
                  f"{c['locked']} locked (compiling now, or a compile that died), "
                  f"{c['empty']} empty",
                  f"  size       {human_size(self.total_size)}",
                  f"  newest     {printable(newest.path.name)} ({printable(newest.version)}, "
                  f"{_ago(newest.mtime)})"]
        for version, counts in self.by_version.items():
            lines.append(f"  neuronxcc-{printable(version)}: "
                         + ", ".join(f"{n} {s}" for s, n in counts.items()))
        if self.failed:
            lines.append("  failed entries block recompiling their graph until removed "
                         "(rm -r the folder, then run again):")
            for e in self.failed[:10]:
                lines.append(f"    {printable(e.path)}"
                             + (f"  [{printable(e.error)}]" if e.error else ""))
            if len(self.failed) > 10:
                lines.append(f"    ... and {len(self.failed) - 10} more")
        return "\n".join(lines + notes)


def _ago(mtime: float) -> str:
    return f"{ago(time.time() - mtime)} ago"


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


def _package_layout() -> tuple[str, str] | None:
    if loaded_neuronx() is None and not neuronx_installed():
        return None
    if module_installed("torch_xla"):
        return "legacy", "torch-neuronx is installed with torch_xla (the XLA-based one)"
    return "native", "torch-neuronx is installed without torch_xla"


def _on_disk(root: Path) -> str | None:
    """The layout the folder's contents show, if any."""
    if root.name.startswith("neuronxcc-"):
        return "legacy"
    try:
        with os.scandir(root) as it:
            names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    if any(n.startswith("neuronxcc-") for n in names):
        return "legacy"
    return "native" if any(is_native_shard(n) for n in names) else None


def detect_layout(path: str | os.PathLike | None = None) -> tuple[str, str]:
    """(``"native"`` | ``"legacy"``, why) for the folder ``path``, or for this machine's cache.

    What the folder holds decides; then the installed torch-neuronx (native without torch_xla);
    then the environment; then which default folder exists (native when neither does)."""
    if path is not None:
        root = Path(path).expanduser()
        found = _on_disk(root)
        if found:
            return found, ("it holds neuronxcc-* folders" if found == "legacy"
                           else "it holds native cache folders (ab/ or <sha256>/)")
        if root == native_cache_dir()[0]:
            return "native", "it is the native cache folder"
        return _package_layout() or ("legacy", "nothing in it or installed here shows a layout")
    package = _package_layout()
    if package:
        return package
    if os.environ.get(CACHE_DIR_ENV):
        return "native", f"{CACHE_DIR_ENV} is set"
    legacy_dir, legacy_source = default_cache_dir()
    if legacy_source != "the Neuron default":
        return "legacy", f"the folder comes {legacy_source}"
    if legacy_dir.exists() and not native_cache_dir()[0].exists():
        return "legacy", "only the legacy cache folder exists"
    return "native", "no torch-neuronx installed here; native is the current one"


def _notes(layout: str, root: Path, forced: bool, auto_default: bool) -> list[str]:
    """Settings and folders worth a look, for the layout read."""
    notes = []
    if forced and _on_disk(root) not in (None, layout):
        other = "native" if layout == "legacy" else "legacy"
        notes.append(f"this folder looks like the {other} layout: try --layout {other}")
    if auto_default:
        other_dir = default_cache_dir()[0] if layout == "native" else native_cache_dir()[0]
        if other_dir.is_dir():
            other = "legacy" if layout == "native" else "native"
            notes.append(f"the {other} cache folder {printable(other_dir)} exists too: "
                         f"`neuronkit cache --layout {other}`")
    if layout != "native":
        return notes
    if default_cache_dir()[1] == "from NEURON_CC_FLAGS --cache_dir":
        notes.append("NEURON_CC_FLAGS has --cache_dir, an XLA-era option: native torch-neuronx "
                     "passes NEURON_CC_FLAGS straight to neuronx-cc (and into every cache key) "
                     f"and caches in {CACHE_DIR_ENV} instead. Fix: move the folder to "
                     f"{CACHE_DIR_ENV} and drop --cache_dir")
    if os.environ.get("NEURON_COMPILE_CACHE_URL"):
        notes.append("NEURON_COMPILE_CACHE_URL is XLA-era: native torch-neuronx ignores it")
    if os.environ.get(CACHE_DIR_ENV) == "":
        notes.append(f"{CACHE_DIR_ENV} is set but empty: the C++ path then uses /tmp/neff_cache, "
                     "the Python sync-mode path the current folder. Fix: unset it or name a folder")
    if os.environ.get("TORCH_NEURONX_DISABLE_NEFF_CACHE") is not None:
        notes.append("TORCH_NEURONX_DISABLE_NEFF_CACHE switches off the in-process NEFF dict "
                     "only; the disk cache's switch is TORCH_NEURONX_NEFF_DISABLE_CACHE")
    return notes


def inspect_cache(path: str | os.PathLike | None = None, *,
                  layout: str | None = None) -> CacheReport:
    """Read the cache folder and count what it holds; never writes.

    ``layout``: ``"native"`` or ``"legacy"``; default: :func:`detect_layout`. ``path``: native,
    the folder ``TORCH_NEURONX_NEFF_CACHE_DIR`` names (default ``/tmp/neff_cache``); legacy, the
    cache root (holding ``neuronxcc-*`` folders) or one ``neuronxcc-<version>`` folder, default
    ``--cache_dir`` in ``NEURON_CC_FLAGS``, else ``/var/tmp/neuron-compile-cache``.
    """
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be 'native' or 'legacy', not {layout!r}")
    chosen, why = (layout, "as asked") if layout else detect_layout(path)
    if path is None:
        root, source = native_cache_dir() if chosen == "native" else default_cache_dir()
    else:
        root, source = Path(path).expanduser(), "as given"
    notes = _notes(chosen, root, forced=layout is not None, auto_default=path is None and
                   layout is None)
    report = CacheReport(path=root, source=source, exists=root.exists(), layout=chosen,
                         layout_reason=why, notes=notes)
    if not report.exists:
        return report
    if not root.is_dir():
        expected = ("the folder TORCH_NEURONX_NEFF_CACHE_DIR names" if chosen == "native"
                    else "a folder holding neuronxcc-<version>/MODULE_* folders")
        raise ValueError(f"{printable(root)} is a file, not a Neuron compile cache folder "
                         f"(expected {expected})")
    if chosen == "native":
        report.native = scan_native(root)
        return report
    links: list[Path] = []
    try:
        versions = [root] if root.name.startswith("neuronxcc-") else \
            _subfolders(root, "neuronxcc-", links)
        report.entries = [_entry(module, vdir.name.removeprefix("neuronxcc-"), links)
                          for vdir in versions
                          for module in _subfolders(vdir, "MODULE_", links)]
        if links:
            report.notes.append(_links_note(links))
    except PermissionError as exc:
        raise ValueError(f"cannot read the compile cache {printable(root)}: {exc.strerror} "
                         f"({printable(exc.filename)}); run as the user who compiled, or pass a "
                         "folder you can read") from exc
    return report


def prune_cache(path: str | os.PathLike | None = None, *, layout: str | None = None,
                dry_run: bool = True) -> PruneResult:
    """Remove the native cache's temp leftovers, zero-size NEFFs and stale locks; by default
    a dry run that only lists them. Good NEFFs and fresh or held locks are never touched."""
    report = inspect_cache(path, layout=layout)
    where = printable(report.path)
    if not report.exists:
        raise FileNotFoundError(f"no cache folder at {where} ({report.source}): nothing to prune. "
                                "Check the path, or pass the folder TORCH_NEURONX_NEFF_CACHE_DIR "
                                "names")
    if report.native is None:
        raise ValueError(f"--prune cleans the native torch-neuronx layout only, and {where} is "
                         f"read as the legacy layout ({report.layout_reason}). Fix: pass "
                         "--layout native if it is a native cache; in a legacy cache remove the "
                         "failed entries `neuronkit cache` lists by hand")
    return prune_native(report.path, report.native, dry_run=dry_run)
