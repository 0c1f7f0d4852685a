"""Shared fixtures: the embedded tiny model, a fake Neuron install, a fake Neuron compile cache."""
from __future__ import annotations

import importlib.machinery
import itertools
import os
import sys
import time
import types
from pathlib import Path

import pytest
import torch


def pytest_configure(config) -> None:
    """One math thread: the tiny model runs faster single-threaded on a small, shared machine.
    Set in the environment too, so notebook kernels started by nbval inherit it."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    torch.set_num_threads(int(os.environ["OMP_NUM_THREADS"]))


@pytest.fixture(scope="session", autouse=True)
def neuronkit_home(tmp_path_factory) -> Path:
    """A private NEURONKIT_HOME for the whole session (no test writes to the user cache), and
    the Hugging Face Hub switched to offline mode (no test downloads, none waits on retries)."""
    home = tmp_path_factory.mktemp("neuronkit-home")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("NEURONKIT_HOME", str(home))
        mp.setenv("HF_HUB_OFFLINE", "1")  # tests never download; subprocesses inherit this
        from huggingface_hub import constants

        mp.setattr(constants, "HF_HUB_OFFLINE", True)  # read at import time: patch it here too
        yield home


@pytest.fixture(scope="session")
def tiny_model_path(neuronkit_home) -> Path:
    """The embedded tiny Qwen3, built once per session; ``nk.tiny_model()`` returns the same folder."""
    import neuronkit as nk

    return nk.tiny_model()


# --------------------------------------------------------------------------- fake Neuron

class FakeNeuron:
    """Stands in for ``torch.neuron`` (torch-neuronx's device namespace). Set ``.count`` freely."""

    def __init__(self, count: int = 2, bf16: bool = True):
        self.count = count
        self.bf16 = bf16
        self.current = 0
        self.metrics: list[dict] = []  # what torch_neuronx.get_dynamo_metrics() returns

    def is_available(self) -> bool:
        return self.count > 0

    def device_count(self) -> int:
        return self.count

    def set_device(self, device) -> None:
        index = device if isinstance(device, int) else int(str(device).partition(":")[2] or 0)
        if not 0 <= index < self.count:
            raise RuntimeError(f"fake neuron: no device {device!r} (count={self.count})")
        self.current = index

    def current_device(self) -> int:
        return self.current

    def is_bf16_supported(self) -> bool:
        return self.bf16


@pytest.fixture
def fake_neuron(request, monkeypatch) -> FakeNeuron:
    """A fake ``torch.neuron`` plus a fake ``torch_neuronx`` module (default 2 devices).

    Choose the device count with ``@pytest.mark.parametrize("fake_neuron", [0, 4], indirect=True)``
    or by setting ``fake_neuron.count``. Nothing is placed on a real ``neuron`` device: code
    under test must not move tensors there (patch ``from_pretrained`` etc. where it would).
    """
    fake = FakeNeuron(count=getattr(request, "param", 2))
    monkeypatch.setattr(torch, "neuron", fake, raising=False)
    module = types.ModuleType("torch_neuronx")
    module.__spec__ = importlib.machinery.ModuleSpec("torch_neuronx", None)
    module.__version__ = "2.9.0.fake"
    module.get_dynamo_metrics = lambda: list(fake.metrics)
    monkeypatch.setitem(sys.modules, "torch_neuronx", module)
    return fake


@pytest.fixture
def no_neuron(monkeypatch) -> None:
    """Make sure no real or leftover ``torch.neuron`` / ``torch_neuronx`` is visible."""
    monkeypatch.delattr(torch, "neuron", raising=False)
    monkeypatch.delitem(sys.modules, "torch_neuronx", raising=False)


@pytest.fixture
def compiler_reset():
    """``torch.compiler.reset()`` before and after the test, so compile counts start fresh."""
    torch.compiler.reset()
    yield
    torch.compiler.reset()


# --------------------------------------------------------------------------- fake compile cache

_entry_ids = itertools.count(1)


def write_cache_entry(root: Path, state: str, *, version: str = "2.15.128.0",
                      name: str | None = None, size: int = 1000, mtime: float | None = None) -> Path:
    """One ``neuronxcc-<version>/MODULE_<hash>+<hash>/`` entry in the state the compiler leaves:
    ``ok`` (neff + done + log), ``failed`` (log only), ``locked`` (lock, compiling), ``empty``."""
    name = name or f"MODULE_{next(_entry_ids):012d}+d41d8cd9"
    entry = root / f"neuronxcc-{version}" / name
    entry.mkdir(parents=True)
    files = {"ok": {"model.neff": size, "model.done": 0, "model.log": 20},
             "failed": {"model.log": 40}, "locked": {"model.hlo_module.pb.lock": 0, "model.log": 5},
             "empty": {}}[state]
    for fname, nbytes in files.items():
        (entry / fname).write_bytes(b"x" * nbytes)
    if state == "failed":
        (entry / "model.log").write_text("ERROR: neuronx-cc exited with code 70 (fake)\n")
    if mtime is not None:
        for path in [*entry.iterdir(), entry]:
            os.utime(path, (mtime, mtime))
    return entry


@pytest.fixture
def neuron_cache(tmp_path) -> Path:
    """A compile cache folder with 3 ok, 1 failed, 1 locked and 1 empty entry (two versions)."""
    root = tmp_path / "neuron-compile-cache"
    now = time.time()
    for i, size in enumerate((1000, 2000, 3000)):
        write_cache_entry(root, "ok", size=size, mtime=now - 3600 * (i + 1))
    write_cache_entry(root, "failed", version="2.14.227.0", mtime=now - 60)
    write_cache_entry(root, "locked", mtime=now - 7200)
    write_cache_entry(root, "empty", mtime=now - 86400)
    return root


@pytest.fixture(scope="module")
def model(tiny_model_path):
    """The embedded tiny model on CPU in float32, shared by a test module (modules may override)."""
    import neuronkit as nk

    return nk.load_model(tiny_model_path, device="cpu", dtype="float32")


@pytest.fixture(scope="module")
def tok(tiny_model_path):
    """The embedded tiny model's tokenizer (modules may override)."""
    import neuronkit as nk

    return nk.load_tokenizer(tiny_model_path)



@pytest.fixture
def clean_env(monkeypatch):
    """No Neuron setting from the machine running the tests (helpers.env.NEURON_ENV)."""
    from helpers.env import NEURON_ENV

    for name in NEURON_ENV:
        monkeypatch.delenv(name, raising=False)
