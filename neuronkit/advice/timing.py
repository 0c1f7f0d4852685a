"""The compile-time finding: how long compiling took, and its share of the run's wall time.

A high share is a warning only when some compiles could have been avoided (a function compiled
again, a limit hit, an eager fallback); first compiles alone are info: each graph is built once,
and a warm-up or the NEFF cache takes them off the serving path. ``diagnose()`` puts it last whatever
its severity: it depends on the machine's speed."""
from __future__ import annotations

from collections import defaultdict
from operator import attrgetter, itemgetter
from typing import Any

from neuronkit.advice.finding import Advice
from neuronkit.advice.wording import count
from neuronkit.events.event import GRAPH_KINDS, CompileEvent

__all__ = ["SHARE_WARNING", "avoidable", "compile_share"]

SHARE_WARNING = 0.20  # compile time above this share of the run is a warning, if avoidable


def avoidable(events: list[CompileEvent]) -> int:
    """How many events a fix takes away: limit hits, eager fallbacks, and recompiles of a
    function (on its rank) after its first graph. A ``recompile`` event can be a first graph:
    the decode step (``...forward[decode]``) is torch's second graph of ``forward``, but the
    first of its own function."""
    seen: set[tuple[object, str, str]] = set()
    found = 0
    for e in events:
        key = (e.rank, e.function, e.location)
        if e.kind in ("limit_hit", "eager_fallback") or (e.kind == "recompile" and key in seen):
            found += 1
        if e.kind in GRAPH_KINDS:
            seen.add(key)
    return found


def _seconds(events: list[CompileEvent]) -> dict[object, list[float]]:
    """Per rank: [Dynamo's seconds, NEFF build seconds, eager-kernel build seconds]."""
    neuron = any(map(attrgetter("neff_compile_s"), events))
    per_rank: dict[object, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    for e in events:
        part = per_rank[e.rank]
        part[2 if e.kind == "kernels" else 0] += e.duration_s
        if neuron:
            part[1] += e.neff_s  # the NEFF build on Neuron
    return per_rank


def _sources(dynamo: float, neff: float, kernels: float) -> str:
    """``3.2 s Dynamo compile + 214.0 s NEFF builds + 16.4 s eager-kernel builds``."""
    return " + ".join([f"{dynamo:.1f} s Dynamo compile"]
                      + ([f"{neff:.1f} s NEFF builds"] if neff else [])
                      + ([f"{kernels:.1f} s eager-kernel builds"] if kernels else []))


def compile_share(events: list[CompileEvent], wall: float | None) -> Advice:
    """Compile seconds (the slowest rank's: ranks compile side by side, and a title says which
    rank when there are several), NEFF and eager-kernel builds included and named, and their
    share of ``wall`` (the run's wall time, when known)."""
    per_rank = _seconds(events)
    rank, (dynamo, neff, kernels) = max(sorted(per_rank.items(), key=itemgetter(0)),  # a tie:
                                        key=lambda kv: sum(kv[1]),  # the lowest rank
                                        default=(0, [0.0, 0.0, 0.0]))
    total = dynamo + neff + kernels  # ranks compile side by side: the busiest rank's
    again = avoidable(events)
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events), "avoidable": again,
                            "dynamo_s": round(dynamo, 3)}
    if neff:
        nums["neff_s"] = round(neff, 3)
    if kernels:
        nums["kernel_s"] = round(kernels, 3)
    who, said = "", ""
    if len(per_rank) > 1:
        everyone = sum(map(sum, per_rank.values()))
        nums.update(rank=rank, ranks=len(per_rank), all_ranks_s=round(everyone, 3))
        who = f"rank {rank}, the busiest of {len(per_rank)} ranks: "
        said = (f"Rank {rank} compiled longest: {_sources(dynamo, neff, kernels)}; all "
                f"{len(per_rank)} ranks together: {everyone:.1f} s (ranks compile side by side, "
                "so the share is the busiest rank's). ")
    elif neff or kernels:
        said = f"Compiling: {_sources(dynamo, neff, kernels)}. "
    if not wall:
        mine = sum(1 for e in events if e.rank == rank)
        where = "; ".join(filter(None, [who.rstrip(": "), _sources(dynamo, neff, kernels)
                                        if neff or kernels else ""]))
        return Advice(f"compiling took {total:.2f} s" + (f" ({where})" if where else "")
                      + f" over {count(mine, 'event')}", said + "The run's wall time is "
                      "unknown, so its share cannot be given.", "", "info", nums)
    share = total / wall
    nums.update(wall_s=round(wall, 3), share=round(share, 4))
    title = f"compile time is {share:.0%} of the run ({who}{total:.1f} s of {wall:.1f} s)"
    if share <= SHARE_WARNING:
        return Advice(title, said.strip(), "", "info", nums)
    if not again:
        return Advice(title + ": first compiles", said + f"More than {SHARE_WARNING:.0%} of the "
                      "wall time went into compiling, but every compile was a function's first "
                      "graph (each graph once, no recompile): a warm-up before serving "
                      "(nk.warmup) or the NEFF cache of an earlier run takes them off the "
                      "serving path.", "", "info", nums)
    return Advice(title, said + f"More than {SHARE_WARNING:.0%} of the wall time went into "
                  f"compiling, with {count(again, 'avoidable event')} (recompiles, limit hits, "
                  "eager fallbacks).", "compile fewer graphs (see the findings above) and keep "
                  "the Neuron compile cache between runs so repeated graphs load instead of "
                  "compiling", "warning", nums)
