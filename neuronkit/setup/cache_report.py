"""What a compile cache folder holds (:class:`CacheReport`) and its readable text, for either
layout; any text from disk is shown with its control characters escaped."""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from neuronkit.setup.cache_legacy import STATES, CacheEntry
from neuronkit.setup.cache_native import CACHE_DIR_ENV, CacheFile, LockFile, NativeCache, cache_switch
from neuronkit.setup.cache_text import ago, human_size, printable

__all__ = ["CacheReport", "native_lines"]


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
                    f"{len(n.locks)} lock file{'' if len(n.locks) == 1 else 's'} "
                    f"({len(n.held_locks)} held: a build in progress) (native layout)")
        c = self.counts
        return (f"{where}: {len(self.entries)} graphs ({c['ok']} ok, {c['failed']} failed, "
                f"{c['locked']} locked, {c['empty']} empty), {human_size(self.total_size)}")

    def __str__(self) -> str:
        layout = (f"  layout     {self.layout}: "
                  + ("native torch-neuronx" if self.layout == "native"
                     else "XLA-era torch-neuronx, neuronxcc-*/MODULE_* folders")
                  + (f" ({self.layout_reason})" if self.layout_reason else ""))
        notes = [f"  note: {n}" for n in self.notes]
        if not self.exists:
            return "\n".join([*self._missing_lines(), layout, *notes])
        head = [f"Neuron compile cache: {printable(self.path)} ({self.source})", layout]
        body = native_lines(self.native) if self.native is not None else self._legacy_lines()
        return "\n".join(head + body + notes)

    def _missing_lines(self) -> list[str]:
        """No folder at the path: check the path given, or nothing was compiled here yet."""
        where = printable(self.path)
        if self.source == "as given":
            what = (f"the folder {CACHE_DIR_ENV} points at (default /tmp/neff_cache)"
                    if self.layout == "native" else "the folder holding the neuronxcc-<version> "
                    "folders")
            return [f"Neuron compile cache: no folder at {where}. Check the path: pass "
                    f"{what}, or nothing for the default."]
        return [f"Neuron compile cache: no folder at {where} ({self.source}).",
                "Nothing has been compiled for Neuron on this machine with these settings; the "
                "folder appears after the first Neuron compile. Pass another folder with "
                f"`neuronkit cache DIR`, or {self.folder_fix}."]

    def _legacy_lines(self) -> list[str]:
        """Graphs by state and by compiler version, and the failed entries by path."""
        if not self.entries:
            return ["  no compiled graphs in it (no neuronxcc-*/MODULE_* folders)"]
        c, newest = self.counts, self.newest
        assert newest is not None  # there are entries
        lines = [f"  graphs     {len(self.entries)}: {c['ok']} ok, {c['failed']} failed, "
                 f"{c['locked']} locked (compiling now, or a compile that died), "
                 f"{c['empty']} empty",
                 f"  size       {human_size(self.total_size)}",
                 f"  newest     {printable(newest.path.name)} ({printable(newest.version)}, "
                 f"{ago(time.time() - newest.mtime)} ago)"]
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
        return lines


def _listed(files: list[CacheFile], now: float, limit: int = 5) -> list[str]:
    out = [f"    {printable(f.path)}  ({ago(now - f.mtime)} old)" for f in files[:limit]]
    return out + ([f"    ... and {len(files) - limit} more"] if len(files) > limit else [])


def native_lines(cache: NativeCache) -> list[str]:
    """The body of a native cache's summary: NEFFs, zero-size NEFFs, temp files, locks, other
    files, the cache switch and what ``--prune`` would do."""
    now, size = time.time(), human_size
    out = [f"  NEFFs      {len(cache.neffs)} ({size(cache.neff_bytes)}): "
           f"{cache.count('cpp')} from the C++ path (ab/cd/<key>.neff), "
           f"{cache.count('python')} from the Python sync-mode path (<sha256>/<sha256>.neff)"]
    newest = max(cache.neffs, key=lambda f: f.mtime, default=None)
    if newest is not None:
        out.append(f"  newest     {printable(newest.path.name)} ({ago(now - newest.mtime)} ago)")
    if cache.zero_size:
        out.append(f"  zero-size  {len(cache.zero_size)} .neff of 0 bytes: the C++ path reads "
                   "it as a miss, the Python path as an empty NEFF (--prune removes them)")
        out += _listed(cache.zero_size, now)
    if cache.temps:
        young = len(cache.temps) - len(cache.leftovers)
        out.append(f"  temp files {len(cache.temps)} ({size(sum(f.size for f in cache.temps))})"
                   f": {len(cache.leftovers)} left by writes that died (older than the lock "
                   f"timeout; --prune removes them), {young} being written now")
        out += _listed(cache.leftovers, now)
    out += _lock_lines(cache)
    if cache.other:
        out.append(f"  other      {len(cache.other)} file(s) that are not native cache files "
                   "(left alone), e.g. " + printable(cache.other[0]))
    if cache.unreadable:
        out.append(f"  unreadable {len(cache.unreadable)} folder(s), e.g. "
                   f"{cache.unreadable[0]}: run as the user who compiled")
    out.append(f"  cache      {cache_switch()[1]}")
    if cache.prunable:
        out.append(f"  prune      run again with --prune to list the {len(cache.prunable)} "
                   "file(s) it would remove; add --yes to remove them")
    return out


def _lock_state(lk: LockFile) -> str:
    if lk.held:
        who = ", ".join(str(h) for h in lk.holders) or "a process /proc/locks does not name"
        return f"held now by {who}: a build in progress"
    if lk.held is None:
        return f"{ago(lk.age_s)} old, could not check whether it is held"
    return f"{ago(lk.age_s)} old, not held" + (" (leftover)" if lk.leftover else "")


def _lock_lines(cache: NativeCache) -> list[str]:
    """The locks: how many are held (builds in progress, their holders named) or old leftovers;
    the held ones first, then the oldest, ten by path."""
    held, old = len(cache.held_locks), len(cache.leftover_locks)
    out = [f"  locks      {len(cache.locks)} in {printable(cache.local_dir)} "
           f"({cache.local_source}): {held} held now (a build in progress), {old} old "
           f"{'one' if old == 1 else 'ones'} no process holds (older than the lock timeout, "
           f"{cache.timeout_s} s, {cache.timeout_source}: a normal leftover; --prune "
           f"removes {'it' if old == 1 else 'them'})"]
    if held:
        out.append("             a lock file is reused and its time never refreshed: how long a "
                   "held one has been held is not known; a process waiting for it breaks it "
                   "after the lock timeout counted from the start of its own wait")
    shown = sorted(cache.locks, key=lambda lk: (lk.held is not True, -lk.age_s))
    for lk in shown[:10]:
        out.append(f"    {printable(lk.path)}  {_lock_state(lk)}")
    if len(cache.locks) > 10:
        out.append(f"    ... and {len(cache.locks) - 10} more")
    return out
