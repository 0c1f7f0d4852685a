"""nk.compile_budget counts truly: graphs torch refused at its recompile limit (limit hits, and
calls that ran eager after one, even when the hit came before the block), never the recorder's own
log as its log_path, and a header that names no device the run did not use."""
from __future__ import annotations

import pytest
import torch
import torch._dynamo

import neuronkit as nk
from neuronkit.apps.budget import CompileBudgetExceeded, compile_budget
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.report_json import report_data


def double_plus_one(x):
    return x * 2 + 1


@pytest.fixture
def compiled(compiler_reset):
    """A tiny function compiled with ``dynamic=False``: every new shape is a new graph."""
    return torch.compile(double_plus_one, backend="eager", dynamic=False)


def ran_eager(rec: nk.CompileRecorder, shape: int, function: str = "decode") -> None:
    """What nk.generate and the Trainer callback record for calls torch ran uncompiled."""
    rec.record(kind="eager_fallback", function=function, location="model.py:1", calls=4,
               input_shapes={"input_ids": [1, shape]})


# -- calls that ran eager after a limit hit ---------------------------------------------------------
def test_calls_that_ran_eager_count_as_the_graphs_torch_refused():
    rec = nk.CompileRecorder(device="cpu", backend="eager")
    with pytest.raises(CompileBudgetExceeded, match=r"1 graph > max_graphs=0") as caught:
        with compile_budget(max_graphs=0, recorder=rec):  # before: met, with a shape run eager
            ran_eager(rec, 16)
    assert "1 refused at the recompile limit" in str(caught.value)
    assert "eager_fallback" in str(caught.value)  # the table shows the eager calls counted
    with pytest.raises(CompileBudgetExceeded, match=r"1 recompile > max_recompiles=0"):
        with compile_budget(max_recompiles=0, recorder=rec):
            ran_eager(rec, 16)


def test_a_limit_hit_and_the_eager_calls_of_its_shape_count_once():
    rec = nk.CompileRecorder(device="cpu", backend="eager")
    with compile_budget(recorder=rec) as budget:
        rec.record(kind="limit_hit", function="decode", location="model.py:1")
        ran_eager(rec, 16)   # the shape the hit refused (nk.generate records both)
        ran_eager(rec, 16)   # a second batch of that shape: still one graph refused
    assert budget.counts()["max_graphs"] == budget.counts()["max_recompiles"] == 1
    with compile_budget(recorder=rec) as budget:
        rec.record(kind="limit_hit", function="decode", location="model.py:1")
        ran_eager(rec, 16)
        ran_eager(rec, 32)   # a later shape: run-only since the hit, torch records nothing
        ran_eager(rec, 8, function="other")
    assert budget.counts()["max_graphs"] == 3


def test_a_new_shape_after_an_earlier_limit_hit_is_counted(compiled):
    with torch._dynamo.config.patch(recompile_limit=2):
        for n in (1, 2, 3):      # the third shape hits the limit: torch runs the code run-only
            compiled(torch.ones(n))
        with compile_budget(max_graphs=0) as budget:  # a shape it compiled: still no graph
            assert compiled(torch.ones(1)).tolist() == [3.0]
        assert budget.ok and budget.events == []
        with pytest.raises(CompileBudgetExceeded, match=r"1 graph > max_graphs=0"), \
                pytest.warns(RuntimeWarning, match="EAGER"):
            with compile_budget(max_graphs=0) as budget:  # before: met, the shape ran eager
                assert compiled(torch.ones(4)).tolist() == [3.0] * 4
        assert [e.kind for e in budget.events] == ["limit_hit"]
        with pytest.raises(CompileBudgetExceeded, match=r"1 graph > max_graphs=0"), \
                pytest.warns(RuntimeWarning, match="EAGER"):
            with compile_budget(max_graphs=0):  # every block sees it, not only the first
                compiled(torch.ones(5))


# -- the log the budget writes -------------------------------------------------------------------------
def test_the_recorders_own_log_is_refused_as_log_path(tmp_path):
    path = tmp_path / "run.jsonl"
    rec = nk.CompileRecorder(path, device="cpu", backend="eager")
    with rec:
        rec.record(kind="eager_fallback", function="before the block", calls=1)
    with pytest.raises(ValueError, match=r"log_path .*run\.jsonl is the recorder's own log"):
        compile_budget(recorder=rec, log_path=tmp_path / "." / "run.jsonl")
    with compile_budget(recorder=rec, log_path=tmp_path / "block.jsonl"):
        rec.record(kind="eager_fallback", function="in the block", calls=1)
    assert [e.function for e in CompileLog.load(path).events] == ["before the block", "in the block"]
    assert [e.function for e in CompileLog.load(tmp_path / "block.jsonl").events] == ["in the block"]


def test_a_cpu_run_on_a_neuron_host_is_not_logged_as_neuron(fake_neuron, compiled, tmp_path):
    assert nk.detect().device == "neuron"  # the host has (fake) Neuron devices
    path = tmp_path / "budget.jsonl"
    with compile_budget(log_path=path):
        compiled(torch.ones(3))  # a CPU tensor: the run uses the CPU
    log = CompileLog.load(path)
    assert [e.device for e in log.events] == ["cpu"]
    assert log.header["device"] != "neuron"  # before: "neuron"
    assert report_data(log)["device"] == "cpu"
    assert nk.CompileRecorder().log.header["device"] != "neuron"
    assert nk.CompileRecorder(device="neuron").log.header["device"] == "neuron"  # as told
