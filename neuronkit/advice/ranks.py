"""Advice about the rank groups of a TP x FSDP layout: a warning naming the groups whose ranks
compiled different graphs (the groups come from ``workloads/rank_groups.py``)."""
from __future__ import annotations

from collections.abc import Sequence

from neuronkit.advice.finding import Advice
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.rank_groups import RankGroup, graphs_text, group_compiles

__all__ = ["group_findings"]


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
