"""Shared fixtures: the embedded tiny model, a fake Neuron install, a fake Neuron compile cache."""
from __future__ import annotations

import itertools
import os
import sys
import time
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

@pytest.fixture
def fake_neuron(request):
    """The contract fake of native torch-neuronx (``tests/neuron_fake``), installed for one test.

    ``torch_neuronx``, its submodules and ``torch.neuron`` behave as the source does (each name
    cites it): ``set_device`` takes an int or ``torch.device`` and raises ``ValueError`` out of
    range, ``get_dynamo_metrics()`` synchronizes and returns ``NeuronCompilationMetrics``,
    ``__version__`` is ``"0.1.0"``; ``fake_neuron.sync_count`` counts synchronizes. Default 2
    devices; choose with ``@pytest.mark.parametrize("fake_neuron", [0, 4], indirect=True)``.
    ``installed_fake`` resets Dynamo and swaps the ``neuron`` backend on entry and restores all
    of it on exit. Nothing is placed on a real ``neuron`` device (``torch.device("neuron")`` does
    not parse under the fake): code under test must not move tensors there (patch
    ``from_pretrained`` etc. where it would).
    """
    from neuron_fake import installed_fake

    with installed_fake(device_count=getattr(request, "param", 2)) as fake:
        request.node.stash[_FAKE_NEURON] = fake
        yield fake


_FAKE_NEURON = pytest.StashKey[object]()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """After every fixture is torn down, no trace of ``fake_neuron`` may remain. It can: a
    ``monkeypatch`` set up before the fake (an autouse fixture's) undoes *after* the fake left,
    so ``monkeypatch.delitem(sys.modules, "torch_neuronx")`` puts the fake back for later tests.
    Inside a test, change ``sys.modules`` / ``torch.neuron`` directly: the fixture restores them."""
    result = yield
    fake = item.stash.get(_FAKE_NEURON, None)
    if fake is not None:
        leaked = [name for name, module in list(sys.modules.items())
                  if str(getattr(module, "__file__", None)).startswith("<neuron_fake:")]
        if getattr(torch, "neuron", None) is getattr(fake, "neuron", None):
            del torch.neuron
            leaked.append("torch.neuron")
        for name in leaked:
            sys.modules.pop(name, None)
        if leaked:
            raise RuntimeError(f"fake_neuron left {leaked} behind (removed now): do not change "
                               "sys.modules or torch.neuron through monkeypatch in its tests")
    return result


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


@pytest.fixture
def recompile_limit_4():
    """torch's recompile limit at 4 instead of 8 for the test: a plan over the limit is half as
    many compiles (restored afterwards)."""
    with torch._dynamo.config.patch(recompile_limit=4):
        yield 4


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
