"""The compile-time finding: how long compiling took, and its share of the run's wall time.

A high share is a warning only when some compiles could have been avoided (a function compiled
again, a limit hit, an eager fallback); first compiles alone are info: each graph is built once,
and a warm-up or the NEFF cache takes them off the serving path. ``diagnose()`` puts it last whatever
its severity: it depends on the machine's speed."""
from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any

from neuronkit.advice.finding import Advice
from neuronkit.advice.wording import count
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import neff_seconds

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


def compile_share(events: list[CompileEvent], wall: float | None) -> Advice:
    """Compile seconds (the slowest rank's: ranks compile side by side), NEFF builds included,
    and their share of ``wall`` (the run's wall time, when known)."""
    seconds: dict[int, float] = defaultdict(float)
    for e in events:
        seconds[e.rank] += e.duration_s
    for e in events if any(map(attrgetter("neff_compile_s"), events)) else ():
        seconds[e.rank] += e.total_s - e.duration_s  # the NEFF build on Neuron
    total = max(seconds.values(), default=0.0)  # ranks compile side by side
    again = avoidable(events)
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events), "avoidable": again}
    neff = neff_seconds(events)
    if neff:
        nums["neff_s"] = round(neff, 3)
    if not wall:
        return Advice(f"compiling took {total:.2f} s over {count(len(events), 'event')}"
                      + (f" (of which {neff:.1f} s NEFF builds)" if neff else ""),
                      "The run's wall time is unknown, so its share cannot be given.", "", "info", nums)
    share = total / wall
    nums.update(wall_s=round(wall, 3), share=round(share, 4))
    title = f"compile time is {share:.0%} of the run ({total:.1f} s of {wall:.1f} s)"
    if share <= SHARE_WARNING:
        return Advice(title, "", "", "info", nums)
    if not again:
        return Advice(title + ": first compiles", f"More than {SHARE_WARNING:.0%} of the wall "
                      "time went into compiling, but every compile was a function's first graph "
                      "(each graph once, no recompile): a warm-up before serving (nk.warmup) or "
                      "the NEFF cache of an earlier run takes them off the serving path.", "",
                      "info", nums)
    return Advice(title, f"More than {SHARE_WARNING:.0%} of the wall time went into compiling, "
                  f"with {count(again, 'avoidable event')} (recompiles, limit hits, eager "
                  "fallbacks).", "compile fewer graphs (see the findings above) and keep the "
                  "Neuron compile cache between runs so repeated graphs load instead of "
                  "compiling", "warning", nums)
