"""The groups of ranks of a tensor-parallel x FSDP layout, and what each group compiled.

With ``DistributedConfig(tp_size=T, fsdp_size=F)`` the T*F ranks form groups: transformers
builds a device mesh of dims ("pp", "dp_replicate", "fsdp", "tp"), tp innermost, so a TP group
is T consecutive ranks (one FSDP shard: ``[0, 1]``, ``[2, 3]``) and an FSDP group strides by T
(``[0, 2]``, ``[1, 3]``). :func:`rank_groups` gives that layout, :func:`mesh_rank_groups` reads
it from the mesh itself, and :func:`group_compiles` / :func:`format_group_compiles` say per
group how many graphs its ranks compiled and flag a group whose ranks disagree.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal

from neuronkit.events.event import GRAPH_KINDS
from neuronkit.events.facts import function_labels
from neuronkit.log.compile_log import CompileLog

__all__ = ["RankGroup", "rank_groups", "mesh_rank_groups", "fsdp_shard", "GroupCompiles",
           "group_compiles", "format_group_compiles", "graphs_text"]


Axis = Literal["tp", "fsdp"]


@dataclass(frozen=True)
class RankGroup:
    """Ranks that share one parallel group on ``axis`` ("tp" or "fsdp").

    ``index`` is the group's place on the other axis: a TP group's FSDP shard, an FSDP group's
    TP rank. ``other`` is the size of that axis (1: there is no other axis to name).
    """

    axis: Axis
    index: int
    ranks: tuple[int, ...]
    other: int = 1

    @property
    def label(self) -> str:
        """``tp group [0, 1] (fsdp shard 0)``, or ``fsdp group [0, 1]`` without TP."""
        where = {"tp": "fsdp shard", "fsdp": "tp rank"}[self.axis]
        tail = f" ({where} {self.index})" if self.other > 1 else ""
        return f"{self.axis} group {list(self.ranks)}{tail}"


def _positive(name: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def rank_groups(tp_size: int, fsdp_size: int, world_size: int | None = None) -> list[RankGroup]:
    """The TP groups, then the FSDP groups, of ``DistributedConfig(tp_size, fsdp_size)``.

    transformers' documented layout (its mesh ("pp", "dp_replicate", "fsdp", "tp"), tp
    innermost): ``rank = fsdp_shard * tp_size + tp_rank``. tp=2 x fsdp=2: TP groups [0, 1] and
    [2, 3], FSDP groups [0, 2] and [1, 3]. Axes of size 1 have no groups. ``world_size``, when
    given, must be ``tp_size * fsdp_size`` (the number of processes torchrun starts).
    """
    tp, fsdp = _positive("tp_size", tp_size), _positive("fsdp_size", fsdp_size)
    if world_size is not None and _positive("world_size", world_size) != tp * fsdp:
        raise ValueError(f"tp_size={tp} x fsdp_size={fsdp} needs {tp * fsdp} processes, but "
                         f"world_size is {world_size}: start torchrun with "
                         f"--nproc_per_node={tp * fsdp}, or change the sizes")
    groups: list[RankGroup] = []
    if tp > 1:
        groups += [RankGroup("tp", s, tuple(range(s * tp, (s + 1) * tp)), fsdp)
                   for s in range(fsdp)]
    if fsdp > 1:
        groups += [RankGroup("fsdp", t, tuple(range(t, tp * fsdp, tp)), tp) for t in range(tp)]
    return groups


def mesh_rank_groups(device_mesh: Any) -> list[RankGroup]:
    """:func:`rank_groups` read from a device mesh (``model._device_mesh`` after
    ``from_pretrained(..., distributed_config=...)``: dims ("pp", "fsdp", "tp")).

    Every rank holds the whole mesh, so every rank gets the same groups. Needs a mesh with named
    dims; other dims than "tp" and "fsdp" must have size 1.
    """
    names = tuple(getattr(device_mesh, "mesh_dim_names", None) or ())
    ranks = getattr(device_mesh, "mesh", None)
    if not names or ranks is None:
        raise ValueError(f"expected a DeviceMesh with named dims, got {type(device_mesh).__name__}")
    sizes = dict(zip(names, ranks.shape, strict=True))
    extra = {n: s for n, s in sizes.items() if n not in ("tp", "fsdp") and s > 1}
    if extra:
        raise ValueError(f"mesh_rank_groups reads tp x fsdp layouts only; this mesh also has "
                         f"{extra}")
    tp, fsdp = int(sizes.get("tp", 1)), int(sizes.get("fsdp", 1))
    groups: list[RankGroup] = []
    axes: tuple[tuple[Axis, int, int], ...] = (("tp", tp, fsdp), ("fsdp", fsdp, tp))
    for axis, size, other in axes:
        if size > 1:
            rows = ranks.movedim(names.index(axis), -1).reshape(-1, size).tolist()
            groups += [RankGroup(axis, i, tuple(int(r) for r in row), other)
                       for i, row in enumerate(rows)]
    return groups


def fsdp_shard(groups: Sequence[RankGroup], rank: int) -> int:
    """Which FSDP shard ``rank`` is (its place in its FSDP group): the batches it takes. 0 when
    there is no FSDP axis (every rank sees the same data)."""
    for group in groups:
        if group.axis == "fsdp" and rank in group.ranks:
            return group.ranks.index(rank)
    return 0


@dataclass(frozen=True)
class GroupCompiles:
    """What the ranks of one group compiled: ``graphs`` per rank (first compiles and recompiles)
    and ``by_function`` per rank (graphs per function label); ``missing``: ranks without a log."""

    group: RankGroup
    graphs: dict[int, int]
    by_function: dict[int, dict[str, int]]
    by_step: dict[int, dict[str, int]]
    missing: tuple[int, ...] = ()

    @property
    def agree(self) -> bool:
        """Every rank of the group logged, and all compiled the same number of graphs."""
        return not self.missing and len(set(self.graphs.values())) <= 1

    def differing_functions(self) -> dict[str, dict[int, int]]:
        """The functions whose graph count differs between the group's ranks: label -> rank -> n."""
        present = [r for r in self.group.ranks if r in self.by_function]
        labels = sorted({f for r in present for f in self.by_function[r]})
        counts = {f: {r: self.by_function[r].get(f, 0) for r in present} for f in labels}
        return {f: c for f, c in counts.items() if len(set(c.values())) > 1}

    def line(self) -> str:
        """``tp group [0, 1] (fsdp shard 0): 18 graphs each (step 1: 16, step 2: 2)``, or what
        differs."""
        head = f"{self.group.label}: "
        if self.agree:
            n = next(iter(self.graphs.values()), 0)
            steps = {tuple(sorted(s.items())) for s in self.by_step.values()}
            when = ""
            if len(steps) == 1 and n:
                per_step = ", ".join(f"{c or 'no step'}: {k}" for c, k in next(iter(steps)))
                when = f" ({per_step})"
            return f"{head}{graphs_text(n)} each{when}"
        parts = [f"rank {r}: {graphs_text(self.graphs[r])}" for r in self.group.ranks
                 if r in self.graphs]
        parts += [f"rank {r}: no log" for r in self.missing]
        text = f"{head}RANKS DIFFER ({', '.join(parts)})"
        diff = self.differing_functions()
        if diff:
            shown = [f"{f} (" + ", ".join(f"rank {r}: {n}" for r, n in per.items()) + ")"
                     for f, per in list(diff.items())[:4]]
            more = f", +{len(diff) - 4} more" if len(diff) > 4 else ""
            text += f"; differing: {', '.join(shown)}{more}"
        return text


def graphs_text(n: int) -> str:
    return f"{n} graph{'' if n == 1 else 's'}"


def group_compiles(log: CompileLog, groups: Sequence[RankGroup]) -> list[GroupCompiles]:
    """Per group, the graphs its ranks compiled, from a merged log (:func:`merge_logs`).

    A rank counts as present when the log's header lists it (a rank that compiled nothing still
    wrote a log) or an event carries it; a group's other ranks are ``missing``.
    """
    labels = function_labels(log.events)
    present = set(log.header.get("ranks", [])) | {e.rank for e in log.events}
    by_function: dict[int, dict[str, int]] = {r: {} for r in present}
    by_step: dict[int, dict[str, int]] = {r: {} for r in present}
    for e in log.events:
        if e.kind in GRAPH_KINDS:
            label = labels[e.function, e.location]
            by_function[e.rank][label] = by_function[e.rank].get(label, 0) + 1
            by_step[e.rank][e.context] = by_step[e.rank].get(e.context, 0) + 1
    out = []
    for group in groups:
        here = [r for r in group.ranks if r in present]
        out.append(GroupCompiles(group, {r: sum(by_function[r].values()) for r in here},
                                 {r: by_function[r] for r in here},
                                 {r: by_step[r] for r in here},
                                 tuple(r for r in group.ranks if r not in present)))
    return out


def format_group_compiles(summary: Sequence[GroupCompiles], source: str = "") -> str:
    """The per-group lines, then a verdict: every group agrees, or which ones do not and why
    that matters. ``source``: where the groups came from, named in the heading."""
    head = "graphs compiled per rank group" + (f" (groups from {source})" if source else "") + ":"
    lines = [head] + [f"  {g.line()}" for g in summary]
    bad = [g.group.label for g in summary if not g.agree]
    if not summary:
        lines.append("  (one process: no rank groups)")
    elif bad:
        lines.append(f"  WARNING: the ranks of {'; '.join(bad)} compiled different graphs. Ranks "
                     "of one group run the same code on same-shaped batches, so this is a shape "
                     "or branch that depends on the rank (its data, a routing decision) or a rank "
                     "that stopped early; each extra graph is one more compile on Neuron.")
    else:
        lines.append("  every group's ranks compiled the same graphs")
    return "\n".join(lines)
