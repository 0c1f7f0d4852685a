"""Eager-op kernels are NEFFs neuronx-cc builds too (``core/compilation/CompilationCache.cpp:
556-572``): ``max_neff_builds``, ``serve_plan`` and the warm-up manifest count them, named apart
from the graphs' NEFFs. Events are built here as the Neuron source records them
(``sources/neuron.py``): a ``kernels`` event per safe point, ``metrics["compiled"]`` built and
``metrics["loaded"]`` read from the cache; in sync mode ``"compiled"`` is an upper bound."""
from __future__ import annotations

import pytest

import neuronkit as nk
from neuronkit.apps.budget import CompileBudgetExceeded, compile_budget
from neuronkit.events.event import CompileEvent
from neuronkit.examples import serve_plan
from neuronkit.workloads.neff_builds import neff_counts, neff_lines
from neuronkit.workloads.warm_up import _step_entry

OPS = {"aten::add.Tensor": 2, "aten::mul.Tensor": 1}


def kernels(compiled: int, loaded: int, **metrics) -> dict:
    """The fields of a ``kernels`` event on Neuron."""
    return dict(kind="kernels", function="eager kernels", kernels=compiled + loaded, ops=OPS,
                duration_s=4.0 * compiled, metrics={"compiled": compiled, "loaded": loaded,
                                                    **metrics})


def graph(state: str, seconds: float = 0.0) -> dict:
    return dict(kind="first", function="forward", backend="neuron", neff_cache=state,
                neff_compile_s=seconds, metrics={"neuron_graphs": [0, 0, 1]})


def test_counts_name_graph_and_kernel_builds_apart():
    events = [CompileEvent(**graph("compiled", 90.0)), CompileEvent(**kernels(3, 2)),
              CompileEvent(**graph("disk_hit")), CompileEvent(**kernels(1, 0))]
    n = neff_counts(events)
    assert (n.builds, n.graph_builds, n.kernel_builds, n.kernels_loaded) == (5, 1, 4, 2)
    assert n.builds_text() == "5 NEFF builds: 1 graph, 4 eager-op kernels"
    assert neff_counts(events[:1]).builds_text() == "1 NEFF build"   # no kernel events: as before


def test_only_kernels_built_breaks_the_budget_and_names_them(no_neuron):
    rec = nk.CompileRecorder(device="neuron", backend="neuron")
    with pytest.raises(CompileBudgetExceeded) as caught:
        with compile_budget(max_neff_builds=0, recorder=rec) as budget:
            rec.record(**kernels(3, 2))
    message = str(caught.value)
    assert caught.value.exceeded == ["3 NEFF builds > max_neff_builds=0 (0 graphs, 3 eager-op "
                                     "kernels)"]
    assert ("eager kernels (kernels): 3 eager-op kernels built by neuronx-cc "
            "(aten::add.Tensor x2, aten::mul.Tensor x1), 2 loaded from the NEFF cache") in message
    assert "3 NEFF builds: 0 graphs, 3 eager-op kernels; 0 graph NEFFs and 2 eager-op kernels " \
           "loaded from the NEFF cache" in message
    assert budget.neff_builds == 3 and [e.kind for e in caught.value.events] == ["kernels"]


def test_kernels_all_loaded_from_the_cache_hold_the_budget(no_neuron):
    rec = nk.CompileRecorder(device="neuron", backend="neuron")
    with compile_budget(max_neff_builds=0, recorder=rec) as budget:
        rec.record(**kernels(0, 5))
    assert budget.ok and budget.neff_builds == 0
    assert budget.report().endswith("0 NEFF builds: 0 graphs, 0 eager-op kernels; 0 graph NEFFs "
                                    "and 5 eager-op kernels loaded from the NEFF cache")


def test_sync_mode_counts_are_an_upper_bound_and_say_so(no_neuron):
    rec = nk.CompileRecorder(device="neuron", backend="neuron")
    with pytest.raises(CompileBudgetExceeded) as caught:
        with compile_budget(max_neff_builds=1, recorder=rec):
            rec.record(**graph("compiled", 30.0))
            rec.record(**kernels(2, 1, sync_mode=True))
    assert caught.value.exceeded == ["3 NEFF builds > max_neff_builds=1 (1 graph, 2 eager-op "
                                     "kernels (sync mode: at most))"]
    assert ("eager kernels (kernels): sync mode: at most 2 eager-op kernels built by neuronx-cc"
            in str(caught.value))


def test_a_forecast_builds_nothing_and_an_old_log_counts_every_kernel():
    forecast = CompileEvent(kind="kernels", function="eager kernels", kernels=7, forecast=True)
    old = CompileEvent(kind="kernels", function="eager kernels", kernels=4, duration_s=2.0)
    assert neff_counts([forecast]).builds == 0 and neff_lines([forecast]) == ""
    assert neff_counts([old]).kernel_builds == 4    # built and loaded not told apart: builds


def test_serve_plan_exits_exceeded_when_only_kernels_were_built(capsys):
    events = [CompileEvent(**graph("disk_hit")), CompileEvent(**kernels(2, 1))]
    assert serve_plan._verdict(events, "neuron:0") == serve_plan.EXIT_EXCEEDED
    out = capsys.readouterr().out
    assert ("NEFF builds: 2: 0 graph(s), 2 eager-op kernel(s); loaded from the NEFF cache: "
            "1 graph(s) (1 from disk, 0 already in memory), 1 eager-op kernel(s)") in out
    assert ("budget max_neff_builds=0: EXCEEDED, 2 NEFF build(s) in serving (0 graph(s), "
            "2 eager-op kernel(s)):") in out
    assert "eager kernels (kernels): 2 eager-op kernels built by neuronx-cc" in out


def test_serve_plan_holds_when_every_kernel_loaded(capsys):
    events = [CompileEvent(**graph("disk_hit")), CompileEvent(**kernels(0, 3))]
    assert serve_plan._verdict(events, "neuron:0") == serve_plan.EXIT_HELD
    assert "budget max_neff_builds=0: held" in capsys.readouterr().out


def test_the_warmup_manifest_entry_has_the_kernel_builds():
    events = [CompileEvent(**graph("compiled", 9.0)), CompileEvent(**kernels(3, 2)),
              CompileEvent(**kernels(1, 1, sync_mode=True))]
    entry = _step_entry(1, 8, 40, events, 1.0)
    assert (entry["kernels"], entry["kernel_builds"], entry["kernel_builds_at_most"]) == (7, 4, True)
    entry = _step_entry(1, 8, 40, events[:2], 1.0)
    assert (entry["kernel_builds"], entry["kernel_builds_at_most"]) == (3, False)
