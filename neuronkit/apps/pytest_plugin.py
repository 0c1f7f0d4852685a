"""Compile budgets in pytest: a marker, a fixture, and a folder for each test's compile log.

    @pytest.mark.compile_budget(max_graphs=2, max_recompiles=0)
    def test_decode(model):
        ...                                   # fails when it compiles more

    @pytest.mark.compile_budget(max_neff_builds=0)   # on Neuron: every NEFF from the cache
    def test_serving_from_a_warm_cache(model):
        ...

    def test_steps(compile_budget):
        with compile_budget(max_recompiles=0) as budget:
            ...

``pytest --neuronkit-log-dir DIR`` writes the log of each budgeted test (and of each fixture
budget) to ``DIR/<test id>.jsonl``. Installed as a ``pytest11`` entry point, the plugin does
nothing for a test with neither the marker nor the fixture, and imports torch only for them.
"""
from __future__ import annotations

import hashlib
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Generator

import pytest

if TYPE_CHECKING:  # pragma: no cover
    from neuronkit.apps.budget import CompileBudget

__all__ = ["log_file_name"]

MARKER = "compile_budget"
_LOG_PATHS = pytest.StashKey[list[Path]]()
_MAX_NAME = 150  # characters of a log file's name, before ".jsonl"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("neuronkit", "neuronkit compile budgets")
    group.addoption("--neuronkit-log-dir", metavar="DIR", default=None,
                    help="write the compile log of each budgeted test to DIR/<test id>.jsonl")


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers", f"{MARKER}(max_graphs=None, max_recompiles=None, max_compile_s=None, *, "
        "max_graph_breaks=None, max_failures=None, max_neff_builds=None): fail the test when it "
        "compiles more (torch.compile graphs, recompiles, compile seconds, NEFFs neuronx-cc "
        "built on Neuron) than allowed")


def log_file_name(nodeid: str) -> str:
    """A file name for a test id: unsafe characters replaced, long ids cut and told apart by a
    hash (``tests/test_x.py::test_a[2-3]`` -> ``tests_test_x.py__test_a_2-3_.jsonl``)."""
    name = re.sub(r"[^A-Za-z0-9._-]", "_", nodeid).strip(".") or "test"
    if len(name) > _MAX_NAME:
        digest = hashlib.sha1(nodeid.encode("utf-8")).hexdigest()[:10]
        name = f"{name[:_MAX_NAME - 11]}-{digest}"
    return name + ".jsonl"


def _log_dir(config: pytest.Config) -> Path | None:
    folder = config.getoption("--neuronkit-log-dir", default=None)
    if not folder:
        return None
    return Path(config.invocation_params.dir, folder)


def _next_log_path(item: pytest.Item) -> Path | None:
    """``DIR/<test id>.jsonl`` for a test's first budget, ``<test id>-2.jsonl`` and on after."""
    folder = _log_dir(item.config)
    if folder is None:
        return None
    taken = item.stash.setdefault(_LOG_PATHS, [])
    name = log_file_name(item.nodeid)
    path = folder / (name if not taken else f"{name[:-len('.jsonl')]}-{len(taken) + 1}.jsonl")
    taken.append(path)
    return path


def _budget(item: pytest.Item, *args: Any, **kwargs: Any) -> CompileBudget:
    from neuronkit.apps.budget import CompileBudget

    if kwargs.get("log_path") is None:
        kwargs["log_path"] = _next_log_path(item) if kwargs.get("recorder") is None else None
    return CompileBudget(*args, **kwargs)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Generator[None, Any, Any]:
    """A test carrying the marker runs inside its budget (fixtures set up outside it)."""
    marker = item.get_closest_marker(MARKER)
    if marker is None:
        return (yield)
    budget = _budget(item, *marker.args, **marker.kwargs)
    budget.__enter__()
    try:
        result = yield
    except BaseException as exc:
        budget.__exit__(type(exc), exc, exc.__traceback__)
        raise
    budget.__exit__(None, None, None)  # over budget: CompileBudgetExceeded fails the test
    return result


@pytest.fixture(name="compile_budget")
def compile_budget_fixture(request: pytest.FixtureRequest) -> Callable[..., CompileBudget]:
    """``with compile_budget(max_graphs=1) as budget:`` inside a test: ``nk.compile_budget``,
    its log kept under ``--neuronkit-log-dir`` when given."""
    item = request.node

    def make(*args: Any, **kwargs: Any) -> CompileBudget:
        return _budget(item, *args, **kwargs)
    return make
