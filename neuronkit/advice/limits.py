"""Findings about the recompile limit: a function torch stopped compiling and ran eagerly, and
how many shapes ran eager after the hit (counted exactly when neuronkit drove the calls)."""
from __future__ import annotations

from neuronkit.advice.breaks import on_ranks
from neuronkit.advice.finding import Advice
from neuronkit.advice.shapes import graphs_per_rank, limit_value, per_rank
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import of_kind, shape_key

__all__ = ["limit_findings", "ran_eager"]


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
    need = held + shapes
    if exact:  # neuronkit drove the calls: it counted every one that ran eager
        ran = f"ran {count(calls or 0, 'call')} of {count(shapes, 'shape')}"
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
        f"error. On Neuron that is op-by-op execution: far slower, silently.",
        f"remove the shape change (pad to buckets, see the other findings), or raise "
        f"torch._dynamo.config.recompile_limit {needed}",
        "critical", {"function": function, "limit_hits": n, "graphs": graphs, "held": held,
                     "recompile_limit": limit, "shapes_seen": need, "eager_calls": calls,
                     "exact": exact, "per_rank": counts, "events": [e.seq for e in hits]})]
