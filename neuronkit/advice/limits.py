"""Findings about the recompile limit: a function torch stopped compiling and ran eagerly, and
how many shapes ran eager after the hit (counted exactly when neuronkit drove the calls, each
``nk.generate`` phase apart: an eager prefill is where Neuron builds a kernel per op)."""
from __future__ import annotations

from neuronkit.advice.breaks import on_ranks
from neuronkit.advice.finding import Advice
from neuronkit.advice.shapes import graphs_per_rank, limit_value, per_rank
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import of_kind, shape_key
from neuronkit.workloads.recompile_limit import PHASES, eager_phrase

__all__ = ["eager_phases", "limit_findings", "ran_eager"]

# On native Neuron each eager op is submitted as its own kernel, keyed by op name and tensor shapes
# and dtypes (core/NeuronBindings.cpp:1280-1327, tn/kernels/base.py:103-160): a prefill at a new
# prompt length builds a kernel for (nearly) every op of the forward before it runs
_PREFILL_ON_NEURON = (" Each eager prefill runs the whole forward op by op at its prompt length: "
                      "on Neuron every op of it first builds a kernel for that shape "
                      "(nk.generate(..., forecast_kernels=True) counts them on CPU).")


def ran_eager(events: list[CompileEvent], ranks: list[int]) -> tuple[int, bool]:
    """Shapes of one function that ran eager after a limit hit, on the rank with most, and
    whether that is exact: neuronkit counted them (``eager_fallback``), else only the refused
    compiles are known (one shape each; later eager calls leave no record)."""
    eager = of_kind(events, "eager_fallback")
    if eager:
        return max(len({shape_key(e) for e in eager if e.rank == r})
                   for r in {e.rank for e in eager}), True
    hits = of_kind(events, "limit_hit")
    return max(per_rank(hits, ranks).values(), default=0), False


def eager_phases(eager: list[CompileEvent]) -> dict[str, int]:
    """The eager calls per ``nk.generate`` phase (``metrics["phase"]``: a log's value, so only the
    known phases count) on the rank with most eager calls; empty where no event names one."""
    if not eager:
        return {}
    totals: dict[int, int] = {}
    for e in eager:
        totals[e.rank] = totals.get(e.rank, 0) + e.calls
    busiest = max(totals, key=lambda r: (totals[r], -r))
    calls: dict[str, int] = {}
    for e in eager:
        phase = e.metrics.get("phase") if isinstance(e.metrics, dict) else None
        if e.rank == busiest and phase in PHASES:
            calls[phase] = calls.get(phase, 0) + e.calls
    return calls


def limit_findings(function: str, events: list[CompileEvent], ranks: list[int]) -> list[Advice]:
    """The limit hits of one function (``function``: its label), with the limit that fits."""
    hits = of_kind(events, "limit_hit")
    if not hits:
        return []
    n, on, counts = on_ranks(hits, ranks)
    graphs = graphs_per_rank(events)
    limit = limit_value(hits) or graphs
    # torch refuses once the code holds the limit's graphs: that many, whatever was recorded here
    # (a wrapper shared by several models or phases, graphs compiled before recording)
    held = max([graphs, limit, *(e.graph_count for e in hits)])
    shapes, exact = ran_eager(events, ranks)
    eager = of_kind(events, "eager_fallback")
    calls = max((sum(e.calls for e in eager if e.rank == r) for r in ranks), default=0) \
        if eager else None
    phases = eager_phases(eager)
    need = held + shapes
    if exact:  # neuronkit drove the calls: it counted every one that ran eager
        ran = f"ran {count(calls or 0, 'call')} of {count(shapes, 'shape')}"
        if phases:  # nk.generate's: the prefill's calls apart from the decode's
            other = (calls or 0) - sum(phases.values())
            ran += f" ({eager_phrase(phases)}{f', {other} other' if other else ''})"
        needed = f"to {need} (the {held} graphs it held plus the shapes that ran eager)"
    else:
        ran = f"ran at least {count(shapes, 'new shape')}"
        needed = (f"to at least {need} (the {held} graphs it held plus the shapes refused; later "
                  "eager calls leave no record)")
    shared = (f" ({graphs} of them recorded for `{function}`: the others came before recording "
              "or from functions sharing its code)" if held > graphs else "")
    return [Advice(
        f"{function}: recompile limit hit {count(n, 'time')}{on}: torch ran it eagerly, "
        "uncompiled",
        f"After {held} graphs{shared} torch stopped compiling `{function}` "
        f"(torch._dynamo.config.recompile_limit = {limit}) and {ran} in eager mode without an "
        f"error. On Neuron that is op-by-op execution: far slower, silently."
        + (_PREFILL_ON_NEURON if phases.get("prefill") else ""),
        f"remove the shape change (pad to buckets, see the other findings), or raise "
        f"torch._dynamo.config.recompile_limit {needed}",
        "critical", {"function": function, "limit_hits": n, "graphs": graphs, "held": held,
                     "recompile_limit": limit, "shapes_seen": need, "eager_calls": calls,
                     "exact": exact, "per_rank": counts, "events": [e.seq for e in hits],
                     **({"eager_phases": phases} if phases else {})})]
