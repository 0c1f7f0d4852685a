"""Device detection and resolution, with and without a (fake) Neuron install."""
from __future__ import annotations

import re
import warnings

import pytest
import torch

import neuronkit as nk
from neuronkit.device import DeviceFallbackWarning, cpu_backend


def test_detect_without_neuron_uses_cpu_and_says_why(no_neuron, monkeypatch):
    monkeypatch.delenv("NEURONKIT_CPU_BACKEND", raising=False)
    report = nk.detect()
    assert not report.neuron_available and report.device_count == 0
    assert report.device == ("cuda" if torch.cuda.is_available() else "cpu")
    if report.device == "cpu":
        assert report.compile_backend == "eager"
    assert "torch-neuronx is not installed" in report.reason
    assert report.versions["torch"] == torch.__version__
    assert report.versions["torch-neuronx"] is None
    text = str(report)
    assert "neuron available  no" in text and "not installed" in text


@pytest.mark.parametrize("fake_neuron", [1, 4], indirect=True)
def test_detect_with_fake_neuron(fake_neuron):
    report = nk.detect()
    assert report.neuron_available
    assert report.device_count == fake_neuron.count
    assert (report.device, report.compile_backend) == ("neuron", "neuron")
    assert report.versions["torch-neuronx"] == "2.9.0.fake"
    assert report.reason == "" and report.warnings == []


def test_detect_reads_bf16_support_from_neuron(fake_neuron):
    fake_neuron.bf16 = False
    assert nk.detect().bf16_supported is False


@pytest.mark.parametrize("fake_neuron", [0], indirect=True)
def test_neuronx_installed_without_devices_warns_and_falls_back(fake_neuron):
    report = nk.detect()
    assert not report.neuron_available and report.device != "neuron"
    assert "is_available() is False" in report.reason
    assert any("neuron-ls" in w for w in report.warnings)


def test_resolve_neuron_when_absent_says_how_to_install(no_neuron):
    with pytest.raises(nk.NeuronNotFoundError) as err:
        nk.resolve_device("neuron")
    msg = str(err.value)
    assert "torch-neuronx is not installed" in msg and "pip install torch-neuronx" in msg
    assert "device='cpu'" in msg


@pytest.mark.parametrize("fake_neuron", [0], indirect=True)
def test_resolve_neuron_with_no_devices(fake_neuron):
    with pytest.raises(nk.NeuronNotFoundError, match="reports no Neuron devices"):
        nk.resolve_device("neuron:0")


def test_resolve_neuron_index_checked_against_count(fake_neuron):
    assert nk.resolve_device("neuron") == "neuron"
    assert nk.resolve_device("neuron:1") == "neuron:1"
    with pytest.raises(nk.NeuronNotFoundError, match=r"only 2 Neuron device\(s\)"):
        nk.resolve_device("neuron:2")


@pytest.mark.parametrize("requested", [None, "auto"])
def test_auto_prefers_neuron_without_warning(fake_neuron, requested):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        assert nk.resolve_device(requested) == "neuron"


@pytest.mark.parametrize("requested", [None, "auto"])
def test_auto_falls_back_with_a_visible_warning(no_neuron, requested):
    with pytest.warns(DeviceFallbackWarning,
                      match="no Neuron device: torch-neuronx is not installed"):
        device = nk.resolve_device(requested)
    assert device == ("cuda" if torch.cuda.is_available() else "cpu")


@pytest.mark.parametrize("bad", ["gpu", "neuron:x", "cpu:-1", "Neuron", ""])
def test_bad_device_strings(bad):
    with pytest.raises(ValueError, match="unknown device"):
        nk.resolve_device(bad)


def test_device_must_be_a_string():
    with pytest.raises(TypeError, match="must be a string"):
        nk.resolve_device(0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-CUDA message")
def test_cuda_asked_but_absent():
    with pytest.raises(RuntimeError, match="no CUDA device"):
        nk.resolve_device("cuda")


def test_explicit_cpu_passes_through(fake_neuron):
    assert nk.resolve_device("cpu") == "cpu"


def test_cpu_backend_from_env(no_neuron, monkeypatch):
    if torch.cuda.is_available():
        pytest.skip("the CPU backend is only chosen without CUDA")
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "aot_eager")
    assert nk.detect().compile_backend == "aot_eager"
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "aot_eager_decomp_partition")  # not a built-in
    assert nk.detect().compile_backend == "aot_eager_decomp_partition"
    assert nk.detect(cpu_backend_name="eager").compile_backend == "eager"  # argument wins


def test_bad_cpu_backend_names_the_choices(monkeypatch):
    monkeypatch.setenv("NEURONKIT_CPU_BACKEND", "no-such-backend")
    with pytest.raises(ValueError, match="unknown compile backend 'no-such-backend'") as err:
        cpu_backend()
    choices = str(err.value).split("choose one of ", 1)[1]
    assert {"eager", "aot_eager", "inductor"} <= set(re.findall(r"\w+", choices))
    assert "TESTING" not in choices  # torch's internal test backends are not offered


def test_detected_backend_really_compiles(no_neuron, compiler_reset):
    backend = nk.detect(cpu_backend_name="eager").compile_backend
    if torch.cuda.is_available():
        pytest.skip("inductor on CUDA is too slow for a unit test")
    fn = torch.compile(lambda x: torch.sin(x) * 2, backend=backend)
    x = torch.arange(4.0)
    assert torch.equal(fn(x), torch.sin(x) * 2)


def test_package_version_reads_installed_metadata():
    from importlib import metadata

    from neuronkit.device import package_version

    assert package_version("torch") == metadata.version("torch")
    assert package_version("no-such-distribution-neuronkit") is None


def test_import_neuronx_returns_the_module_or_none(fake_neuron, monkeypatch):
    import sys

    from neuronkit.device import import_neuronx

    assert import_neuronx() is sys.modules["torch_neuronx"]
    monkeypatch.delitem(sys.modules, "torch_neuronx")
    assert import_neuronx() is None  # not installed here


def test_import_neuronx_warns_on_a_broken_install(no_neuron, monkeypatch):
    import importlib

    from neuronkit import device

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(importlib, "import_module",
                        lambda name: (_ for _ in ()).throw(ImportError("libnrt.so missing")))
    with pytest.warns(UserWarning, match="failed to import: libnrt.so missing"):
        assert device.import_neuronx() is None


def test_neuron_dynamo_metrics(fake_neuron, monkeypatch):
    import sys

    from neuronkit.device import neuron_dynamo_metrics

    assert neuron_dynamo_metrics() == []
    fake_neuron.metrics = [{"graph": 1}, {"graph": 2}]
    assert neuron_dynamo_metrics() == [{"graph": 1}, {"graph": 2}]
    monkeypatch.setattr(sys.modules["torch_neuronx"], "get_dynamo_metrics",
                        lambda: {"g1": {"graph": 1}})  # a table keyed by graph
    assert neuron_dynamo_metrics() == [{"graph": 1}]
    monkeypatch.delitem(sys.modules, "torch_neuronx")
    assert neuron_dynamo_metrics() == []


def test_only_device_py_touches_torch_neuronx():
    import pathlib
    import re

    touch = re.compile(r"import\s+torch_neuronx|from\s+torch_neuronx"
                       r"|[(\[]\s*[\"']torch_neuronx[\"']")
    package = pathlib.Path(nk.__file__).parent
    offenders = [p.name for p in package.rglob("*.py")
                 if p.name != "device.py" and touch.search(p.read_text())]
    assert offenders == []
    assert touch.search((package / "device.py").read_text())  # the pattern can match
