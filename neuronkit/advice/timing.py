"""The compile-time finding: how long compiling took, and its share of the run's wall time.

``diagnose()`` puts it last whatever its severity: it depends on the machine's speed."""
from __future__ import annotations

from collections import defaultdict
from operator import attrgetter
from typing import Any

from neuronkit.advice.finding import Advice
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import neff_seconds

__all__ = ["SHARE_WARNING", "compile_share"]

SHARE_WARNING = 0.20  # compile time above this share of the run is a warning


def compile_share(events: list[CompileEvent], wall: float | None) -> Advice:
    """Compile seconds (the slowest rank's: ranks compile side by side), NEFF builds included,
    and their share of ``wall`` (the run's wall time, when known)."""
    seconds: dict[int, float] = defaultdict(float)
    for e in events:
        seconds[e.rank] += e.duration_s
    for e in events if any(map(attrgetter("neff_compile_s"), events)) else ():
        seconds[e.rank] += e.total_s - e.duration_s  # the NEFF build on Neuron
    total = max(seconds.values(), default=0.0)  # ranks compile side by side
    nums: dict[str, Any] = {"compile_s": round(total, 3), "events": len(events)}
    neff = neff_seconds(events)
    if neff:
        nums["neff_s"] = round(neff, 3)
    if not wall:
        return Advice(f"compiling took {total:.2f} s over {count(len(events), 'event')}"
                      + (f" (of which {neff:.1f} s NEFF builds)" if neff else ""),
                      "The run's wall time is unknown, so its share cannot be given.", "", "info", nums)
    share = total / wall
    nums.update(wall_s=round(wall, 3), share=round(share, 4))
    high = share > SHARE_WARNING
    return Advice(f"compile time is {share:.0%} of the run ({total:.1f} s of {wall:.1f} s)",
                  f"More than {SHARE_WARNING:.0%} of the wall time went into compiling." if high else "",
                  "compile fewer graphs (see the findings above) and keep the Neuron compile cache "
                  "between runs so repeated graphs load instead of compiling" if high else "",
                  "warning" if high else "info", nums)
