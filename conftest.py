"""Run-wide test set-up and report: the file order for xdist, a bytecode warm-up in a new venv, and
how much of the test time the notebooks took (CI prints it)."""
from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

_seconds: dict[str, float] = {"notebooks": 0.0, "tests": 0.0}
_files: dict[str, set[str]] = {"notebooks": set(), "tests": set()}
_started = time.monotonic()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    """Add up each test's setup, call and teardown time by where it lives (works under xdist:
    the reports reach the controlling process)."""
    part = "notebooks" if report.nodeid.startswith("notebooks/") else "tests"
    _seconds[part] += report.duration
    _files[part].add(report.nodeid.split("::")[0])


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    total = sum(_seconds.values())
    if not total:
        return
    wall = time.monotonic() - _started
    notebooks = _seconds["notebooks"]
    terminalreporter.write_line(
        f"test time: notebooks {notebooks:.0f} s ({len(_files['notebooks'])} notebooks, "
        f"{notebooks / total:.0%}), other tests {_seconds['tests']:.0f} s "
        f"({len(_files['tests'])} files); {total:.0f} s summed over workers, {wall:.0f} s wall")


def pytest_configure(config: pytest.Config) -> None:
    """xdist's ``--dist loadscope`` runs the files in the order below (its own order, by number
    of tests, would leave a long file for the end): the same as ``--no-loadscope-reorder``."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False


# What nearly every worker, notebook kernel and torchrun rank imports, in two groups byte-compiled
# side by side: the torch side, and the Jupyter side without torch (a module both import, such as
# numpy, may be compiled by both).
WARM_IMPORTS = (
    "torch._dynamo, torch._functorch.aot_autograd, transformers.trainer, transformers.generation.utils, "
    "transformers.models.qwen3.modeling_qwen3, transformers.models.mistral.modeling_mistral, datasets",
    "matplotlib.pyplot, ipywidgets, ipykernel.kernelapp, nbformat, nbconvert, nbval, playwright.sync_api, "
    "jupyter_server.serverapp",
)


def _bytecode_missing() -> bool:
    """True in a new environment: transformers' trainer (imported by most tests) has no .pyc yet."""
    spec = importlib.util.find_spec("transformers")
    if sys.dont_write_bytecode or spec is None or not spec.submodule_search_locations:
        return False
    source = Path(list(spec.submodule_search_locations)[0]) / "trainer.py"
    return source.exists() and not Path(importlib.util.cache_from_source(str(source))).exists()


def pytest_sessionstart(session: pytest.Session) -> None:
    """In a new environment, import what the test processes share once, before xdist starts its
    workers: otherwise each worker, kernel and rank that starts before the .pyc files exist
    compiles torch and transformers again (measured here: a fresh venv took 140 s more CPU than a
    warm one; with this warm-up, 53 s less than without it)."""
    if hasattr(session.config, "workerinput") or not _bytecode_missing():
        return
    env = {**os.environ, "MPLBACKEND": "Agg"}
    warmers = [subprocess.Popen([sys.executable, "-c", f"import {group}"], env=env) for group in WARM_IMPORTS]
    for warmer in warmers:
        warmer.wait()


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The longest test files first, so the xdist workers (``--dist loadscope``: a file at a
    time) end together: the notebooks, then the files with browser tests, then files by their
    number of slow tests. A file's tests stay together, in their order."""
    browser: set[str] = set()
    slow: dict[str, int] = {}
    for item in items:
        path = item.nodeid.split("::")[0]
        slow[path] = slow.get(path, 0) + (item.get_closest_marker("slow") is not None)
        if item.get_closest_marker("browser"):
            browser.add(path)

    def weight(item: pytest.Item) -> tuple[int, int]:
        path = item.nodeid.split("::")[0]
        if path.startswith("notebooks/"):
            return (0, 0)
        return (1 if path in browser else 2, -slow[path])

    items.sort(key=weight)  # stable: each file's tests keep their order
