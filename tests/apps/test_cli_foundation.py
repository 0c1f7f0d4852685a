"""``neuronkit doctor`` and ``neuronkit cache`` through the command line."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import torch

from neuronkit.apps.cli import main


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
    assert ("No Neuron device was found: neuronkit runs on cpu with the 'eager' compile backend"
            in out)
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


def test_cache_command_missing_folder_is_a_message_and_exit_2(tmp_path, capsys):
    assert main(["cache", str(tmp_path / "nope")]) == 2
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


# ---- demo: the side-by-side table --------------------------------------------------------------

@pytest.fixture
def quick_demo(monkeypatch, tmp_path, tiny_model_path):
    """The demo with loading and generating replaced: naive builds 2 graphs, bucketed 1, each
    taking 1 s, and each run takes 5 s of wall time."""
    from types import SimpleNamespace

    import neuronkit.setup.models
    import neuronkit.workloads.generation
    from neuronkit.events.event import CompileEvent

    def fake_generate(model, tok, prompts, *, buckets, recorder, **kw):
        for i in range(2 if buckets is None else 1):
            recorder.log.append(CompileEvent(function="forward", kind="first" if i == 0
                                             else "recompile", duration_s=1.0))
        return SimpleNamespace(wall_s=5.0, texts=["a reply"])

    monkeypatch.setattr(neuronkit.setup.models, "load_model", lambda *a, **k: object())
    monkeypatch.setattr(neuronkit.workloads.generation, "generate", fake_generate)
    return ["demo", "--requests", "3", "--model", str(tiny_model_path),
            "--log-dir", str(tmp_path / "logs")]


def _side_by_side(out: str) -> str:
    return out.split("=== side by side ===", 1)[1]


def test_demo_off_neuron_projects_the_neuron_compile_cost(no_neuron, quick_demo, capsys):
    from neuronkit.examples.demo import NEURON_COMPILE_COST_S

    assert main(quick_demo) == 0
    table = _side_by_side(capsys.readouterr().out)
    assert "projected on Neuron s" in table and "it was not run on Neuron" in table
    naive = next(ln for ln in table.splitlines() if ln.startswith("naive"))
    # execution (5 s wall - 2 s compiling) + 2 graphs at the assumed Neuron compile cost
    assert naive.split()[-1] == f"{5.0 - 2.0 + 2 * NEURON_COMPILE_COST_S:.0f}"


def test_demo_on_neuron_reports_measured_times_without_a_projection(fake_neuron, quick_demo,
                                                                     capsys):
    assert main(quick_demo) == 0
    out = capsys.readouterr().out
    assert "device: neuron" in out
    table = _side_by_side(out)
    assert "projected" not in table and "not run on Neuron" not in table
    assert "measured on Neuron" in table
    naive = next(ln for ln in table.splitlines() if ln.startswith("naive"))
    assert naive.split() == ["naive", "2", "2.00", "5.00"]
