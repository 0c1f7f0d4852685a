"""Rank groups of DistributedConfig(tp_size=T, fsdp_size=F): the layout, what each group
compiled, and the guide's 2x2 layout for real on four CPU processes (gloo). A module of its own,
so that the four-process run and the two-process ones in test_distributed.py run side by side
on two test workers."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.rank_groups import (
    RankGroup,
    format_group_compiles,
    fsdp_shard,
    group_compiles,
    mesh_rank_groups,
    rank_groups,
)

# ---- rank groups of a tp x fsdp layout -------------------------------------------------------

def test_rank_groups_2x2_follow_the_mesh_layout():
    groups = rank_groups(2, 2, world_size=4)
    assert [(g.axis, g.index, g.ranks) for g in groups] == [
        ("tp", 0, (0, 1)), ("tp", 1, (2, 3)), ("fsdp", 0, (0, 2)), ("fsdp", 1, (1, 3))]
    assert [g.label for g in groups] == ["tp group [0, 1] (fsdp shard 0)",
                                         "tp group [2, 3] (fsdp shard 1)",
                                         "fsdp group [0, 2] (tp rank 0)",
                                         "fsdp group [1, 3] (tp rank 1)"]
    assert groups[0] == RankGroup("tp", 0, (0, 1), other=2)
    assert [fsdp_shard(groups, r) for r in range(4)] == [0, 0, 1, 1]
    # one axis only: no groups of one rank, no "(fsdp shard 0)" to name
    assert [g.label for g in rank_groups(2, 1)] == ["tp group [0, 1]"]
    assert [g.label for g in rank_groups(1, 2)] == ["fsdp group [0, 1]"]
    assert fsdp_shard(rank_groups(2, 1), 1) == 0 and fsdp_shard(rank_groups(1, 2), 1) == 1
    assert rank_groups(1, 1, 1) == []
    assert [g.ranks for g in rank_groups(4, 2) if g.axis == "fsdp"] == [(0, 4), (1, 5),
                                                                        (2, 6), (3, 7)]


def test_rank_groups_errors():
    with pytest.raises(ValueError, match=r"needs 4 processes, but world_size is 2.*"
                                         r"--nproc_per_node=4"):
        rank_groups(2, 2, world_size=2)
    for bad in (0, -1, True, 2.0):
        with pytest.raises(ValueError, match="tp_size must be a positive int"):
            rank_groups(bad, 2)


def mesh(names, shape):
    return SimpleNamespace(mesh_dim_names=names,
                           mesh=torch.arange(int(torch.tensor(shape).prod())).reshape(shape))


def test_mesh_rank_groups_read_transformers_mesh():
    # what transformers builds: dims ("pp", "fsdp", "tp"), tp innermost
    assert mesh_rank_groups(mesh(("pp", "fsdp", "tp"), (1, 2, 2))) == rank_groups(2, 2)
    assert mesh_rank_groups(mesh(("pp", "fsdp", "tp"), (1, 2, 4))) == rank_groups(4, 2)
    assert mesh_rank_groups(mesh(("pp", "fsdp", "tp"), (1, 1, 2))) == rank_groups(2, 1)
    # a mesh laid out the other way round gives its own groups, not the documented ones
    swapped = mesh_rank_groups(mesh(("tp", "fsdp"), (2, 2)))
    assert [g.ranks for g in swapped if g.axis == "tp"] == [(0, 2), (1, 3)]
    with pytest.raises(ValueError, match="also has {'pp': 2}"):
        mesh_rank_groups(mesh(("pp", "fsdp", "tp"), (2, 1, 2)))
    with pytest.raises(ValueError, match="named dims"):
        mesh_rank_groups(object())


def rank_events(rank, functions, step="step 1"):
    return [CompileEvent(function=fn, kind="first" if i == 0 else "recompile", rank=rank,
                         context=step, input_shapes={"input_ids": [2, 32]})
            for i, fn in enumerate(functions)]


def merged_of(per_rank, ranks=None):
    events = [e for r, fns in per_rank.items() for e in rank_events(r, fns)]
    return CompileLog(events, header={**CompileLog().header,
                                      "ranks": sorted(per_rank) if ranks is None else ranks})


def test_group_compiles_when_every_group_agrees():
    log = merged_of({r: ["forward", "forward", "layer"] for r in range(4)})
    log.events += rank_events(0, ["guard"], "step 2")[:1] + [
        e for r in (1, 2, 3) for e in rank_events(r, ["guard"], "step 2")]
    summary = group_compiles(log, rank_groups(2, 2, 4))
    assert all(g.agree for g in summary) and [g.graphs for g in summary][0] == {0: 4, 1: 4}
    assert summary[0].line() == ("tp group [0, 1] (fsdp shard 0): 4 graphs each "
                                 "(step 1: 3, step 2: 1)")
    text = format_group_compiles(summary, "the documented layout")
    assert text.splitlines()[0] == ("graphs compiled per rank group (groups from the documented "
                                    "layout):")
    assert "tp group [2, 3] (fsdp shard 1): 4 graphs each" in text
    assert text.splitlines()[-1].strip() == "every group's ranks compiled the same graphs"


def test_group_compiles_flags_a_group_whose_ranks_disagree():
    # rank 3 compiled one more graph of "forward" (a rank-dependent shape, say)
    log = merged_of({0: ["forward", "layer"], 1: ["forward", "layer"],
                     2: ["forward", "layer"], 3: ["forward", "forward", "layer"]})
    summary = group_compiles(log, rank_groups(2, 2, 4))
    agree = {g.group.label: g.agree for g in summary}
    assert agree == {"tp group [0, 1] (fsdp shard 0)": True,
                     "tp group [2, 3] (fsdp shard 1)": False,
                     "fsdp group [0, 2] (tp rank 0)": True,
                     "fsdp group [1, 3] (tp rank 1)": False}
    bad = summary[1]
    assert bad.graphs == {2: 2, 3: 3} and bad.differing_functions() == {"forward": {2: 1, 3: 2}}
    assert bad.line() == ("tp group [2, 3] (fsdp shard 1): RANKS DIFFER (rank 2: 2 graphs, "
                          "rank 3: 3 graphs); differing: forward (rank 2: 1, rank 3: 2)")
    text = format_group_compiles(summary)
    assert "WARNING: the ranks of tp group [2, 3] (fsdp shard 1); fsdp group [1, 3] (tp rank 1) " \
           "compiled different graphs" in text
    assert "every group's ranks compiled the same graphs" not in text


def test_group_compiles_names_a_rank_without_a_log():
    log = merged_of({0: ["forward"], 1: ["forward"], 2: ["forward"]}, ranks=[0, 1, 2])
    summary = group_compiles(log, rank_groups(2, 2, 4))
    assert summary[1].missing == (3,) and not summary[1].agree
    assert summary[1].line() == ("tp group [2, 3] (fsdp shard 1): RANKS DIFFER "
                                 "(rank 2: 1 graph, rank 3: no log)")
    # a rank that wrote a log but compiled nothing is present, with 0 graphs
    quiet = group_compiles(merged_of({0: ["f"]}, ranks=[0, 1]), rank_groups(2, 1))[0]
    assert quiet.graphs == {0: 1, 1: 0} and quiet.missing == () and not quiet.agree
    assert format_group_compiles([]).endswith("(one process: no rank groups)")


# The guide's DistributedConfig(tp_size=2, fsdp_size=2) on 4 CPU processes runs once, in
# notebooks/05_distributed.ipynb under nbval: its checked cells pin the exit code and the four
# rank logs, the device line, "not Trainium" said and no warning, each group's graph counts from
# transformers' device mesh, the groups agreeing, a TP group sharing one loss, the Trainer refusal.


def test_diagnose_with_rank_groups_says_what_each_group_compiled():
    import neuronkit as nk

    same = merged_of({r: ["forward", "layer"] for r in range(4)})
    groups = rank_groups(2, 2, 4)
    plain = nk.diagnose(same)
    found = nk.diagnose(same, rank_groups=groups)
    assert len(found) == len(plain) + 1 and found[-1].title == plain[-1].title  # timing last
    [info] = [a for a in found if "rank group" in a.title]
    assert info.severity == "info" and info.title.startswith("every rank group compiled the same")
    assert "tp group [0, 1] (fsdp shard 0) 2 graphs each" in info.title
    assert info.numbers["groups"]["fsdp group [1, 3] (tp rank 1)"] == {1: 2, 3: 2}

    differ = merged_of({0: ["forward", "layer"], 1: ["forward", "layer"],
                        2: ["forward", "layer"], 3: ["forward", "forward", "layer"]})
    found = nk.diagnose(differ, rank_groups=groups)
    [warning] = [a for a in found if "rank group" in a.title]
    assert warning.severity == "warning" and found.index(warning) < len(found) - 1
    assert warning.title == ("rank groups compiled different graphs: tp group [2, 3] (fsdp shard "
                             "1), fsdp group [1, 3] (tp rank 1)")
    assert "rank 2: 2 graphs, rank 3: 3 graphs" in warning.detail and "forward" in warning.detail
    assert "same per-device batch size" in warning.fix
    # the same events as a plain list: the groups are found the same way
    as_list = nk.diagnose(list(differ.events), rank_groups=groups)
    assert [a.title for a in as_list if "rank group" in a.title] == [warning.title]
