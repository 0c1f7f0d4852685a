"""Advice about ranks: ranks that compiled different graphs, and the rank groups of a TP x FSDP
layout whose ranks did (the groups come from ``workloads/rank_groups.py``)."""
from __future__ import annotations

from collections.abc import Sequence
from operator import attrgetter

from neuronkit.advice.finding import Advice
from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import of_kind, shape_key
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.rank_groups import RankGroup, graphs_text, group_compiles

__all__ = ["group_findings", "rank_findings"]


def rank_findings(events: list[CompileEvent], labels: dict[tuple[str, str], str]) -> list[Advice]:
    """A warning when the ranks of a merged log compiled different graphs (by function label
    and input shapes), naming what each rank alone compiled."""
    seen: dict[int, set[tuple[str, str]]] = {rank: set() for rank in {e.rank for e in events}}
    graphs = of_kind(events, *GRAPH_KINDS)
    places = map(labels.__getitem__, zip(map(attrgetter("function"), graphs),
                                         map(attrgetter("location"), graphs), strict=True))
    for rank, seen_here in zip(map(attrgetter("rank"), graphs),
                               zip(places, map(shape_key, graphs), strict=True), strict=True):
        seen[rank].add(seen_here)
    if len(seen) < 2 or len({frozenset(s) for s in seen.values()}) == 1:
        return []
    common = set.intersection(*seen.values())
    counts = {r: len(s) for r, s in sorted(seen.items())}
    only = {r: sorted(s - common) for r, s in sorted(seen.items()) if s - common}
    waited = _waits(graphs, labels, common)
    detail = "; ".join(f"rank {r} alone compiled {len(x)}: " + ", ".join(f"{f} {sh}" for f, sh in x[:2])
                       + (f" and {len(x) - 2} more" if len(x) > 2 else "")
                       + (f" (about {waited[r]:.1f} s the others waited for it at the next "
                          "collective)" if waited.get(r) else "") for r, x in only.items())
    return [Advice(
        "ranks compiled different graphs: " + ", ".join(f"rank {r}: {n}" for r, n in counts.items()),
        detail + ". A rank compiling a graph the others do not stalls them at the next collective.",
        "give every rank the same shapes: the same padding or buckets (padding='max_length'), the "
        "same per-device batch size and dataloader_drop_last=True", "warning",
        {"graphs_per_rank": counts, "only_on_rank": {r: len(x) for r, x in only.items()},
         "common": len(common), "waited_s": {r: round(s, 3) for r, s in waited.items() if s}})]


def _waits(graphs: list[CompileEvent], labels: dict[tuple[str, str], str],
           common: set[tuple[str, str]]) -> dict[int, float]:
    """Per rank, the seconds its compiles of graphs no other rank compiled took, from their
    (aligned) start to their end: the time the other ranks waited at the next collective."""
    spans: dict[int, list[tuple[float, float]]] = {}
    for e in graphs:
        if (labels[e.function, e.location], shape_key(e)) not in common:
            start = e.started_at if isinstance(e.started_at, (int, float)) else 0.0
            spans.setdefault(e.rank, []).append((start, start + e.total_s))
    waits = {}
    for rank, pairs in spans.items():  # overlapping compiles (threads) count once
        pairs.sort()
        total, end = 0.0, float("-inf")
        for lo, hi in pairs:
            total += max(0.0, hi - max(lo, end))
            end = max(end, hi)
        waits[rank] = total
    return waits


def group_findings(log: CompileLog, groups: Sequence[RankGroup]) -> list[Advice]:
    """``diagnose(log, groups=...)``'s finding about the groups: a warning naming the groups
    whose ranks compiled different graphs (and the functions that differ), else one line per
    group saying what its ranks compiled."""
    summary = group_compiles(log, groups)
    if not summary:
        return []
    numbers = {"groups": {g.group.label: dict(g.graphs) for g in summary},
               "missing": {g.group.label: list(g.missing) for g in summary if g.missing}}
    bad = [g for g in summary if not g.agree]
    if not bad:
        return [Advice("every rank group compiled the same graphs: "
                       + ", ".join(f"{g.group.label} {graphs_text(next(iter(g.graphs.values()), 0))} "
                                   "each" for g in summary),
                       "; ".join(g.line() for g in summary) + ".", "", "info", numbers)]
    return [Advice(
        "rank groups compiled different graphs: " + ", ".join(g.group.label for g in bad),
        "; ".join(g.line() for g in bad) + ". The ranks of one group run the same code on "
        "batches of one shape and meet at every collective, so a rank that compiles a graph the "
        "others do not stalls its whole group (on Neuron, for minutes).",
        "give every rank of a group the same shapes: the same padding or buckets "
        "(padding='max_length'), the same per-device batch size, dataloader_drop_last=True; with "
        "expert parallelism, a fixed expert capacity", "warning", numbers)]
