"""``doctor_report``: one readable table of versions, devices, cache and known traps."""
from __future__ import annotations

import re

import pytest
import torch

from neuronkit.doctor import doctor_report


def _row(text: str, label: str) -> str:
    match = re.search(rf"^  {re.escape(label)} +(.*)$", text, flags=re.M)
    assert match, f"no row {label!r} in:\n{text}"
    return match.group(1)


def _check(text: str, name: str) -> str:
    match = re.search(rf"^  \[(ok  |warn)\] {re.escape(name)} +(.*)$", text, flags=re.M)
    assert match, f"no check {name!r} in:\n{text}"
    return f"{match.group(1).strip()}: {match.group(2)}"


@pytest.fixture
def clean_env(monkeypatch, tmp_path):
    for var in ("NEURONKIT_CPU_BACKEND", "TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE",
                "NEURON_COMPILE_CACHE_URL"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'no-cache-yet'}")


@pytest.mark.skipif(torch.cuda.is_available(), reason="describes a CPU-only machine")
def test_cpu_machine_says_plainly_no_neuron(no_neuron, clean_env):
    text = doctor_report()
    assert _row(text, "torch") == torch.__version__
    assert _row(text, "torch-neuronx") == "not installed"
    assert _row(text, "neuron") == "NO - no Neuron device found"
    assert _row(text, "device used") == "cpu"
    assert _row(text, "compile backend").startswith("eager (default off Neuron")
    assert "torch-neuronx is not installed" in _row(text, "why")
    assert _check(text, "neuron devices").startswith("warn: no Neuron device found: running on cpu")
    assert _check(text, "device_map='auto'").startswith("ok: it does not see Neuron")
    assert "device_map='cpu'" in _check(text, "device_map='auto'")
    assert _check(text, "Trainer on Neuron").startswith("ok:")
    assert "dynamic=False" in _check(text, "Trainer on Neuron")
    assert _check(text, "generate inputs").startswith("ok: leave input_ids on CPU")
    assert _check(text, "torch.compile").startswith("ok")
    assert "does not exist yet" in _check(text, "compile cache")
    assert text.rstrip().endswith("compile times are not Neuron's.")
    assert ("No Neuron device was found: neuronkit runs on cpu with the 'eager' compile backend"
            in text)


def test_fake_neuron_is_reported(fake_neuron, clean_env):
    text = doctor_report()
    assert _row(text, "neuron") == "yes, 2 device(s)"
    assert _row(text, "device used") == "neuron"
    assert _row(text, "compile backend").startswith("neuron (the Neuron backend")
    assert _row(text, "torch-neuronx") == "2.9.0.fake"
    assert _check(text, "neuron devices") == "ok: 2 found; tensors go to 'neuron' / 'neuron:N'"
    assert "device_map='neuron'" in _check(text, "device_map='auto'")
    assert "Neuron found: neuronkit runs on neuron with the 'neuron' compile backend." in text


@pytest.mark.parametrize("fake_neuron", [0], indirect=True)
def test_neuronx_without_devices(fake_neuron, clean_env):
    text = doctor_report()
    assert _check(text, "neuron devices").startswith("warn: torch-neuronx is installed but sees no")
    assert "neuron-ls" in text
    assert "No Neuron device was found" in text


def test_cache_problems_are_warned(neuron_cache, clean_env):
    text = doctor_report(cache_dir=neuron_cache)
    assert f"{neuron_cache}: 6 graphs (3 ok, 1 failed, 1 locked, 1 empty)" in _row(text, "folder")
    assert _check(text, "failed compiles").startswith("warn: 1 failed entry blocks recompiling")
    assert _check(text, "stale locks").startswith("warn: 1 entry folder(s) locked for over an hour")


def test_healthy_cache_is_ok(tmp_path, clean_env):
    from conftest import write_cache_entry

    write_cache_entry(tmp_path, "ok")
    text = doctor_report(cache_dir=tmp_path)
    assert _check(text, "compile cache") == "ok: no failed entries, no stale locks"
    assert "[warn] failed" not in text


def test_unreadable_cache_argument_does_not_crash(tmp_path, clean_env):
    (tmp_path / "file").write_text("x")
    assert "cannot read: " in _row(doctor_report(cache_dir=tmp_path / "file"), "folder")


def test_environment_traps(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("TORCH_COMPILE_DISABLE", "1")
    monkeypatch.setenv("NEURON_CC_FLAGS", "--cache_dir=/nowhere -O1")
    text = doctor_report()
    assert _check(text, "torch.compile").startswith("warn: TORCH_COMPILE_DISABLE is set")
    assert _check(text, "NEURON_CC_FLAGS") == "ok: '--cache_dir=/nowhere -O1'"
    assert "/nowhere: not found" in _row(text, "folder")
    assert "compile cache (from NEURON_CC_FLAGS --cache_dir)" in text


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU backend applies without CUDA")
def test_bad_cpu_backend_is_a_warning_not_a_crash(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "nonsense")
    text = doctor_report()
    assert _check(text, "cpu backend").startswith("warn: $NEURONKIT_CPU_BACKEND='nonsense'")
    assert _row(text, "compile backend").startswith("eager")


@pytest.mark.skipif(torch.cuda.is_available(), reason="the CPU backend applies without CUDA")
def test_cpu_backend_from_env_is_credited(monkeypatch, clean_env, no_neuron):
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "aot_eager")
    assert _row(doctor_report(), "compile backend") == "aot_eager (from $NEURONKIT_CPU_BACKEND)"


def test_versions_of_other_packages_come_from_their_metadata(no_neuron, clean_env):
    import accelerate

    text = doctor_report()
    assert _row(text, "accelerate") == accelerate.__version__
    assert _row(text, "neuronx-cc") == "not installed"
