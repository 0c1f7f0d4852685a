"""Per-rank log paths, merging rank logs, the torchrun launcher (real torchrun, 2 processes), the
example FSDP (Trainer) and TP (plain loop) runs, the explained Trainer + TP on CPU refusal, rank
groups of a tp x fsdp layout, and the 2x2 run on 4 processes."""
from __future__ import annotations

import os
import sys
import textwrap
import time
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from neuronkit.events.event import CompileEvent
from neuronkit.examples import distributed_training
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.rank_logs import find_rank_logs, merge_logs, rank_log_path
from neuronkit.setup.process import default_rank as rank
from neuronkit.workloads.distributed import (
    LaunchError,
    TrainerParallelismError,
    check_trainer_parallelism,
    launch,
)

# ---- rank and log paths ----------------------------------------------------------------------

def test_rank_log_path_forms(tmp_path, monkeypatch):
    monkeypatch.delenv("RANK", raising=False)
    assert rank() == 0
    assert rank_log_path("logs/compile.jsonl", 1).as_posix() == "logs/compile.rank1.jsonl"
    assert rank_log_path("logs/run", 2).as_posix() == "logs/run.rank2.jsonl"
    assert rank_log_path("logs/compile.rank0.jsonl", 3).as_posix() == "logs/compile.rank3.jsonl"
    assert rank_log_path(tmp_path, 4) == tmp_path / "compile.rank4.jsonl"      # a folder
    monkeypatch.setenv("RANK", "5")
    assert rank() == 5 and rank_log_path("x.jsonl").name == "x.rank5.jsonl"
    with pytest.raises(ValueError, match="non-negative int"):
        rank_log_path("x.jsonl", -1)


def write_rank_log(path, rank_in_header, functions):
    header = None
    if rank_in_header is not None:
        header = {**CompileLog().header, "rank": rank_in_header}
    log = CompileLog(header=header, path=path)
    for i, fn in enumerate(functions):
        log.append(CompileEvent(function=fn, kind="first" if i == 0 else "recompile",
                                started_at=1000.0 + i + (rank_in_header or 0) * 0.5,
                                duration_s=0.5))
    return path


def test_merge_logs_stamps_every_event_with_its_rank(tmp_path):
    a = write_rank_log(tmp_path / "c.rank0.jsonl", None, ["forward", "forward"])  # rank from name
    b = write_rank_log(tmp_path / "other.jsonl", 1, ["forward", "forward", "forward"])  # header
    c = write_rank_log(tmp_path / "c.rank2.jsonl", 2, [])                          # no events
    merged = merge_logs([a, b, c])
    assert len(merged.events) == 5 and merged.header["ranks"] == [0, 1, 2]
    assert sorted(e.rank for e in merged.events) == [0, 0, 1, 1, 1]
    assert [e.started_at for e in merged.events] == sorted(e.started_at for e in merged.events)
    assert [e.seq for e in merged.events] == list(range(5))
    assert merged.graph_counts() == {"forward": 5}
    # a folder works too, and the original logs are not modified
    folder = merge_logs(tmp_path)
    assert folder.header["ranks"] == [0, 2] and len(folder.events) == 2
    assert all(e.rank == 0 for e in CompileLog.load(a).events)


def test_merge_logs_errors(tmp_path):
    a = write_rank_log(tmp_path / "c.rank0.jsonl", None, ["f"])
    b = write_rank_log(tmp_path / "d.rank0.jsonl", None, ["f"])
    with pytest.raises(ValueError, match="two logs for rank 0"):
        merge_logs([a, b])
    with pytest.raises(ValueError, match="no logs"):
        merge_logs([])
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(ValueError, match=r"no \*\.rank<N>\.jsonl logs"):
        merge_logs(empty)
    assert find_rank_logs(tmp_path) == [a, b]


# ---- Trainer + tensor parallelism on CPU -----------------------------------------------------

def fake_model(tp_size, device="cpu"):
    param = SimpleNamespace(device=torch.device(device) if device != "neuron" else
                            SimpleNamespace(type="neuron"))
    return SimpleNamespace(tp_size=tp_size, parameters=lambda: iter([param]))


def test_trainer_with_tp_on_cpu_is_explained_before_accelerate_refuses():
    with pytest.raises(TrainerParallelismError) as err:
        check_trainer_parallelism(fake_model(2))
    text = str(err.value)
    assert "tp_size=2" in text and "DistributedType.MULTI_CPU" in text
    assert "plain loop" in text and "On Neuron the same Trainer script works" not in text
    assert "accelerate's check accepts a tensor-parallel model" in text  # read, not measured:
    assert "neuronkit has not run Trainer with tensor parallelism on Neuron" in text
    check_trainer_parallelism(fake_model(1))              # not tensor parallel: fine
    check_trainer_parallelism(fake_model(2, "neuron"))    # accelerate's check accepts TP on Neuron
    check_trainer_parallelism(fake_model(2), device="neuron:0")


def test_trainer_refusal_names_the_fsdp_size_too():
    model = fake_model(2)
    model.fsdp_size = 2
    with pytest.raises(TrainerParallelismError) as err:
        check_trainer_parallelism(model)
    text = str(err.value)
    assert "tp_size=2, fsdp_size=2" in text and "stays MULTI_CPU" in text
    assert "--tp-size N [--fsdp-size M]" in text


def test_example_layout_from_the_command_line():
    layout = distributed_training.layout
    assert layout(None, None, None, 2) == (1, 2)             # default: FSDP over all processes
    assert layout("tp", None, None, 2) == (2, 1)
    assert layout(None, 2, 2, 4) == (2, 2)
    assert layout(None, 4, None, 4) == (4, 1)
    with pytest.raises(ValueError, match="not both"):
        layout("fsdp", 2, 2, 4)
    with pytest.raises(ValueError, match="needs 4 processes, but world_size is 2"):
        layout(None, 2, 2, 2)


# ---- launch ----------------------------------------------------------------------------------

SCRIPT = textwrap.dedent("""
    import os, sys, time
    from neuronkit.log.rank_logs import rank_log_path
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog
    rank = int(os.environ["RANK"])
    mode = sys.argv[1]
    # one write per line: the ranks share one pipe, and unbuffered print() writes the text and
    # its newline separately, so two ranks' lines could interleave
    sys.stdout.write(f"rank {rank} of {os.environ['WORLD_SIZE']} says hello\\n")
    if mode == "fail" and rank == 1:
        raise SystemExit("rank 1 could not find its data shard")
    if mode == "hang":
        sys.stdout.write(f"pids {os.getpid()} {os.getppid()}\\n")  # this rank, torchrun's agent
        time.sleep(120)
    log = CompileLog(path=rank_log_path(os.path.join(os.environ["NEURONKIT_LOG_DIR"], "c.jsonl")))
    log.append(CompileEvent(function="forward", rank=rank, started_at=time.time()))
""")


@pytest.fixture
def script(tmp_path):
    path = tmp_path / "hello.py"
    path.write_text(SCRIPT)
    return path


@pytest.mark.slow
def test_launch_streams_output_and_finds_rank_logs(tmp_path, script):
    seen: list[str] = []
    stale = tmp_path / "logs" / "old.rank7.jsonl"         # left by an earlier run: not reported
    stale.parent.mkdir()
    stale.write_text("{}")
    os.utime(stale, (time.time() - 3600, time.time() - 3600))
    result = launch(script, nproc_per_node=2, args=["ok"], timeout_s=120, on_line=seen.append,
                    log_dir=tmp_path / "logs")
    assert result.ok and result.returncode == 0 and result.wall_s > 0
    assert {"rank 0 of 2 says hello", "rank 1 of 2 says hello"} <= set(seen)
    assert result.lines == seen and result.command[:3] == [sys.executable, "-m",
                                                           "torch.distributed.run"]
    assert [p.name for p in result.log_paths] == ["c.rank0.jsonl", "c.rank1.jsonl"]
    assert result.merged_log().header["ranks"] == [0, 1]


@pytest.mark.slow
def test_launch_names_the_failed_rank_and_its_error(tmp_path, script):
    with pytest.raises(LaunchError) as err:
        launch(script, 2, ["fail"], timeout_s=120, on_line=None, log_dir=tmp_path / "logs")
    text = str(err.value)
    assert "rank 1 exited with code 1" in text and "could not find its data shard" in text
    assert err.value.result.returncode != 0


@pytest.mark.slow
def test_launch_kills_the_run_at_the_time_bound(tmp_path, script):
    start = time.time()
    with pytest.raises(LaunchError, match=r"ran past timeout_s=6 s and was stopped") as err:
        launch(script, 2, ["hang"], timeout_s=6, on_line=None)
    assert time.time() - start < 30
    assert err.value.result.returncode != 0


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"   # a zombie has exited
    except FileNotFoundError:
        return False


@pytest.mark.slow
def test_launch_kills_torchrun_when_on_line_raises(script):
    pids: list[int] = []

    def on_line(line):
        if line.startswith("pids "):
            pids.extend(int(p) for p in line.split()[1:])
            raise RuntimeError("the notebook cell was interrupted")

    start = time.time()
    with pytest.raises(RuntimeError, match="cell was interrupted"):
        launch(script, 1, ["hang"], timeout_s=120, on_line=on_line)
    assert len(pids) == 2
    while any(_alive(p) for p in pids) and time.time() - start < 30:
        time.sleep(0.2)
    assert not any(_alive(p) for p in pids), "torchrun or its rank survived"
    assert time.time() - start < 30


def test_launch_bad_arguments(tmp_path):
    with pytest.raises(ValueError, match="nproc_per_node"):
        launch("x.py", 0)
    with pytest.raises(FileNotFoundError, match="training script not found"):
        launch(tmp_path / "missing.py")
    with pytest.raises(TypeError, match="list of strings"):
        launch(Path(distributed_training.__file__), args="--steps 2")


# ---- the example script under torchrun (2 ranks, gloo) ---------------------------------------
# Its two-process FSDP run under Trainer runs once, in notebooks/05_distributed.ipynb under
# nbval: the checked cells pin the two rank logs and their header ranks, the merged ranks, each
# rank's steps, forward compiled first on every rank, and the run's own compile report.
