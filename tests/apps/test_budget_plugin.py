"""The pytest plugin: the compile_budget marker and fixture, and --neuronkit-log-dir."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from neuronkit.apps.pytest_plugin import log_file_name

pytest_plugins = ["pytester"]

BUDGETED_TESTS = '''
import pytest
import torch


def double(x):
    return x * 2


def compile_two_shapes():
    torch.compiler.reset()
    fn = torch.compile(double, backend="eager", dynamic=False)
    fn(torch.ones(2))
    fn(torch.ones(3))


@pytest.mark.compile_budget(max_graphs=2, max_recompiles=1)
def test_marker_within_budget():
    compile_two_shapes()


@pytest.mark.compile_budget(max_graphs=1)
def test_marker_over_budget():
    compile_two_shapes()


@pytest.mark.compile_budget(max_recompiles=0)
def test_marker_own_failure_is_not_masked():
    compile_two_shapes()
    raise KeyError("the test's own error")


def test_fixture_within_and_over_budget(compile_budget):
    with compile_budget(max_graphs=2) as budget:
        compile_two_shapes()
    assert budget.graphs == 2
    with compile_budget(max_recompiles=0):
        compile_two_shapes()


def test_not_budgeted():
    compile_two_shapes()


@pytest.mark.compile_budget(max_graphs=-1)
def test_marker_bad_argument():
    pass
'''


def run_budgeted(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makepyfile(test_budgeted=BUDGETED_TESTS)
    return pytester.runpytest_subprocess("-p", "no:nbval", "-p", "no:cacheprovider", "-o", "addopts=",
                                         "-o", "log_level=INFO", *args)


def test_marker_and_fixture_outcomes_and_log_dir(pytester: pytest.Pytester):
    result = run_budgeted(pytester, "--neuronkit-log-dir", "logs", "-rf")
    result.assert_outcomes(passed=2, failed=4)
    out = result.stdout.str()
    result.stdout.fnmatch_lines([  # the errors, in test order
        "E *CompileBudgetExceeded: compile budget exceeded: 2 graphs > max_graphs=1",
        "E *KeyError: \"the test's own error\"",
        "E *compile budget exceeded too: 1 recompile > max_recompiles=0",
        "E *CompileBudgetExceeded: compile budget exceeded: 1 recompile > max_recompiles=0",
        "E *ValueError: max_graphs must be >= 0, got -1",
        "FAILED test_budgeted.py::test_marker_over_budget - *",
        "FAILED test_budgeted.py::test_marker_own_failure_is_not_masked - KeyError*",
        "FAILED test_budgeted.py::test_fixture_within_and_over_budget - *",
        "FAILED test_budgeted.py::test_marker_bad_argument - ValueError*",
    ])
    assert "double" in out and "recompile" in out  # the report's table of events
    logs = pytester.path / "logs"
    names = sorted(p.name for p in logs.iterdir())
    assert names == sorted([
        "test_budgeted.py__test_marker_within_budget.jsonl",
        "test_budgeted.py__test_marker_over_budget.jsonl",
        "test_budgeted.py__test_marker_own_failure_is_not_masked.jsonl",
        "test_budgeted.py__test_fixture_within_and_over_budget.jsonl",
        "test_budgeted.py__test_fixture_within_and_over_budget-2.jsonl",
    ])
    lines = (logs / "test_budgeted.py__test_marker_over_budget.jsonl").read_text().splitlines()
    kinds = [json.loads(line).get("kind") for line in lines[1:] if "kind" in json.loads(line)]
    assert json.loads(lines[0])["format"] == "neuronkit-compile-log" and kinds == ["first", "recompile"]


def test_without_the_log_dir_nothing_is_written(pytester: pytest.Pytester):
    result = run_budgeted(pytester, "-k", "marker_within or not_budgeted")
    result.assert_outcomes(passed=2, deselected=4)
    assert not list(pytester.path.rglob("*.jsonl"))


def test_the_marker_is_registered(pytester: pytest.Pytester):
    pytester.makepyfile(test_plain="def test_plain():\n    pass\n")
    result = pytester.runpytest_subprocess("-p", "no:nbval",
                                           "-o", "addopts=", "--markers")
    result.stdout.fnmatch_lines(["@pytest.mark.compile_budget(max_graphs=None*max_neff_builds=None)*"])


NEFF_TESTS = '''
import sys

import pytest
import torch

sys.path.insert(0, TESTS_DIR)
from neuron_fake import installed_fake


def add_one(x):
    return x + 1


@pytest.fixture
def neuron_fn():
    with installed_fake() as fake:
        yield fake, torch.compile(add_one, backend="neuron", dynamic=False)


@pytest.mark.compile_budget(max_neff_builds=0)
def test_cpu_graphs_build_no_neff():
    torch.compiler.reset()
    torch.compile(add_one, backend="eager", dynamic=False)(torch.ones(2))


@pytest.mark.compile_budget(max_neff_builds=0)
def test_neffs_from_the_cache(neuron_fn):
    fake, fn = neuron_fn
    fake.plan("disk_hit")
    fn(torch.ones(2))


@pytest.mark.compile_budget(max_neff_builds=0)
def test_a_neff_built(neuron_fn):
    fake, fn = neuron_fn
    fake.plan("compiled")
    fn(torch.ones(3))
'''


def test_the_marker_takes_max_neff_builds(pytester: pytest.Pytester):
    """Neuron here is the contract fake (``tests/neuron_fake``), installed by a fixture."""
    tests_dir = str(Path(__file__).resolve().parents[1])
    pytester.makepyfile(test_neff=NEFF_TESTS.replace("TESTS_DIR", repr(tests_dir)))
    result = pytester.runpytest_subprocess("-p", "no:nbval", "-p", "no:cacheprovider",
                                           "-o", "addopts=", "-o", "log_level=INFO", "-rf")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines([
        "E *CompileBudgetExceeded: compile budget exceeded: 1 NEFF build > max_neff_builds=0",
        "*add_one (first): NEFF built by neuronx-cc in 2.0 s*",
        "FAILED test_neff.py::test_a_neff_built - *"])


def test_the_plugin_is_installed_as_an_entry_point():
    from importlib.metadata import entry_points

    plugins = {ep.name: ep.value for ep in entry_points(group="pytest11")}
    assert plugins.get("neuronkit") == "neuronkit.apps.pytest_plugin"


@pytest.mark.parametrize("nodeid, name", [
    ("tests/test_x.py::test_a", "tests_test_x.py__test_a.jsonl"),
    ("tests/test_x.py::TestC::test_b[2-3]", "tests_test_x.py__TestC__test_b_2-3_.jsonl"),
    ("../up/t.py::test_c[a b/c]", "_up_t.py__test_c_a_b_c_.jsonl"),
])
def test_log_file_names_are_safe(nodeid, name):
    assert log_file_name(nodeid) == name


def test_long_test_ids_are_cut_and_told_apart():
    a, b = log_file_name("t.py::test_x[" + "a" * 300 + "]"), log_file_name("t.py::test_x[" + "a" * 299 + "b]")
    assert a != b and len(a) <= 160 and a.endswith(".jsonl")
