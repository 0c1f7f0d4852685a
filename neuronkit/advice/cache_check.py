"""Will a run start warm? For every graph a recorded run compiled, is its cache key in this cache
folder now (``neuronkit cache check RUN [--cache DIR]``).

A graph is one distinct key: the ranks (and repeats) that share a key count once. The deciding
key is the FX graph lookup's (an AOTAutograd hit needs that FX entry too, ``setup/cache_lookup``)
or the NEFF lookup's persistent key. Verdicts:

- ``load``: its entry is in the folder (an FX entry whose guards fail is still a miss: only
  graphs with dynamic shapes have guards, and they cannot be read without unpickling the entry);
- ``build``: no entry for its key;
- ``never``: inductor bypassed its cache for this graph (the lookup's reason): nothing is stored;
- ``unknown``: no lookup recorded (backend eager / aot_eager cache nothing; a log from before
  neuronkit recorded lookups) or the key was not recorded.
"""
from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import as_events, shape_key
from neuronkit.log.open import open_log
from neuronkit.safe import strip_control, terminal_safe
from neuronkit.setup.cache_lookup import DIR_ENV, cache_dir_for, find_entry
from neuronkit.setup.cache_native import cache_switch

__all__ = ["FORMAT", "VERDICTS", "CacheCheck", "CacheDir", "GraphCheck", "check_cache"]

FORMAT = "neuronkit-cache-check"
VERDICTS: tuple[str, ...] = ("load", "build", "never", "unknown")
NO_CACHE_BACKENDS = ("eager", "aot_eager")  # build nothing to keep
MOST_LISTED = 10  # graphs listed per verdict in the text; then "and N more"
_KEY_SHOWN = 12  # characters of a key in the text


def _one_line(value: Any, most: int = 120) -> str:
    text = strip_control(value, keep_newlines=False)
    return text if len(text) <= most else text[: most - 3] + "..."


def _cache_family(cache: str) -> str:
    return "neff" if cache == "neff" else "inductor"


@dataclass
class CacheDir:
    """A cache folder looked in: ``family`` "inductor" (FX graph, AOTAutograd) or "neff"."""

    family: str
    path: Path
    source: str
    exists: bool


@dataclass
class GraphCheck:
    """One distinct graph (key) of the run and whether it will load from the folder."""

    verdict: str  # one of VERDICTS
    function: str
    location: str
    kind: str
    backend: str
    shapes: dict[str, Any]
    ranks: list[int] = field(default_factory=list)
    events: int = 0
    cache: str = ""  # the deciding lookup's cache: "fx_graph" | "neff"
    key: str = ""  # its key (a NEFF: the persistent key)
    path: str = ""  # where its entry is (or would be)
    reason: str = ""  # why: a bypass's reason, what cannot be told, a note on the entry

    def to_dict(self) -> dict[str, Any]:
        return {"verdict": self.verdict, "function": self.function, "location": self.location,
                "kind": self.kind, "backend": self.backend, "input_shapes": self.shapes,
                "ranks": self.ranks, "events": self.events, "cache": self.cache, "key": self.key,
                "path": self.path, "reason": self.reason}

    def label(self) -> str:
        """``forward (backward) [x 4x8]``: one line, log values made safe."""
        shapes = ", ".join(f"{name} " + "x".join(map(str, dims)) if isinstance(dims, list)
                           else f"{name} {dims}" for name, dims in self.shapes.items())
        kind = " (backward)" if self.kind == "backward" else ""
        return _one_line(f"{self.function or '?'}{kind}" + (f" [{shapes}]" if shapes else ""), 160)


@dataclass
class CacheCheck:
    """The graphs of a run, each with its verdict, and the folders looked in."""

    graphs: list[GraphCheck]
    dirs: list[CacheDir]
    ranks: list[int]
    compiles: int  # build events read (every rank, every repeat)
    notes: list[str] = field(default_factory=list)

    def of(self, verdict: str) -> list[GraphCheck]:
        return [g for g in self.graphs if g.verdict == verdict]

    @property
    def judged(self) -> list[GraphCheck]:
        return [g for g in self.graphs if g.verdict != "unknown"]

    @property
    def exit_code(self) -> int:
        """0: every judged graph loads; 1: any would build or is never cached; 2: nothing to
        judge (no lookup recorded)."""
        if not self.judged:
            return 2
        return 1 if self.of("build") or self.of("never") else 0

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": 1,
                "caches": [{"family": d.family, "dir": str(d.path), "source": d.source,
                            "exists": d.exists} for d in self.dirs],
                "ranks": self.ranks, "compiles": self.compiles,
                "counts": {"graphs": len(self.graphs), "judged": len(self.judged),
                           **{v: len(self.of(v)) for v in VERDICTS}},
                "exit_code": self.exit_code, "notes": self.notes,
                "graphs": [g.to_dict() for g in self.graphs]}

    def text(self, most: int = MOST_LISTED) -> str:
        return terminal_safe("\n".join(_text_lines(self, most)))

    def __str__(self) -> str:
        return self.text()


def _listed(graphs: list[GraphCheck], most: int, key: bool, reason: bool) -> list[str]:
    lines = []
    for g in graphs[:most]:
        line = "  " + g.label()
        if key and g.key:
            line += f"  {g.cache} key {_one_line(g.key[:_KEY_SHOWN])}..."
        if reason and g.reason:
            line += f": {_one_line(g.reason, 200)}"
        if len(g.ranks) > 1:
            line += f"  ({len(g.ranks)} ranks)"
        lines.append(line)
    if len(graphs) > most:
        lines.append(f"  and {len(graphs) - most} more")
    return lines


def _text_lines(check: CacheCheck, most: int) -> list[str]:
    lines = []
    for d in check.dirs:
        made = "" if d.exists else " (not made yet: nothing compiled with it here)"
        what = "NEFF cache" if d.family == "neff" else "inductor cache"
        lines.append(f"{what}: {_one_line(d.path, 300)} ({d.source}){made}")
    judged, load = check.judged, check.of("load")
    build, never, unknown = check.of("build"), check.of("never"), check.of("unknown")
    if not judged:
        lines.append(_nothing_to_judge(check))
        return lines
    head = f"{len(load)} of {len(judged)} graph{'s' if len(judged) != 1 else ''} will load"
    builds = len(build) + len(never)
    lines.append(head + (f"; {builds} will build:" if builds else "."))
    lines += _listed(build, most, key=True, reason=False)
    if never:
        lines.append(f"{len(never)} of them {'is' if len(never) == 1 else 'are'} never cached "
                     "(inductor bypasses its cache for them: built every run):")
        lines += _listed(never, most, key=False, reason=True)
    if unknown:
        lines.append(f"{len(unknown)} more cannot be told:")
        lines += _listed(unknown, most, key=False, reason=True)
    ranks = len(check.ranks)
    lines.append(f"(graphs counted once per distinct key: {check.compiles} compile(s)"
                 + (f" on {ranks} ranks)" if ranks > 1 else ")"))
    lines += check.notes
    return lines


def _nothing_to_judge(check: CacheCheck) -> str:
    if not check.compiles:
        return "nothing to judge: the log holds no compiled graph."
    return (f"nothing to judge: none of the {check.compiles} compile(s) recorded a cache lookup "
            f"({_one_line(check.graphs[0].reason, 200) if check.graphs else 'none'}). Record the "
            "run with backend inductor (CPU/CUDA) or on Neuron with this neuronkit, then check "
            "again.")


def _decide(e: CompileEvent, folder: dict[str, tuple[Path, str]]
            ) -> tuple[str, list[tuple[str, str]], str, str]:
    """(verdict, [(cache, key)], entry path, reason) of one build event."""
    lookups = [lk for lk in (e.cache_key if isinstance(e.cache_key, list) else [])
               if isinstance(lk, dict)]
    keyed: list[tuple[str, str]] = []
    bypass = ""
    for lk in lookups:
        cache = lk.get("cache")
        key = lk.get("persistent_key") if cache == "neff" else lk.get("key")
        if cache in ("fx_graph", "neff") and isinstance(key, str) and key:
            if (cache, key) not in keyed:
                keyed.append((cache, key))
        elif cache == "fx_graph" and lk.get("state") == "bypass":
            bypass = str(lk.get("reason") or "no reason given")
    if bypass and not any(c == "fx_graph" for c, _ in keyed):
        return "never", [], "", bypass
    if not keyed:
        return "unknown", [], "", _unknown_reason(e, lookups)
    entries = [find_entry(c, folder[_cache_family(c)][0], k) for c, k in keyed]
    missing = [en for en in entries if not en.found]
    shown = missing[0] if missing else entries[0]
    verdict = "build" if missing else "load"
    return verdict, keyed, str(shown.path or ""), shown.note


def _unknown_reason(e: CompileEvent, lookups: list[dict[str, Any]]) -> str:
    caches = {lk.get("cache") for lk in lookups}
    if "neff" in caches:
        return ("its NEFF's persistent key was not recorded (the build had not finished when "
                "the log ended?)")
    if "aot_autograd" in caches:
        return ("only its AOTAutograd lookup was recorded; a hit needs its FX graph entry too, "
                "whose key is not in the log")
    if e.backend in NO_CACHE_BACKENDS:
        return f"backend {e.backend} compiles nothing to keep in a cache"
    return ("no cache lookup recorded (a log from before neuronkit recorded them, or a trace "
            "without them)")


def _folders(families: set[str], cache_dir: str | os.PathLike[str] | None
             ) -> tuple[dict[str, tuple[Path, str]], list[CacheDir]]:
    if cache_dir is not None:
        path = Path(cache_dir).expanduser()
        if not path.exists():
            raise FileNotFoundError(f"--cache {path}: no such folder (name the cache folder "
                                    "the new run will use)")
        if not path.is_dir():
            raise NotADirectoryError(f"--cache {path}: not a folder")
        chosen = {f: (path, "from --cache") for f in ("inductor", "neff")}
    else:
        chosen = {f: cache_dir_for("neff" if f == "neff" else "fx_graph")
                  for f in ("inductor", "neff")}
    dirs = [CacheDir(f, chosen[f][0], chosen[f][1], chosen[f][0].is_dir())
            for f in ("inductor", "neff") if f in families]
    return chosen, dirs


def check_cache(log: Any, cache_dir: str | os.PathLike[str] | None = None) -> CacheCheck:
    """Whether each graph ``log`` (a CompileLog, events, a log file or a run folder) compiled
    will load from ``cache_dir`` (default: the folder each recorded lookup's cache uses here)."""
    if isinstance(log, (str, os.PathLike)):
        log = open_log(log)
    events = [e for e in as_events(log) if e.kind in BUILD_KINDS]
    families = {_cache_family(str(lk.get("cache"))) for e in events
                for lk in (e.cache_key if isinstance(e.cache_key, list) else [])
                if isinstance(lk, dict) and lk.get("cache") in DIR_ENV}
    folder, dirs = _folders(families, cache_dir)
    groups: dict[Any, GraphCheck] = {}
    for e in events:
        verdict, keyed, path, reason = _decide(e, folder)
        group = (("key", tuple(keyed)) if keyed else
                 (verdict, e.function, e.location, e.kind, shape_key(e), reason))
        g = groups.get(group)
        if g is None:
            cache, key = keyed[0] if keyed else ("", "")
            g = groups[group] = GraphCheck(
                verdict, e.function, e.location, e.kind, e.backend,
                e.input_shapes if isinstance(e.input_shapes, dict) else {},
                cache=cache, key=key, path=path, reason=reason)
        g.events += 1
        if e.rank not in g.ranks:
            g.ranks.append(e.rank)
    ranks = sorted({e.rank for e in events}, key=str)
    check = CacheCheck(list(groups.values()), dirs, ranks, len(events))
    if "neff" in families and cache_switch()[0] == "off":
        check.notes.append("note: TORCH_NEURONX_NEFF_DISABLE_CACHE=1 here: torch-neuronx reads "
                           "nothing from the NEFF cache while it is set")
    return check
