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
from neuronkit.log.rank_logs import merge_logs
from neuronkit.workloads.distributed import launch
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


@pytest.mark.slow
def test_tp2_x_fsdp2_on_four_processes_compiles_the_same_per_rank_group(tmp_path,
                                                                        tiny_model_path):
    """The guide's DistributedConfig(tp_size=2, fsdp_size=2) on 4 CPU processes (gloo)."""
    result = launch("neuronkit.examples.distributed_training", 4,
                    ["--tp-size", "2", "--fsdp-size", "2", "--steps", "2",
                     "--model", str(tiny_model_path)],
                    timeout_s=300, on_line=None, log_dir=tmp_path / "logs",
                    env={"NEURONKIT_CPU_BACKEND": "eager"})
    assert result.returncode == 0
    assert [p.name for p in result.log_paths] == [f"compile.rank{r}.jsonl" for r in range(4)]
    merged = merge_logs(result.log_paths)
    assert merged.header["ranks"] == [0, 1, 2, 3]
    graphs = {r: sum(e.kind in ("first", "recompile") for e in merged.events if e.rank == r)
              for r in range(4)}
    assert len(set(graphs.values())) == 1 and graphs[0] > 0, graphs
    summary = group_compiles(merged, rank_groups(2, 2, 4))
    assert all(g.agree for g in summary)
    # what the run printed: the device really used, and the groups read from transformers' mesh
    out = "\n".join(result.lines)
    assert "[rank 0] device: cpu | process group: gloo | torch.compile backend: eager" in out
    assert "tp_size 2 x fsdp_size 2 | plain training loop" in out
    assert "on CPU, not Trainium:" in out and "device: neuron" not in out
    why = [ln for ln in result.lines if ln.startswith("[rank 0] Trainer not used:")]
    assert len(why) == 1 and "tp_size=2, fsdp_size=2" in why[0] and "MULTI_CPU" in why[0]
    assert "plain loop" in why[0]  # (the TP path of --mode tp is this one, on two ranks)
    assert "transformers' device mesh ('pp', 'fsdp', 'tp'), same as the documented layout" in out
    n = graphs[0]
    for label in ("tp group [0, 1] (fsdp shard 0)", "tp group [2, 3] (fsdp shard 1)",
                  "fsdp group [0, 2] (tp rank 0)", "fsdp group [1, 3] (tp rank 1)"):
        assert f"  {label}: {n} graphs each" in out
    assert "every group's ranks compiled the same graphs" in out
    assert "UserWarning" not in out
    # a TP group shares its batches (one loss); the two FSDP shards train on different ones
    losses = {r: ln.split(" loss ", 1)[1] for r in range(4) for ln in result.lines
              if ln.startswith(f"[rank {r}] step 2 loss ")}
    assert losses[0] == losses[1] and losses[2] == losses[3] and losses[0] != losses[2]
    assert losses[0].endswith("(fsdp shard 0)") and losses[2].endswith("(fsdp shard 1)")


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
