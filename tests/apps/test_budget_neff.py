"""``max_neff_builds``: a budget on the NEFFs neuronx-cc really builds (the minutes on Neuron), not
on the graphs Dynamo traces again in every new process. Neuron here is the contract fake
(``tests/neuron_fake``); on CPU there are no NEFFs at all."""
from __future__ import annotations

import pytest
import torch

import neuronkit as nk
from neuronkit.apps.budget import CompileBudget, CompileBudgetExceeded, compile_budget


def add_one(x):
    return x + 1


@pytest.fixture
def on_neuron(fake_neuron, compiler_reset):
    """The Neuron fake and a function compiled with its ``neuron`` backend (one NEFF a shape)."""
    return fake_neuron, torch.compile(add_one, backend="neuron", dynamic=False)


def test_a_neff_loaded_from_the_disk_cache_is_not_a_build(on_neuron):
    fake, fn = on_neuron
    fake.plan("disk_hit")          # another process built it: the NEFF is in the cache folder
    with compile_budget(max_neff_builds=0) as budget:
        fn(torch.ones(2))
    assert budget.ok and budget.neff_builds == 0
    assert budget.graphs == 1      # Dynamo traced it all the same: max_graphs=0 would fail
    assert [e.neff_cache for e in budget.events] == ["disk_hit"]
    assert "0 NEFF builds, 1 loaded from the NEFF cache" in budget.report()
    with pytest.raises(CompileBudgetExceeded, match=r"1 graph > max_graphs=0"):
        with compile_budget(max_graphs=0):
            fake.plan("disk_hit")
            fn(torch.ones(5))


def test_a_neff_built_by_neuronx_cc_breaks_the_budget_and_is_named(on_neuron):
    fake, fn = on_neuron
    fake.plan("compiled", duration_s=95.0)
    with pytest.raises(CompileBudgetExceeded) as caught:
        with compile_budget(max_neff_builds=0) as budget:
            fn(torch.ones(3))
    message = str(caught.value)
    assert "1 NEFF build > max_neff_builds=0" in message
    assert "add_one (first): NEFF built by neuronx-cc in 95.0 s" in message
    assert budget.neff_builds == 1 and caught.value.exceeded == ["1 NEFF build > max_neff_builds=0"]
    assert [e.neff_cache for e in caught.value.events] == ["compiled"]


def test_a_running_recorder_is_resolved_at_the_blocks_exit(on_neuron):
    """The budget takes the recorder's safe point: a pending build is resolved, not guessed."""
    fake, fn = on_neuron
    with nk.CompileRecorder() as rec:
        fake.plan("disk_hit")
        with compile_budget(max_neff_builds=0, recorder=rec) as budget:
            fn(torch.ones(4))
            assert budget.events[0].neff_cache is None   # still pending inside the block
        assert budget.ok and budget.events[0].neff_cache == "disk_hit"
        fake.plan("compiled")
        with pytest.raises(CompileBudgetExceeded, match="1 NEFF build > max_neff_builds=0"):
            with compile_budget(max_neff_builds=0, recorder=rec):
                fn(torch.ones(6))


def test_a_neff_of_unknown_state_counts_as_a_build_and_says_so(no_neuron):
    rec = nk.CompileRecorder(device="cpu", backend="eager")
    with pytest.raises(CompileBudgetExceeded) as caught:
        with compile_budget(max_neff_builds=0, recorder=rec) as budget:
            # a graph whose NEFF build no safe point could resolve (its table was reset)
            rec.record(kind="first", function="forward", metrics={"neuron_graphs": [7, 0, 1]})
    message = str(caught.value)
    assert "1 NEFF build > max_neff_builds=0 (1 of unknown NEFF state at the block's exit, " \
           "counted as builds)" in message
    assert "forward (first): NEFF state unknown at the block's exit, counted as a build" in message
    assert budget.neff_builds == budget.neff_unknown == 1


def test_on_cpu_there_are_no_neff_builds_and_the_report_says_why(no_neuron, compiler_reset):
    fn = torch.compile(add_one, backend="eager", dynamic=False)
    with compile_budget(max_neff_builds=0) as budget:
        fn(torch.ones(2))
        fn(torch.ones(3))
    assert budget.ok and budget.graphs == 2 and budget.neff_builds == 0
    assert budget.report().endswith("; no NEFF builds: not on Neuron")


def test_a_cpu_graph_on_a_neuron_host_has_no_neff(on_neuron):
    fn = torch.compile(add_one, backend="eager", dynamic=False)
    with compile_budget(max_neff_builds=0) as budget:
        fn(torch.ones(2))
    assert budget.ok and "no NEFF builds: no graph compiled for Neuron" in budget.report()


@pytest.mark.parametrize("value, error, words", [
    (-1, ValueError, "max_neff_builds must be >= 0, got -1"),
    ("0", TypeError, "max_neff_builds must be a non-negative int or None, got '0'"),
    (True, TypeError, "max_neff_builds must be a non-negative int or None, got True")])
def test_a_bad_max_neff_builds_is_refused(value, error, words):
    with pytest.raises(error, match=words):
        CompileBudget(max_neff_builds=value)
