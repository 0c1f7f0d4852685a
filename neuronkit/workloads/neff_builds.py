"""NEFF builds among compile events: what costs minutes on native Neuron, and what does not.

neuronx-cc builds two kinds of NEFF, both through one compilation cache
(``core/compilation/CompilationCache.cpp:556-572``): the NEFF of each graph Dynamo traces, and the
kernel of each new eager op (``kernels`` events). Each is built, or loaded from the NEFF cache (on
disk: a new process; in memory: the same graph traced again). A new serving process traces every
graph again, so Dynamo's graph count says nothing of the NEFFs. The rule here is the one
``max_neff_builds`` of ``nk.compile_budget`` counts by and a serving process reports by:

- a graph's NEFF is built (``neff_cache == "compiled"``), loaded (``disk_hit``, ``memory_hit``),
  or unknown (a NEFF no safe point resolved: counted as a build, never a false pass);
- a disk hit that waited for another rank's build of the same NEFF (``metrics["neff_waited_for"]``,
  set in merged logs: ``log/shared_cache.py``) counts as a build: its rank needed the NEFF built,
  and which rank took the cache lock is chance;
- graph events whose keys (``metrics["neff_keys"]``) are the same are one build over the ranks
  (the most any one rank built of it): a merged log counts a NEFF once whichever rank built it;
  events without keys count one each;
- eager-op kernels built count one each (``kernels`` events' ``metrics["compiled"]``; in sync
  mode, ``metrics["sync_mode"]``, that is an upper bound: the rest were read from the disk cache).
  A forecast (``forecast=True``, counted off Neuron) built nothing.

Off Neuron events have no NEFF, and the counts are 0.
"""
from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass

from neuronkit.events.event import NEFF_CACHE_STATES, CompileEvent
from neuronkit.log.shared_cache import neff_keys, waited_for

__all__ = ["NeffCounts", "counted_as_build", "has_neff", "kernels_built", "neff_built",
           "neff_counts", "neff_lines", "neff_unknown"]


def has_neff(event: CompileEvent) -> bool:
    """The event's graphs have a NEFF on Neuron (noted by the Neuron source, or resolved)."""
    noted = isinstance(event.metrics, dict) and isinstance(event.metrics.get("neuron_graphs"), list)
    return noted or event.neff_cache is not None


def neff_unknown(event: CompileEvent) -> bool:
    """A NEFF whose state no safe point resolved (its table reset, its build failed or evicted)."""
    return has_neff(event) and event.neff_cache not in NEFF_CACHE_STATES


def neff_built(event: CompileEvent) -> bool:
    """A graph NEFF built by neuronx-cc, of unknown state, or waited for (all counted as built)."""
    return (event.neff_cache == "compiled" or neff_unknown(event)
            or (event.neff_cache == "disk_hit" and waited_for(event) is not None))


def _is_kernels(event: CompileEvent) -> bool:
    """Eager-op kernels counted on Neuron (not a forecast)."""
    return event.kind == "kernels" and not event.forecast and isinstance(event.metrics, dict)


def _count_of(event: CompileEvent, name: str) -> int | None:
    value = event.metrics.get(name)
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else None


def kernels_built(event: CompileEvent) -> int:
    """Eager-op kernels neuronx-cc built in a ``kernels`` event (``metrics["compiled"]``; where a
    log has no such count, all of its ``kernels``: never a false pass); 0 for other events."""
    if not _is_kernels(event):
        return 0
    built = _count_of(event, "compiled")
    return built if built is not None else max(int(event.kernels or 0), 0)


def _kernels_loaded(event: CompileEvent) -> int:
    return (_count_of(event, "loaded") or 0) if _is_kernels(event) else 0


def _sync_mode(event: CompileEvent) -> bool:
    return _is_kernels(event) and event.metrics.get("sync_mode") is True


def counted_as_build(event: CompileEvent) -> bool:
    """Counted against ``max_neff_builds``: a graph NEFF built (:func:`neff_built`), or a
    ``kernels`` event that built eager-op kernels."""
    return neff_built(event) or kernels_built(event) > 0


def _graph_builds(events: list[CompileEvent]) -> int:
    """Graph NEFFs built: the events of one key set are one build over the ranks (the most one
    rank built of it); events without keys one each."""
    by_keys: dict[tuple[str, ...], Counter[int]] = defaultdict(Counter)
    alone = 0
    for e in events:
        if not neff_built(e):
            continue
        keys = neff_keys(e)
        if keys:
            by_keys[keys][e.rank] += 1
        else:
            alone += 1
    return alone + sum(max(ranks.values()) for ranks in by_keys.values())


@dataclass(frozen=True)
class NeffCounts:
    """Graph events by where their NEFF came from, and eager-op kernels built and loaded.

    ``graph_builds`` includes the ``unknown`` and ``waited`` events (a key built on several ranks
    counts once); ``disk_hits`` leaves the waited ones out. ``kernel_builds`` is an upper bound
    where ``kernels_sync_mode``."""

    graph_builds: int = 0
    unknown: int = 0
    waited: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    with_neff: int = 0   # events that have a NEFF at all (0: not on Neuron)
    kernel_builds: int = 0
    kernels_loaded: int = 0
    kernels_sync_mode: bool = False
    kernel_events: int = 0   # ``kernels`` events counted on Neuron

    @property
    def builds(self) -> int:
        """NEFFs neuronx-cc built: graphs and eager-op kernels (what ``max_neff_builds`` counts)."""
        return self.graph_builds + self.kernel_builds

    @property
    def loaded(self) -> int:
        """Graph NEFFs loaded from the NEFF cache, on disk or in memory."""
        return self.disk_hits + self.memory_hits

    def builds_text(self) -> str:
        """``3 NEFF builds: 1 graph, 2 eager-op kernels``; without kernel events, ``1 NEFF
        build``."""
        text = f"{_plural(self.builds, 'NEFF build')}"
        if not self.kernel_events:
            return text
        most = " (sync mode: at most)" if self.kernels_sync_mode and self.kernel_builds else ""
        return (f"{text}: {_plural(self.graph_builds, 'graph')}, "
                f"{_plural(self.kernel_builds, 'eager-op kernel')}{most}")


def _plural(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def neff_counts(events: list[CompileEvent]) -> NeffCounts:
    """Count ``events`` by NEFF state (see the module docstring)."""
    kernels = [e for e in events if _is_kernels(e)]
    waited = sum(1 for e in events if e.neff_cache == "disk_hit" and waited_for(e) is not None)
    return NeffCounts(graph_builds=_graph_builds(events),
                      unknown=sum(1 for e in events if neff_unknown(e)), waited=waited,
                      disk_hits=sum(1 for e in events if e.neff_cache == "disk_hit") - waited,
                      memory_hits=sum(1 for e in events if e.neff_cache == "memory_hit"),
                      with_neff=sum(1 for e in events if has_neff(e)) + len(kernels),
                      kernel_builds=sum(map(kernels_built, kernels)),
                      kernels_loaded=sum(map(_kernels_loaded, kernels)),
                      kernels_sync_mode=any(map(_sync_mode, kernels)),
                      kernel_events=len(kernels))


def _graph_line(e: CompileEvent, first: dict[tuple[str, ...], CompileEvent]) -> str:
    """Why a graph event counts as a NEFF build."""
    wait = waited_for(e)
    if wait is not None:
        inside = ", inside its Dynamo time" if wait.get("in_duration") else ""
        why = (f"NEFF read from the disk cache after waiting {float(wait.get('wait_s', 0)):.1f} s"
               f"{inside} for rank {wait.get('rank', '?')}'s build of it (event "
               f"{wait.get('seq', '?')})")
    elif e.neff_cache == "compiled":
        took = f" in {e.neff_compile_s:.1f} s" if e.neff_compile_s else ""
        why = f"NEFF built by neuronx-cc{took}"
    else:
        why = "NEFF state unknown at the block's exit, counted as a build"
    keys = neff_keys(e)
    same = first.setdefault(keys, e) if keys else e
    if same is not e and same.rank != e.rank:
        why += f"; the same NEFF as event {same.seq} of rank {same.rank}, counted once"
    elif wait is not None:
        why += ", counted as a build"
    return why


def _kernel_line(e: CompileEvent) -> str:
    """What a ``kernels`` event built: how many, of which ops."""
    n = kernels_built(e)
    ops = ", ".join(f"{op} x{k}" for op, k in list(e.ops.items())[:5]) if e.ops else ""
    more = f" and {len(e.ops) - 5} more ops" if e.ops and len(e.ops) > 5 else ""
    sync = ("sync mode: at most " if _sync_mode(e) else "")
    loaded = _kernels_loaded(e)
    return (f"{sync}{_plural(n, 'eager-op kernel')} built by neuronx-cc"
            + (f" ({ops}{more})" if ops else "")
            + (f", {loaded} loaded from the NEFF cache" if loaded else ""))


def neff_lines(events: list[CompileEvent]) -> str:
    """One line per event counted as a NEFF build: which event, and why it counts."""
    lines = []
    first: dict[tuple[str, ...], CompileEvent] = {}
    for e in (e for e in events if counted_as_build(e)):
        where = f" [{e.context}]" if e.context else ""
        name = f"  event {e.seq}: {e.function or '?'} ({e.kind}){where}: "
        lines.append(name + (_kernel_line(e) if e.kind == "kernels" else _graph_line(e, first)))
    return "\n".join(lines)
