"""Sync or async: the doctor says which mode this machine runs (issue 38). The variable where
set; else the installed torch_neuronx's build type, read from the text of its
``_build_config.py`` (RELEASE builds default ``NEURON_LAUNCH_BLOCKING`` to "1",
``tn/_build_config.py:7-11``, applied with ``setdefault`` at ``tn/__init__.py:46``), never by
importing it; unknown, it says so."""
from __future__ import annotations

import sys

import pytest

from neuronkit.setup.device import neuronx_build_type
from neuronkit.setup.doctor_native import launch_blocking_check

# tn/_build_config.py of the snapshot; setup.py:22-32 rewrites BUILD_TYPE for release wheels
BUILD_CONFIG = '''"""Build-time configuration - auto-generated, do not edit."""

# This value is baked in at build time
BUILD_TYPE = "{build}"

# Build-time defaults based on release flag
if BUILD_TYPE == "RELEASE":
    # Release defaults - optimized for production
    DEFAULT_SYNC_MODE = "1"  # Sync
else:
    # Development defaults - optimized for debugging
    DEFAULT_SYNC_MODE = "0"  # Async
'''


@pytest.fixture
def installed(monkeypatch, tmp_path):
    """``installed(build)``: a torch_neuronx package folder on sys.path whose ``__init__`` fails
    if imported, with a ``_build_config.py`` of that build type (None: no such file)."""
    monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)
    monkeypatch.delenv("NEURON_LAUNCH_BLOCKING", raising=False)

    def make(build: str | None, text: str | None = None):
        package = tmp_path / "site" / "torch_neuronx"
        package.mkdir(parents=True, exist_ok=True)
        (package / "__init__.py").write_text("raise RuntimeError('imported torch_neuronx')\n")
        config = package / "_build_config.py"
        if build is not None or text is not None:
            config.write_text(text if text is not None else BUILD_CONFIG.format(build=build))
        monkeypatch.syspath_prepend(str(tmp_path / "site"))
        return config

    yield make
    assert "torch_neuronx" not in sys.modules  # read, never imported


def test_a_release_build_runs_sync_when_the_variable_is_unset(installed):
    config = installed("RELEASE")
    assert neuronx_build_type() == ("RELEASE", f"BUILD_TYPE read from {config}")
    check = launch_blocking_check({})
    assert check.text.startswith(f"not set: this RELEASE build (BUILD_TYPE read from {config}) "
                                 "defaults to '1' = sync mode")
    for words in ("inside Dynamo's compile time", "NeuronStream.cpp:288-299",
                  "kernel.py:785-806,925-934", "compilation/cache.py:15-71",
                  "counts their kernels from that process-global dict",
                  "not told apart per kernel", "NEFF files written to the cache folder since the "
                  "last safe point", "unsetting it does not help: this build's default is '1'"):
        assert words in check.text


def test_a_dev_build_runs_async_when_the_variable_is_unset(installed):
    installed("DEV")
    text = launch_blocking_check({}).text
    assert text.startswith("not set: this DEV build (BUILD_TYPE read from ")
    assert "defaults to '0' = async mode: NEFF builds finish on a worker thread" in text
    assert "neuronkit reads it at safe points" in text
    assert "eager-op kernels are seen through the C++ compilation cache" in text


def test_the_variable_wins_over_the_build(installed):
    installed("RELEASE")
    text = launch_blocking_check({"NEURON_LAUNCH_BLOCKING": "0"}).text
    assert text.startswith("'0' (set; this RELEASE build (BUILD_TYPE read from ")
    assert "defaults to '1') = async mode" in text
    same = launch_blocking_check({"NEURON_LAUNCH_BLOCKING": "1"}).text
    assert same.startswith("'1', this RELEASE build (") and "= sync mode" in same


def test_no_build_config_means_the_dev_defaults(installed):
    installed(None)
    build, why = neuronx_build_type()
    assert build == "DEV" and "no _build_config.py in" in why and "tn/__init__.py:26-36" in why
    assert "defaults to '0' = async mode" in launch_blocking_check({}).text


@pytest.mark.parametrize("text", ["BUILD_TYPE = compute()\n", "this is not python (\n",
                                  "OTHER = 'RELEASE'\n"])
def test_an_unreadable_build_type_is_unknown_and_said_so(installed, text):
    config = installed(None, text)
    assert neuronx_build_type() == (None, f"no BUILD_TYPE = '...' in {config}")
    check = launch_blocking_check({})
    assert check.text.startswith("not set, and this machine's torch-neuronx build type is not "
                                 "known (no BUILD_TYPE = '...' in ")
    assert "the mode is not known" in check.text


def test_not_installed_is_unknown(monkeypatch):
    monkeypatch.setitem(sys.modules, "torch_neuronx", None)
    assert neuronx_build_type() == (None, "torch_neuronx is not installed")
    assert "build type is not known (torch_neuronx is not installed)" in \
        launch_blocking_check({}).text
