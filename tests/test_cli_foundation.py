"""``neuronkit doctor`` and ``neuronkit cache`` through the command line."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from neuronkit.cli import main


@pytest.fixture
def no_default_cache(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'never-compiled'}")
    monkeypatch.delenv("NEURONKIT_CPU_BACKEND", raising=False)
    return tmp_path / "never-compiled"


@pytest.mark.skipif(torch.cuda.is_available(), reason="describes a CPU-only machine")
def test_doctor_says_no_neuron_and_what_runs_instead(no_neuron, no_default_cache, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("neuronkit doctor")
    assert "NO - no Neuron device found" in out
    assert "No Neuron device was found: neuronkit runs on cpu with the 'eager' compile backend" in out
    assert f"{no_default_cache}: not found" in out


def test_doctor_with_a_cache_dir(no_neuron, neuron_cache, capsys):
    assert main(["doctor", "--cache-dir", str(neuron_cache)]) == 0
    out = capsys.readouterr().out
    assert "6 graphs (3 ok, 1 failed, 1 locked, 1 empty)" in out
    assert "[warn] failed compiles" in out


def test_doctor_with_fake_neuron(fake_neuron, no_default_cache, capsys):
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert "yes, 2 device(s)" in out and "Neuron found: neuronkit runs on neuron" in out


def test_cache_command_lists_failed_entries(neuron_cache, capsys):
    assert main(["cache", str(neuron_cache)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Neuron compile cache: {neuron_cache}")
    assert "block recompiling" in out and "MODULE_" in out and "code 70" in out


def test_cache_command_default_folder(neuron_cache, monkeypatch, capsys):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir {neuron_cache}")
    assert main(["cache"]) == 0
    assert "from NEURON_CC_FLAGS --cache_dir" in capsys.readouterr().out


def test_cache_command_missing_folder_is_a_message(tmp_path, capsys):
    assert main(["cache", str(tmp_path / "nope")]) == 0
    captured = capsys.readouterr()
    assert "no folder at" in captured.out and "Traceback" not in captured.out + captured.err


def test_cache_command_on_a_file_is_an_error(tmp_path, capsys):
    (tmp_path / "f").write_text("x")
    assert main(["cache", str(tmp_path / "f")]) == 2
    assert "neuronkit cache: error:" in capsys.readouterr().err


@pytest.mark.slow  # a fresh interpreter importing torch: several seconds on a busy machine
def test_python_dash_m_neuronkit_doctor(no_default_cache):
    env = {**os.environ, "PYTHONWARNINGS": "error::DeprecationWarning:neuronkit"}
    proc = subprocess.run([sys.executable, "-m", "neuronkit", "doctor"], capture_output=True,
                          text=True, timeout=120, env=env)
    assert proc.returncode == 0, proc.stderr
    assert "neuronkit doctor" in proc.stdout and "known traps" in proc.stdout
    if not torch.cuda.is_available():
        assert "No Neuron device was found" in proc.stdout
    assert proc.stderr == ""
