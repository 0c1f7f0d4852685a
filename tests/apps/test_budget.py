"""nk.compile_budget: each limit over and under by one, the report, nesting, exceptions, arguments."""
from __future__ import annotations

import contextlib
import math
import subprocess
import sys

import pytest
import torch

import neuronkit as nk
from neuronkit.apps.budget import CompileBudget, CompileBudgetExceeded, compile_budget


def double_plus_one(x):
    return x * 2 + 1


@pytest.fixture
def compiled(compiler_reset):
    """A tiny function compiled with ``dynamic=False``: every new shape is a new graph."""
    return torch.compile(double_plus_one, backend="eager", dynamic=False)


def run_shapes(fn, *lengths: int) -> None:
    for n in lengths:
        fn(torch.ones(n))


def add(rec: nk.CompileRecorder, kind: str, function: str = "step", duration_s: float = 0.1) -> None:
    """An event as a source would hand it (no compile needed for the counts)."""
    rec.record(kind=kind, function=function, location="model.py:1", duration_s=duration_s)


# -- real compiles: graphs and recompiles ----------------------------------------------------------

@pytest.mark.parametrize("limit, fails", [(1, True), (2, False), (3, False)])
def test_max_graphs_over_and_under_by_one(compiled, limit, fails):
    if fails:
        with pytest.raises(CompileBudgetExceeded, match=rf"2 graphs > max_graphs={limit}"):
            with compile_budget(max_graphs=limit):
                run_shapes(compiled, 2, 3)
    else:
        with compile_budget(max_graphs=limit) as budget:
            run_shapes(compiled, 2, 3)
        assert budget.ok and budget.graphs == 2 and budget.recompiles == 1


@pytest.mark.parametrize("limit, fails", [(0, True), (1, False), (2, False)])
def test_max_recompiles_over_and_under_by_one(compiled, limit, fails):
    budget = compile_budget(max_recompiles=limit)
    if fails:
        with pytest.raises(CompileBudgetExceeded, match=r"1 recompile > max_recompiles=0"):
            with budget:
                run_shapes(compiled, 2, 3, 2)
    else:
        with budget:
            run_shapes(compiled, 2, 3, 2)
    assert budget.recompiles == 1 and budget.ok is not fails


def test_the_report_names_the_events_over_budget(compiled):
    with pytest.raises(CompileBudgetExceeded) as caught:
        with compile_budget(max_graphs=1, max_recompiles=0):
            run_shapes(compiled, 2, 3)
    text = str(caught.value)
    assert "2 graphs > max_graphs=1" in text and "1 recompile > max_recompiles=0" in text
    assert "double_plus_one" in text and "recompile" in text and "2 -> 3" in text
    assert caught.value.exceeded == ["2 graphs > max_graphs=1", "1 recompile > max_recompiles=0"]
    assert [e.kind for e in caught.value.events] == ["first", "recompile"]
    assert isinstance(caught.value, AssertionError)


def test_a_block_within_budget_keeps_its_log_and_report(compiled, tmp_path):
    path = tmp_path / "budget.jsonl"
    with compile_budget(max_graphs=2, log_path=path) as budget:
        run_shapes(compiled, 2, 3)
    assert len(budget.log) == 2 and budget.log.path == path
    assert [e.kind for e in nk.CompileLog.load(path).events] == ["first", "recompile"]
    assert budget.report().startswith("compile budget met: 2 graphs, 1 recompile")


def test_nested_budgets_each_count_their_own_block(compiled):
    with pytest.raises(CompileBudgetExceeded, match="3 graphs > max_graphs=2") as outer_error:
        with compile_budget(max_graphs=2) as outer:
            run_shapes(compiled, 2)
            with pytest.raises(CompileBudgetExceeded, match="2 graphs > max_graphs=1"):
                with compile_budget(max_graphs=1) as inner:
                    run_shapes(compiled, 3, 4)
    assert inner.graphs == 2 and outer.graphs == 3
    assert [e.kind for e in outer_error.value.events] == ["first", "recompile", "recompile"]


def test_an_inner_failure_is_not_masked_by_the_outer_budget(compiled):
    with pytest.raises(CompileBudgetExceeded, match="2 graphs > max_graphs=0") as caught:
        with compile_budget(max_graphs=1):
            with compile_budget(max_graphs=0):
                run_shapes(compiled, 2, 3)
    assert caught.value.__notes__ == ["compile budget exceeded too: 2 graphs > max_graphs=1"]


def test_an_exception_in_the_block_is_not_masked(compiled):
    with pytest.raises(ZeroDivisionError) as caught:
        with compile_budget(max_graphs=0) as budget:
            run_shapes(compiled, 2)
            raise ZeroDivisionError("the block's own error")
    assert budget.graphs == 1
    assert caught.value.__notes__ == ["compile budget exceeded too: 1 graph > max_graphs=0"]


def test_an_exception_within_budget_gets_no_note(compiled):
    with pytest.raises(KeyError) as caught:
        with compile_budget(max_graphs=1):
            run_shapes(compiled, 2)
            raise KeyError("x")
    assert not getattr(caught.value, "__notes__", None)


def test_as_a_decorator_each_call_has_its_own_budget(compiled):
    @compile_budget(max_graphs=1)
    def step(n: int) -> None:
        run_shapes(compiled, n)

    step(2)
    step(2)  # a seen shape: nothing compiles
    step(3)  # one new graph in this call: still within this call's budget
    with pytest.raises(CompileBudgetExceeded):
        compile_budget(max_graphs=1)(lambda: run_shapes(compiled, 4, 5))()


# -- a given recorder, synthetic events ----------------------------------------------------------

def test_a_given_recorder_counts_only_the_block():
    rec = nk.CompileRecorder()
    with rec:
        add(rec, "first")
        with compile_budget(max_graphs=1, recorder=rec) as budget:
            add(rec, "recompile")
        assert rec.active  # left running, as found
        add(rec, "recompile")
    assert budget.graphs == 1 and len(budget.events) == 1 and len(rec.events) == 3


def test_a_given_stopped_recorder_is_started_and_stopped(tmp_path):
    rec = nk.CompileRecorder()
    with compile_budget(recorder=rec, log_path=tmp_path / "block.jsonl") as budget:
        assert rec.active
        add(rec, "first")
    assert not rec.active and budget.graphs == 1
    assert len(nk.CompileLog.load(tmp_path / "block.jsonl")) == 1


@pytest.mark.parametrize("limit, fails", [(0.74, True), (0.75, False), (0.76, False)])
def test_max_compile_s_over_and_under(limit, fails):
    rec = nk.CompileRecorder()
    budget = compile_budget(max_compile_s=limit, recorder=rec)
    try:
        with budget:
            add(rec, "first", duration_s=0.25)
            add(rec, "recompile", duration_s=0.5)
    except CompileBudgetExceeded as exc:
        assert fails and f"0.75 compile s > max_compile_s={limit:g}" in str(exc)
    else:
        assert not fails
    assert budget.compile_s == 0.75


@pytest.mark.parametrize("limit, fails", [(0, True), (1, False)])
def test_a_limit_hit_counts_as_a_graph_and_a_recompile(limit, fails):
    rec = nk.CompileRecorder()
    for name in ("max_graphs", "max_recompiles"):
        budget = compile_budget(recorder=rec, **{name: limit})
        with pytest.raises(CompileBudgetExceeded) if fails else contextlib.nullcontext():
            with budget:
                add(rec, "limit_hit", function="decode")
        assert budget.graphs == 0 and budget.counts()[name] == 1
    if fails:
        assert "limit_hit" in budget.report() and "decode" in budget.report()


@pytest.mark.parametrize("kind, name", [("graph_break", "max_graph_breaks"),
                                        ("failed", "max_failures")])
def test_breaks_and_failures_are_budgeted_only_when_asked(kind, name):
    rec = nk.CompileRecorder()
    with compile_budget(max_graphs=0, max_recompiles=0, recorder=rec) as budget:
        add(rec, kind)
        add(rec, kind)
    assert budget.counts()[name] == 2
    with compile_budget(recorder=rec, **{name: 2}):
        add(rec, kind)
        add(rec, kind)
    with pytest.raises(CompileBudgetExceeded, match=rf"2 .* > {name}=1"):
        with compile_budget(recorder=rec, **{name: 1}):
            add(rec, kind)
            add(rec, kind)


# -- arguments ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("kwargs, error, words", [
    ({"max_graphs": -1}, ValueError, "max_graphs must be >= 0"),
    ({"max_recompiles": 1.5}, TypeError, "max_recompiles must be a non-negative int"),
    ({"max_graphs": True}, TypeError, "max_graphs must be a non-negative int"),
    ({"max_graphs": "2"}, TypeError, "max_graphs"),
    ({"max_graph_breaks": -2}, ValueError, "max_graph_breaks"),
    ({"max_failures": False}, TypeError, "max_failures"),
    ({"max_compile_s": -0.5}, ValueError, "max_compile_s must be a finite number >= 0"),
    ({"max_compile_s": math.nan}, ValueError, "max_compile_s"),
    ({"max_compile_s": math.inf}, ValueError, "max_compile_s"),
    ({"max_compile_s": True}, TypeError, "max_compile_s"),
    ({"max_compile_s": "1"}, TypeError, "max_compile_s"),
    ({"recorder": object()}, TypeError, "recorder must be a CompileRecorder"),
    ({"log_path": 3}, TypeError, "log_path must be a path"),
])
def test_bad_arguments_are_refused_clearly(kwargs, error, words):
    with pytest.raises(error, match=words):
        compile_budget(**kwargs)


def test_no_limits_and_zero_limits_are_valid():
    assert CompileBudget().limits == dict.fromkeys(CompileBudget().limits)
    assert compile_budget(0, 0, 0).limits["max_compile_s"] == 0.0


def test_a_budget_object_is_used_for_one_block_at_a_time():
    rec = nk.CompileRecorder()
    budget = compile_budget(recorder=rec)
    with budget:
        with pytest.raises(RuntimeError, match="already in use"):
            budget.__enter__()


def test_the_facade_exports_and_import_stays_light():
    assert nk.compile_budget is compile_budget and nk.CompileBudgetExceeded is CompileBudgetExceeded
    code = ("import sys, neuronkit, neuronkit.apps.pytest_plugin, neuronkit.apps.magic; "
            "assert callable(neuronkit.load_ipython_extension); "
            "assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)


def test_a_forward_transformers_never_compiled_is_no_refused_graph():
    """``eager_fallback`` past the recompile limit is a graph torch refused; one that says the
    forward was never compiled (``metrics["not_compiled"]``: llama4) asked for no graph."""
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.workloads.generate_eager import NOT_COMPILED

    never = CompileEvent(function="M.forward[decode]", kind="eager_fallback", input_shapes={"x": [1, 1]},
                         metrics={NOT_COMPILED: {"cause": "get_compiled_call", "reason": "r"}})
    past_limit = CompileEvent(function="M.forward[decode]", kind="eager_fallback",
                              input_shapes={"x": [1, 2]})
    budget = CompileBudget(max_graphs=0)
    budget.log = CompileLog([never])
    assert budget.counts()["max_graphs"] == 0
    budget.log = CompileLog([never, past_limit])
    assert budget.counts()["max_graphs"] == 1
