"""Device detection and resolution, with and without a (fake) Neuron install."""
from __future__ import annotations

import importlib.machinery
import re
import sys
import types
import warnings

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.setup import device, neuron_stack
from neuronkit.setup.device import DeviceFallbackWarning, cpu_backend
from neuronkit.setup.neuron_stack import version_pairing

REAL_TORCH_XLA_VERSION = neuron_stack.torch_xla_version


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
    assert report.versions["torch-neuronx"] == "0.1.0"  # the snapshot's tn/__init__.py:1
    assert report.reason == "" and report.warnings == []


def test_detect_reads_bf16_support_from_neuron(fake_neuron, monkeypatch):
    assert nk.detect().bf16_supported is True  # the source says True unconditionally
    # neuronkit asks torch.neuron rather than assuming: a build that answered no would show
    monkeypatch.setattr(fake_neuron.neuron, "is_bf16_supported", lambda: False)
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
    assert "torch-neuronx is not installed" in msg and "pip install 'torch-neuronx==2." in msg
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

    from neuronkit.setup.packages import package_version

    assert package_version("torch") == metadata.version("torch")
    assert package_version("no-such-distribution-neuronkit") is None


def test_import_neuronx_returns_the_module_or_none(fake_neuron):
    import sys

    from neuronkit.setup.device import import_neuronx

    assert import_neuronx() is sys.modules["torch_neuronx"] is fake_neuron.module
    del sys.modules["torch_neuronx"]  # not monkeypatch: fake_neuron restores sys.modules itself
    assert import_neuronx() is None  # not installed here


def test_import_neuronx_warns_on_a_broken_install(no_neuron, monkeypatch):
    import importlib

    from neuronkit.setup import device

    monkeypatch.setattr(importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(importlib, "import_module",
                        lambda name: (_ for _ in ()).throw(ImportError("libnrt.so missing")))
    with pytest.warns(UserWarning, match="failed to import: libnrt.so missing"):
        assert device.import_neuronx() is None


def test_only_device_py_touches_torch_neuronx():
    import pathlib
    import re

    touch = re.compile(r"import\s+torch_neuronx|from\s+torch_neuronx"
                       r"|[(\[]\s*[\"']torch_neuronx[\"']")
    package = pathlib.Path(nk.__file__).parent
    home = package / "setup" / "device.py"
    offenders = [p.name for p in package.rglob("*.py") if p != home and touch.search(p.read_text())]
    assert offenders == []
    assert touch.search(home.read_text())  # the pattern can match


# ---- the native stack: instance type, version pairing, torch_xla ---------------------------------

@pytest.fixture(autouse=True)
def no_instance_hints(monkeypatch, tmp_path):
    """Nothing of this machine leaks in: no instance hint, no DMI product name, no torch_xla."""
    monkeypatch.delenv(neuron_stack.INSTANCE_ENV, raising=False)
    monkeypatch.setattr(neuron_stack, "DMI_PRODUCT_NAME", str(tmp_path / "no-dmi"))
    monkeypatch.setattr(neuron_stack, "torch_xla_version", lambda: None)


def _other_minor(version: str) -> str:
    major, minor = version.split(".")[:2]
    return f"{major}.{int(minor) + 1}"


def _finding(report, name):
    return next(f for f in report.findings if f.name == name)


def test_native_on_trn2_is_supported_and_quiet(monkeypatch):
    monkeypatch.setenv(neuron_stack.INSTANCE_ENV, "trn2")
    with installed_fake(instance_type="trn2") as fake:
        report = nk.detect()
    assert fake.initialized is False                  # detect() never initialises the runtime
    assert (report.stack, report.instance, report.instance_source) == \
        ("native", "trn2", "$NEURONKIT_INSTANCE_TYPE")
    assert _finding(report, "instance").status == "ok"
    assert "cannot check the pairing" in _finding(report, "version pairing").text  # "0.1.0"
    assert report.warnings == []
    assert "instance          trn2 (from $NEURONKIT_INSTANCE_TYPE)" in str(report)
    assert "neuron stack      native torch-neuronx" in str(report)


@pytest.mark.parametrize("instance", ["trn1", "trn1n", "inf2"])
def test_native_on_trn1_or_inf2_warns_with_the_fix(instance, monkeypatch):
    monkeypatch.setenv(neuron_stack.INSTANCE_ENV, instance)
    with installed_fake(instance_type=instance):
        report = nk.detect()
    found = _finding(report, "instance")
    assert found.status == "warn" and found.text in report.warnings
    family = instance.rstrip("n")
    assert "Trn2 and Trn3 only" in found.text and f"not {family}" in found.text
    assert "Fix: on trn1/inf2 use the XLA-based torch-neuronx" in found.text


def test_instance_hint_from_the_environment_wins(monkeypatch):
    monkeypatch.setenv(neuron_stack.INSTANCE_ENV, "trn1.32xlarge")
    with installed_fake(instance_type="trn2"):
        report = nk.detect()
    assert (report.instance, report.instance_source) == ("trn1.32xlarge", "$NEURONKIT_INSTANCE_TYPE")
    assert _finding(report, "instance").status == "warn"


def test_instance_from_the_dmi_product_name(fake_neuron, tmp_path, monkeypatch):
    dmi = tmp_path / "product_name"
    monkeypatch.setattr(neuron_stack, "DMI_PRODUCT_NAME", str(dmi))
    dmi.write_text("trn2.48xlarge\n")
    report = nk.detect()
    assert (report.instance, report.instance_source) == ("trn2.48xlarge",
                                                         "the EC2 DMI product name")
    assert _finding(report, "instance").status == "ok"
    dmi.write_text("m5.large\n")
    found = _finding(nk.detect(), "instance")
    assert found.status == "warn" and "not a Trainium instance" in found.text
    dmi.write_text("Standard PC (Q35 + ICH9, 2009)\n")  # not EC2: not an instance type
    assert nk.detect().instance is None


def test_unknown_instance_says_how_to_tell(fake_neuron):
    report = nk.detect()  # no hint, no DMI; the runtime is never asked (the fake would say trn2)
    assert report.instance is None
    found = _finding(report, "instance")
    assert found.status == "ok" and "$NEURONKIT_INSTANCE_TYPE" in found.text
    assert "Trn2 and Trn3 only" in found.text


def test_failing_runtime_queries_do_not_escape_detect(monkeypatch):
    def boom(*args):
        raise RuntimeError("Failed to get Neuron instance information. Status: 2")

    with installed_fake() as fake:
        monkeypatch.setattr(fake.neuron, "is_bf16_supported", boom)
        report = nk.detect()
    assert report.device == "neuron" and report.instance is None and report.bf16_supported


@pytest.mark.parametrize("neuronx, torch_version, status, words", [
    ("2.13.3.0.1234", "2.13.0+cpu", "ok", ["pairs with torch 2.13.0+cpu"]),
    ("2.14.3.0.7", "2.14.0", "ok", ["pairs with"]),
    ("2.14.3.0.7", "2.13.0", "warn", ["torch-neuronx 2.14.3.0.7 is built for torch 2.14",
                                      "torch 2.13.0 is installed", "torch-neuronx==2.13.*",
                                      "torch==2.14.*"]),
    ("2.9.0.2.15.1", "2.13.0", "warn", ["built for torch 2.9"]),  # the XLA one: same rule
    ("0.1.0", "2.13.0", "ok", ["cannot check the pairing"]),      # the snapshot
    ("2.14.3.0.dev20261001", "2.13.0", "ok", ["cannot check the pairing"]),
    ("2.9.0.fake", "2.13.0", "ok", ["cannot check the pairing"]),
    ("2.13.3.0.1", "garbage", "ok", ["cannot check the pairing"]),
])
def test_version_pairing(neuronx, torch_version, status, words):
    found = version_pairing(neuronx, torch_version)
    assert found is not None and found.status == status
    for word in words:
        assert word in found.text
    assert version_pairing(None, torch_version) is None


def test_detect_warns_on_a_mismatched_pair():
    wrong = f"{_other_minor(torch.__version__)}.3.0.42"
    with installed_fake(version=wrong):
        report = nk.detect()
    found = _finding(report, "version pairing")
    assert found.status == "warn" and found.text in report.warnings
    assert wrong in found.text and torch.__version__ in found.text


def test_torch_xla_beside_native_is_flagged(monkeypatch):
    monkeypatch.setattr(neuron_stack, "torch_xla_version", lambda: "2.9.0")
    with installed_fake():
        report = nk.detect()
    found = _finding(report, "torch_xla")
    assert found.status == "warn" and found.text in report.warnings
    assert "XLA path" in found.text and "pip uninstall torch-xla" in found.text


def test_torch_xla_version_from_metadata_or_an_importable_module(monkeypatch):
    versions = {"torch-xla": "2.9.0"}
    monkeypatch.setattr(neuron_stack, "package_version", versions.get)
    assert REAL_TORCH_XLA_VERSION() == "2.9.0"
    versions.clear()
    module = types.ModuleType("torch_xla")
    module.__spec__ = importlib.machinery.ModuleSpec("torch_xla", None)
    monkeypatch.setitem(sys.modules, "torch_xla", module)
    assert REAL_TORCH_XLA_VERSION() == "unknown version"
    monkeypatch.delitem(sys.modules, "torch_xla")
    assert REAL_TORCH_XLA_VERSION() is None


def test_xla_based_torch_neuronx_is_named(no_neuron, monkeypatch):
    module = types.ModuleType("torch_neuronx")  # the XLA one registers no torch.neuron
    module.__version__ = "2.9.0.2.15.1"
    monkeypatch.setitem(sys.modules, "torch_neuronx", module)
    monkeypatch.setattr(device, "package_version", lambda dist: None)
    report = nk.detect()
    assert report.stack == "xla" and not report.neuron_available
    assert "XLA-based torch-neuronx" in report.reason
    assert any("needs the native torch-neuronx" in w for w in report.warnings)
    assert not any(f.name in ("instance", "torch_xla") for f in report.findings)
    assert _finding(report, "version pairing").status == "warn"  # 2.9 vs this torch


def test_no_neuronx_means_no_native_findings(no_neuron):
    report = nk.detect()
    assert (report.stack, report.findings, report.instance) == ("", [], None)
    assert "neuron stack" not in str(report)


def test_build_defaults_of_an_imported_neuronx(fake_neuron, monkeypatch):
    module = sys.modules["torch_neuronx"]
    monkeypatch.delattr(module, "_build_config", raising=False)  # a build that does not say
    monkeypatch.delattr(module, "DEFAULT_SYNC_MODE", raising=False)
    assert device.neuronx_build_defaults() == (None, None)
    # the snapshot's DEV build (tn/_build_config.py:4,15, bound by tn/__init__.py:26-32)
    monkeypatch.setattr(module, "_build_config", types.SimpleNamespace(BUILD_TYPE="DEV"),
                        raising=False)
    monkeypatch.setattr(module, "DEFAULT_SYNC_MODE", "0", raising=False)
    assert device.neuronx_build_defaults() == ("DEV", "0")
    monkeypatch.setattr(module._build_config, "BUILD_TYPE", "RELEASE")  # _build_config.py:7-9
    monkeypatch.setattr(module, "DEFAULT_SYNC_MODE", "1")
    assert device.neuronx_build_defaults() == ("RELEASE", "1")
    del sys.modules["torch_neuronx"]  # not monkeypatch: fake_neuron restores sys.modules itself
    assert device.neuronx_build_defaults() == (None, None)


def test_install_hint_names_the_native_instances(no_neuron):
    with pytest.raises(nk.NeuronNotFoundError) as err:
        nk.resolve_device("neuron")
    assert "Trn2/Trn3" in str(err.value) and "trn1" not in str(err.value)


def test_install_hint_is_the_command_of_the_neuron_2_33_docs(no_neuron):
    """setup/pytorch (v2.33): torch-neuronx with neuronx-cc 2.x and nki, from the Neuron index
    plus PyTorch's CPU index; 2.13.3.0.* pairs with torch 2.13.0, 2.14.3.0.* with 2.14.0; Python
    3.12-3.14."""
    hint = neuron_stack.install_hint("2.13.0+cpu", (3, 12, 4))
    assert hint.startswith("pip install 'torch-neuronx==2.13.*' 'neuronx-cc==2.*' nki "
                           "--extra-index-url=https://pip.repos.neuron.amazonaws.com "
                           "--extra-index-url=https://download.pytorch.org/whl/cpu (")
    assert "2.13.3.0.* pairs with torch 2.13.0, 2.14.3.0.* with torch 2.14.0" in hint
    assert "Python 3.12, 3.13 or 3.14)" in hint and "this Python" not in hint
    assert "'torch-neuronx==2.14.*'" in neuron_stack.install_hint("2.14.1", (3, 13, 0))
    old = neuron_stack.install_hint("2.9.0", (3, 11, 7))  # no family for this torch: the newest
    assert "'torch-neuronx==2.14.*'" in old
    assert "this Python is 3.11.7: make the environment with one of those first" in old
    with pytest.raises(nk.NeuronNotFoundError) as err:
        nk.resolve_device("neuron")
    assert neuron_stack.install_hint() in str(err.value)
