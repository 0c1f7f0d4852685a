"""Run-wide test set-up and report: the file order for xdist, a bytecode warm-up in a new venv, the
garbage collector of the test processes and notebook kernels, nbval's kernel start with its
stderr kept, and how much of the test time the notebooks took (CI prints it)."""
from __future__ import annotations

import atexit
import gc
import importlib.util
import os
import shutil
import subprocess
import sys
import tempfile
import time
import warnings
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
    of tests, would leave a long file for the end): the same as ``--no-loadscope-reorder``. And
    nbval starts its kernels through :func:`_start_kernel_keeping_stderr`."""
    if hasattr(config.option, "loadscopereorder"):
        config.option.loadscopereorder = False
    kernel = sys.modules.get("nbval.kernel")
    if kernel is not None and not getattr(kernel.start_new_kernel, "keeps_stderr", False):
        kernel.start_new_kernel = _start_kernel_keeping_stderr(kernel.start_new_kernel)


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
    """Before xdist starts its workers (they inherit the environment): a folder for the run (the
    kernels' IPython folder and stderr files), and in a new environment the bytecode warm-up,
    which imports what the test processes share once: otherwise each worker, kernel and rank that
    starts before the .pyc files exist compiles torch and transformers again (measured here: a
    fresh venv took 140 s more CPU than a warm one; with this warm-up, 53 s less than without)."""
    if hasattr(session.config, "workerinput"):
        return
    run_dir = Path(tempfile.mkdtemp(prefix="neuronkit-test-run-"))   # removed at exit
    atexit.register(shutil.rmtree, run_dir, ignore_errors=True)
    os.environ["NEURONKIT_TEST_RUN_DIR"] = str(run_dir)            # the kernels' stderr files
    os.environ["IPYTHONDIR"] = str(_kernel_ipython_dir(run_dir))
    if not _bytecode_missing():
        return
    env = {**os.environ, "MPLBACKEND": "Agg"}
    warmers = [subprocess.Popen([sys.executable, "-c", f"import {group}"], env=env) for group in WARM_IMPORTS]
    for warmer in warmers:
        warmer.wait()


# The garbage collector. A test process holds torch and transformers (millions of objects) and what
# its compiles leave behind, and each full collection scanned them all: 12 s of a 64 s run of three
# test files here. The test processes and the notebook kernels freeze what exists once the
# libraries are imported and collect less often; an explicit gc.collect() (Trainer's, a test's)
# still collects everything else. Measured on those three files: 12 s -> 4 s of collection.
GC_THRESHOLDS = (50_000, 20, 100)


def pytest_collection_finish(session: pytest.Session) -> None:
    """In each test process, once the test modules (torch, transformers, neuronkit) are imported."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(*GC_THRESHOLDS)


_KERNEL_STARTUP = f"""\
# Written by neuronkit's conftest.py for the notebook kernels of one test run (not for users): the
# garbage collector as in the test processes, frozen after the first cell that imported torch.
def _neuronkit_test_gc():
    import gc
    import sys

    gc.set_threshold{GC_THRESHOLDS}
    shell = get_ipython()

    def freeze(result):
        if "torch" in sys.modules:
            gc.collect()
            gc.freeze()
            shell.events.unregister("post_run_cell", freeze)

    shell.events.register("post_run_cell", freeze)


_neuronkit_test_gc()
del _neuronkit_test_gc
"""


def _kernel_ipython_dir(run_dir: Path) -> Path:
    """A private IPython folder for the run's kernels: the startup file above, history in memory
    (no sqlite file shared by kernels that start together), the user's own ~/.ipython untouched."""
    profile = run_dir / "ipython" / "profile_default"
    (profile / "startup").mkdir(parents=True)   # IPython makes the rest, safely when kernels race
    (profile / "startup" / "00-neuronkit-test-gc.py").write_text(_KERNEL_STARTUP, encoding="utf-8")
    (profile / "ipython_kernel_config.py").write_text(
        'c.HistoryManager.hist_file = ":memory:"\n', encoding="utf-8")
    return profile.parent


def _start_kernel_keeping_stderr(start):
    """nbval's ``start_new_kernel``, with the kernel's stderr kept in a file (nbval sends it to
    /dev/null) and told when the kernel dies while starting. Such a death is retried once, with a
    warning that shows the stderr: a kernel can lose the race for the ports its manager chose and
    freed before it started (jupyter/jupyter_client#154), which the second start does not repeat."""
    def start_new_kernel(startup_timeout=60, kernel_name="python", **kwargs):
        for attempt in (1, 2):
            fd, name = tempfile.mkstemp(prefix="kernel-", suffix=".stderr",
                                        dir=os.environ.get("NEURONKIT_TEST_RUN_DIR"))
            try:
                with os.fdopen(fd, "w") as stderr:   # the kernel writes to its own copy
                    return start(startup_timeout=startup_timeout, kernel_name=kernel_name,
                                 **{**kwargs, "stderr": stderr})
            except RuntimeError as exc:
                said = Path(name).read_text(encoding="utf-8", errors="replace")[-3000:]
                if attempt == 2:
                    raise RuntimeError(f"{exc} (twice); its stderr:\n{said}") from exc
                warnings.warn(f"a notebook kernel died while starting ({exc}); starting it again. "
                              f"Its stderr:\n{said}", stacklevel=2)
    start_new_kernel.keeps_stderr = True  # type: ignore[attr-defined]
    return start_new_kernel


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
