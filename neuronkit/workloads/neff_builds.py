"""NEFF builds among compile events: what costs minutes on native Neuron, and what does not.

On Neuron each graph Dynamo traces is lowered to a NEFF that neuronx-cc builds, or that loads from
the NEFF cache (on disk: a new process; in memory: the same graph traced again). A new serving
process traces every graph again, so Dynamo's graph count says nothing of the NEFFs. The rule
here is the one ``max_neff_builds`` of ``nk.compile_budget`` counts by and a serving process
reports by: built (``neff_cache == "compiled"``), loaded (``disk_hit``, ``memory_hit``), or
unknown (a NEFF no safe point resolved: counted as a build, never a false pass). Off Neuron
events have no NEFF, and the counts are 0.
"""
from __future__ import annotations

from dataclasses import dataclass

from neuronkit.events.event import NEFF_CACHE_STATES, CompileEvent

__all__ = ["NeffCounts", "has_neff", "neff_built", "neff_counts", "neff_lines", "neff_unknown"]


def has_neff(event: CompileEvent) -> bool:
    """The event's graphs have a NEFF on Neuron (noted by the Neuron source, or resolved)."""
    noted = isinstance(event.metrics, dict) and isinstance(event.metrics.get("neuron_graphs"), list)
    return noted or event.neff_cache is not None


def neff_unknown(event: CompileEvent) -> bool:
    """A NEFF whose state no safe point resolved (its table reset, its build failed or evicted)."""
    return has_neff(event) and event.neff_cache not in NEFF_CACHE_STATES


def neff_built(event: CompileEvent) -> bool:
    """Built by neuronx-cc, or of unknown state (counted as built)."""
    return event.neff_cache == "compiled" or neff_unknown(event)


@dataclass(frozen=True)
class NeffCounts:
    """Events by where their NEFF came from; ``builds`` includes the ``unknown`` ones."""

    builds: int = 0
    unknown: int = 0
    disk_hits: int = 0
    memory_hits: int = 0
    with_neff: int = 0   # events that have a NEFF at all (0: not on Neuron)

    @property
    def loaded(self) -> int:
        """NEFFs loaded from the NEFF cache, on disk or in memory."""
        return self.disk_hits + self.memory_hits


def neff_counts(events: list[CompileEvent]) -> NeffCounts:
    """Count ``events`` by NEFF state."""
    return NeffCounts(builds=sum(1 for e in events if neff_built(e)),
                      unknown=sum(1 for e in events if neff_unknown(e)),
                      disk_hits=sum(1 for e in events if e.neff_cache == "disk_hit"),
                      memory_hits=sum(1 for e in events if e.neff_cache == "memory_hit"),
                      with_neff=sum(1 for e in events if has_neff(e)))


def neff_lines(events: list[CompileEvent]) -> str:
    """One line per event counted as a NEFF build: which event, and why it counts."""
    lines = []
    for e in (e for e in events if neff_built(e)):
        where = f" [{e.context}]" if e.context else ""
        name = f"  event {e.seq}: {e.function or '?'} ({e.kind}){where}: "
        if e.neff_cache == "compiled":
            took = f" in {e.neff_compile_s:.1f} s" if e.neff_compile_s else ""
            lines.append(name + f"NEFF built by neuronx-cc{took}")
        else:
            lines.append(name + "NEFF state unknown at the block's exit, counted as a build")
    return "\n".join(lines)
