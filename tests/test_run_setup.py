"""The test run's own set-up (the repository's conftest.py): nbval's kernel start keeps the
kernel's stderr and starts a kernel that died while starting once more; the notebook kernels'
IPython folder tunes their garbage collector and keeps no history file."""
from __future__ import annotations

import gc
import importlib.util
import os
import sys
import types

import pytest

from helpers.paths import ROOT


@pytest.fixture(scope="module")
def run_setup() -> types.ModuleType:
    spec = importlib.util.spec_from_file_location("neuronkit_root_conftest", ROOT / "conftest.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _dying_start(deaths: int, calls: list[str]):
    """A stand-in for nbval's start_new_kernel: says something on stderr, dies ``deaths`` times."""
    def start(startup_timeout, kernel_name, stderr, **kwargs):
        calls.append(kernel_name)
        stderr.write(f"zmq.error.ZMQError: Address already in use (start {len(calls)})\n")
        stderr.flush()
        if len(calls) <= deaths:
            raise RuntimeError("Kernel died before replying to kernel_info")
        return "manager", "client"
    return start


def test_a_kernel_that_died_while_starting_is_started_again_and_its_stderr_shown(run_setup, tmp_path,
                                                                                 monkeypatch):
    monkeypatch.setenv("NEURONKIT_TEST_RUN_DIR", str(tmp_path))
    calls: list[str] = []
    start = run_setup._start_kernel_keeping_stderr(_dying_start(1, calls))
    with pytest.warns(UserWarning, match=r"(?s)died while starting.*Address already in use \(start 1\)"):
        assert start(kernel_name="k", stderr=open(os.devnull, "w")) == ("manager", "client")
    assert calls == ["k", "k"]
    assert len(list(tmp_path.glob("kernel-*.stderr"))) == 2   # in the run's folder, not /tmp


def test_a_kernel_that_dies_twice_fails_with_its_stderr(run_setup, tmp_path, monkeypatch):
    monkeypatch.setenv("NEURONKIT_TEST_RUN_DIR", str(tmp_path))
    calls: list[str] = []
    start = run_setup._start_kernel_keeping_stderr(_dying_start(2, calls))
    with pytest.warns(UserWarning), pytest.raises(RuntimeError, match=r"(?s)\(twice\).*\(start 2\)"):
        start(kernel_name="k", stderr=open(os.devnull, "w"))
    assert calls == ["k", "k"]


def test_nbval_starts_its_kernels_through_the_wrapper():
    kernel = pytest.importorskip("nbval.kernel")
    assert getattr(kernel.start_new_kernel, "keeps_stderr", False)


class _Events:
    def __init__(self) -> None:
        self.callbacks: list = []

    def register(self, event: str, callback) -> None:
        assert event == "post_run_cell"
        self.callbacks.append(callback)

    def unregister(self, event: str, callback) -> None:
        self.callbacks.remove(callback)


def test_the_kernel_startup_file_freezes_once_torch_is_imported_and_leaves_no_name(run_setup, tmp_path,
                                                                                  monkeypatch):
    folder = run_setup._kernel_ipython_dir(tmp_path)
    profile = folder / "profile_default"
    assert "':memory:'" in (profile / "ipython_kernel_config.py").read_text().replace('"', "'")
    shell = types.SimpleNamespace(events=_Events())
    namespace = {"get_ipython": lambda: shell}
    before = gc.get_threshold()
    try:
        exec((profile / "startup" / "00-neuronkit-test-gc.py").read_text(), namespace)
        assert gc.get_threshold() == run_setup.GC_THRESHOLDS
        assert set(namespace) == {"get_ipython", "__builtins__"}   # nothing left in the notebook
        [freeze] = shell.events.callbacks
        monkeypatch.delitem(sys.modules, "torch")
        freeze(None)
        assert shell.events.callbacks == [freeze]   # no torch yet: waits for the next cell
        monkeypatch.undo()
        freeze(None)
        assert shell.events.callbacks == [] and gc.get_freeze_count() > 0
    finally:
        gc.set_threshold(*before)
