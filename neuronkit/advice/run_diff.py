"""Two runs of the same code compared graph by graph: which graphs are new, gone or the same,
which the second run built where the first loaded them (and why: the parts of the cache key that
differ), the seconds that moved, new recompile reasons and graph breaks.

    d = diff_logs("run1.jsonl", "run2.jsonl", names=("before", "after"))
    d.headline          # 'after compiled 20 graphs fewer than before (22 -> 2)'
    d.new, d.gone       # graph events of one run with no match in the other
    d.rebuilt           # Rebuild(graph, words=("NEURON_CC_FLAGS '-O1' -> '-O2'",), ...)

A graph is a first compile, a recompile or a backward graph. Graphs match across runs by function
variant (``forward[decode]``), the file of their location (not its folder nor line, so two
checkouts match, as ``views/compare.py`` does), input shapes and, where both record them, input
dtypes; by rank too where both runs have several ranks. A run may build the same graph several
times (``torch._dynamo.reset``, ranks): they match as multisets.
"""
from __future__ import annotations

import os
from collections import Counter, defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Sequence

from neuronkit.advice.breaks import is_graph_break, why
from neuronkit.advice.excerpts import bounded_events, cut_long
from neuronkit.advice.key_diff import (
    BUILT,
    LOADED,
    build_state,
    explain,
    lookups,
    neff_version_note,
    no_lookups_why,
)
from neuronkit.advice.wording import count
from neuronkit.events.event import BUILD_KINDS, GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import compile_seconds, graphs, neff_seconds, readable, shape_key
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log

__all__ = ["GraphPair", "Rebuild", "RunDiff", "diff_logs", "graph_words", "run_name", "shapes_words",
           "two_names"]

MOVED_S = 0.5  # a matched graph's seconds moved when they changed by this much ...
MOVED_SHARE = 0.2  # ... and by this share of run A's seconds
Source = CompileLog | str | os.PathLike[str]


@dataclass(frozen=True)
class GraphPair:
    """One graph of both runs: its events and where each run's build came from."""

    label: str
    a: CompileEvent
    b: CompileEvent
    state_a: str
    state_b: str

    @property
    def compile_delta(self) -> float:
        return float(self.b.duration_s or 0.0) - float(self.a.duration_s or 0.0)

    @property
    def neff_delta(self) -> float:
        return self.b.neff_s - self.a.neff_s


@dataclass(frozen=True)
class Rebuild:
    """A graph run B built that it might have loaded, and which parts of the key differ."""

    label: str
    b: CompileEvent
    a: CompileEvent
    how: str  # "loaded in A", "built in both, other keys", "new in B; nearest in A"
    words: tuple[str, ...]


@dataclass(frozen=True)
class RunDiff:
    """Run A vs run B (see the module). ``notes``: what it cannot tell, and version warnings."""

    names: tuple[str, str]
    headline: str
    graphs: tuple[int, int]
    per_function: tuple[tuple[str, int, int], ...]  # (label, graphs in A, graphs in B), changed
    same: tuple[GraphPair, ...]
    new: tuple[tuple[str, CompileEvent], ...]
    gone: tuple[tuple[str, CompileEvent], ...]
    built_in_b: tuple[GraphPair, ...]  # built in B, loaded in A
    loaded_in_b: tuple[GraphPair, ...]  # loaded in B, built in A
    compile_s: tuple[float, float]
    neff_s: tuple[float, float]
    moved: tuple[GraphPair, ...]
    rebuilt: tuple[Rebuild, ...]
    new_reasons: tuple[tuple[str, str], ...]
    new_breaks: tuple[tuple[str, str], ...]
    lookups: tuple[bool, bool]  # whether each run records cache lookups
    notes: tuple[str, ...] = field(default=())

    @property
    def total_s(self) -> tuple[float, float]:
        return self.compile_s[0] + self.neff_s[0], self.compile_s[1] + self.neff_s[1]

    @property
    def built_again(self) -> tuple[GraphPair, ...]:
        """Graphs of both runs that B built (not loaded from a cache)."""
        return tuple(p for p in self.same if p.state_b == BUILT)


def shapes_words(shapes: Any, most: int = 2, dtypes: Any = None) -> str:
    """``input_ids 1x128, position_ids 1x128 +3``: the first ``most`` inputs (each with its
    dtype where ``dtypes`` names it: ``x 4x8 bfloat16``), then a count."""
    if not isinstance(shapes, dict) or not shapes:
        return "no inputs"
    dtypes = dtypes if isinstance(dtypes, dict) else {}
    items = []
    for name, dims in list(shapes.items())[:most]:
        dtype = str(dtypes.get(name) or "").removeprefix("torch.")
        size = "x".join(map(str, dims)) if isinstance(dims, list) and dims else "scalar"
        items.append(" ".join(filter(None, (cut_long(str(name)), size, cut_long(dtype)))))
    return ", ".join(items) + (f" +{len(shapes) - most}" if len(shapes) > most else "")


def graph_words(label: str, e: CompileEvent) -> str:
    """A graph in words: ``forward[decode] (backward) input_ids 1x1 int64, ...``."""
    kind = " (backward)" if e.kind == "backward" else ""
    return f"{label}{kind} {shapes_words(e.input_shapes, dtypes=_dtypes(e))}"


def _file(location: str) -> str:
    return os.path.basename(str(location).replace("\\", "/")).split(":")[0]


def _dtypes(e: CompileEvent) -> dict[str, Any] | None:
    found = e.metrics.get("input_dtypes") if isinstance(e.metrics, dict) else None
    return found if isinstance(found, dict) and found else None


def _labels(*runs: list[CompileEvent]) -> dict[tuple[str, str], str]:
    """A name per (function, file): the function alone where its name is one function."""
    keys = {(e.function, _file(e.location)) for events in runs for e in events}
    names = Counter(f for f, _ in keys)
    return {(f, p): f if names[f] == 1 else f"{f} ({p or '?'})" for f, p in keys}


def _load(source: Source) -> CompileLog:
    return source if isinstance(source, CompileLog) else open_log(source)


def two_names(names: Sequence[str]) -> tuple[str, str]:
    """Two runs' names, checked (``diff_logs`` and the dashboard's comparison take them)."""
    if isinstance(names, str) or len(names) != 2 or not all(isinstance(n, str) for n in names):
        raise TypeError(f"names must be two strings, like ('naive', 'bucketed'), got {names!r}")
    if names[0] == names[1]:
        raise ValueError(f"the two runs need different names, got {names[0]!r} twice")
    return names[0], names[1]


def _headline(na: str, nb: str, ga: int, gb: int) -> str:
    if ga == gb:
        return f"{nb} compiled the same number of graphs as {na}: {ga}"
    return (f"{nb} compiled {count(abs(ga - gb), 'graph')} {'fewer' if gb < ga else 'more'} "
            f"than {na} ({ga} -> {gb})")


def _match(a: list[CompileEvent], b: list[CompileEvent], ranked: bool
           ) -> tuple[list[tuple[CompileEvent, CompileEvent]], list[CompileEvent], list[CompileEvent]]:
    """Pairs (A, B) of one graph, B's unmatched, A's unmatched: as multisets, those of equal
    dtypes first, then those where a side records no dtypes."""
    def identity(e: CompileEvent) -> tuple[Any, ...]:
        return (e.rank if ranked else None, e.function, _file(e.location), e.kind == "backward",
                shape_key(e))

    pool: dict[tuple[Any, ...], list[CompileEvent]] = defaultdict(list)
    for e in a:
        pool[identity(e)].append(e)
    pairs: dict[int, tuple[CompileEvent, CompileEvent]] = {}
    for loose in (False, True):
        for i, e in enumerate(b):
            if i in pairs:
                continue
            candidates = pool[identity(e)]
            for j, other in enumerate(candidates):
                da, db = _dtypes(other), _dtypes(e)
                if (da == db and da is not None) or (loose and (da is None or db is None)):
                    pairs[i] = (candidates.pop(j), e)
                    break
    gone = [e for e in a if any(e is x for x in pool[identity(e)])]
    return [pairs[i] for i in sorted(pairs)], [e for i, e in enumerate(b) if i not in pairs], gone


def _distance(a: CompileEvent, b: CompileEvent) -> float:
    """How far apart two graphs' inputs are: 0 for the same shapes (dtypes differ)."""
    sa = a.input_shapes if isinstance(a.input_shapes, dict) else {}
    sb = b.input_shapes if isinstance(b.input_shapes, dict) else {}
    total = 0.0
    for name in set(sa) | set(sb):
        x, y = sa.get(name), sb.get(name)
        if not isinstance(x, list) or not isinstance(y, list) or len(x) != len(y):
            total += 1e6 if x != y else 0
            continue
        total += sum(abs(p - q) if isinstance(p, int) and isinstance(q, int) else float(p != q)
                     for p, q in zip(x, y, strict=True))
    return total


def _nearest(e: CompileEvent, gone: list[CompileEvent], ranked: bool) -> CompileEvent | None:
    """The graph of A's gone graphs of ``e``'s function variant whose inputs are nearest."""
    same = [g for g in gone if g.function == e.function and _file(g.location) == _file(e.location)
            and (g.kind == "backward") == (e.kind == "backward") and (not ranked or g.rank == e.rank)]
    return min(same, key=lambda g: _distance(g, e), default=None)


def _new_texts(a: list[tuple[str, str]], b: list[tuple[str, str]]) -> tuple[tuple[str, str], ...]:
    """B's (label, text) whose text A does not have for that label, each once."""
    known = set(a)
    return tuple(dict.fromkeys(x for x in b if x not in known))


def _reasons(events: list[CompileEvent], label: Any) -> list[tuple[str, str]]:
    return [(label(e), cut_long(str(r))) for e in events if e.kind in ("recompile", "limit_hit")
            for r in e.reasons]


def _breaks(events: list[CompileEvent], label: Any) -> list[tuple[str, str]]:
    return [(label(e), why(e)) for e in events if is_graph_break(e)]


def _rebuilds(a_log: CompileLog, b_log: CompileLog, pairs: list[GraphPair],
              new: list[tuple[str, CompileEvent]], gone: list[CompileEvent], ranked: bool,
              names: tuple[str, str]) -> tuple[list[Rebuild], set[str]]:
    """B's builds it might have loaded, with the key parts that differ; and why it cannot tell."""
    out: list[Rebuild] = []
    unknown: set[str] = set()
    todo = [(p.label, p.b, p.a, f"loaded in {names[0]}") for p in pairs
            if p.state_b == BUILT and p.state_a == LOADED]
    todo += [(p.label, p.b, p.a, "built in both, other keys") for p in pairs
             if p.state_b == BUILT and p.state_a == BUILT]
    for label, e in new:
        near = _nearest(e, gone, ranked) if build_state(e) != LOADED else None
        if near is not None:
            todo.append((label, e, near, f"new in {names[1]}; nearest in {names[0]}: "
                                         f"{shapes_words(near.input_shapes, dtypes=_dtypes(near))}"))
    for label, b, a, how in todo:
        verdict = explain(a_log, b_log, a, b, names)
        if verdict.unknown:
            unknown.add(verdict.unknown)
        if verdict.words:
            out.append(Rebuild(label, b, a, how, verdict.words))
    return out, unknown


def _notes(logs: tuple[CompileLog, CompileLog], events: tuple[list[CompileEvent], ...],
           names: tuple[str, str], unknown: set[str], has: tuple[bool, bool]) -> list[str]:
    notes = []
    if not all(has) and events[1]:
        whys = {name: no_lookups_why(log, ev) for log, ev, name, seen
                in zip(logs, events, names, has, strict=True) if not seen}
        if len(whys) == 2:
            said = (f"neither run records cache lookups ({whys[names[0]]})" if len(set(whys.values())) == 1
                    else "; ".join(f"{n} records no cache lookups ({w})" for n, w in whys.items()))
        else:
            [(n, w)] = whys.items()
            said = f"{n} records no cache lookups ({w})"
        notes.append(f"built or loaded, and why rebuilt: cannot tell: {said}")
    elif "the keys' parts are not in the logs" in unknown:
        notes.append("why rebuilt: cannot tell for some graphs: the parts of their cache keys are "
                     "not in the logs (recorded without them, or a TORCH_TRACE folder)")
    loaded = sum(1 for e in events[1] for d in lookups(e)
                 if d["cache"] == "neff" and d["state"] in ("disk_hit", "memory_hit"))
    version = neff_version_note(logs[0], logs[1], loaded, names)
    return notes + ([version] if version else [])


def diff_logs(a: Source, b: Source, names: Sequence[str] = ("A", "B")) -> RunDiff:
    """Compare run ``a`` with run ``b`` (each a :class:`CompileLog`, a log file or a run folder)."""
    name_a, name_b = two_names(names)
    logs = (_load(a), _load(b))
    events = tuple(bounded_events(readable(log.events)) for log in logs)
    ranked = all(len({e.rank for e in ev}) > 1 for ev in events)
    labels = _labels(*events)

    def label(e: CompileEvent) -> str:
        text = labels.get((e.function, _file(e.location))) or e.function
        return f"rank {e.rank}: {text}" if ranked else text

    built = [[e for e in ev if e.kind in BUILD_KINDS] for ev in events]
    matched, new_b, gone_a = _match(built[0], built[1], ranked)
    pairs = [GraphPair(label(y), x, y, build_state(x), build_state(y)) for x, y in matched]
    new = [(label(e), e) for e in new_b]
    rebuilt, unknown = _rebuilds(logs[0], logs[1], pairs, new, gone_a, ranked, (name_a, name_b))
    has = (any(lookups(e) for e in built[0]), any(lookups(e) for e in built[1]))
    counts = [Counter(label(e) for e in ev if e.kind in GRAPH_KINDS) for ev in events]
    moved = [p for p in pairs if abs(p.compile_delta + p.neff_delta) >= MOVED_S
             and abs(p.compile_delta + p.neff_delta) >= MOVED_SHARE * p.a.total_s]
    g = (graphs(events[0]), graphs(events[1]))
    return RunDiff(
        names=(name_a, name_b), headline=_headline(name_a, name_b, *g), graphs=g,
        per_function=tuple(sorted(((f, counts[0][f], counts[1][f]) for f in counts[0] | counts[1]
                                   if counts[0][f] != counts[1][f]),
                                  key=lambda r: (-abs(r[1] - r[2]), r[0]))),
        same=tuple(pairs), new=tuple(new), gone=tuple((label(e), e) for e in gone_a),
        built_in_b=tuple(p for p in pairs if p.state_b == BUILT and p.state_a == LOADED),
        loaded_in_b=tuple(p for p in pairs if p.state_b == LOADED and p.state_a == BUILT),
        compile_s=(compile_seconds(events[0]), compile_seconds(events[1])),
        neff_s=(neff_seconds(events[0]), neff_seconds(events[1])),
        moved=tuple(sorted(moved, key=lambda p: -abs(p.compile_delta + p.neff_delta))),
        rebuilt=tuple(rebuilt),
        new_reasons=_new_texts(_reasons(events[0], label), _reasons(events[1], label)),
        new_breaks=_new_texts(_breaks(events[0], label), _breaks(events[1], label)),
        lookups=has, notes=tuple(_notes(logs, events, (name_a, name_b), unknown, has)))


def run_name(path: str | os.PathLike[str], other: str | os.PathLike[str]) -> str:
    """A short name for the run read from ``path``: its file's stem or its folder's name, with
    its parent's where ``other`` has the same name."""
    p, q = Path(path), Path(other)
    stem_p, stem_q = (x.stem if x.suffix == ".jsonl" else x.name for x in (p, q))
    if stem_p != stem_q and not stem_p.isdigit():  # runs/1 and runs/2: named with their folder
        return stem_p or str(p)
    if p.parent.name != q.parent.name:
        return f"{p.parent.name}/{stem_p}"
    return str(p)
