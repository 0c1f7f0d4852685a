"""``installed_fake()``: put the fake into ``sys.modules``, ``torch.neuron`` and dynamo's backend
registry, and take every trace of it out again afterwards.

The backend is registered as the real one is, through the ``torch_dynamo_backends`` entry-point
table (``torch._dynamo.backends.registry._BACKENDS``), which ``lookup_backend("neuron")`` loads
and passes to ``register_backend`` on first use. ``register_backend`` refuses duplicate names,
so any earlier ``neuron`` entry is set aside and restored on exit.

The PrivateUse1 device name is *not* changed. The real package calls
``torch.utils.rename_privateuse1_backend("neuron")`` (``tn/__init__.py:119``), but torch cannot undo
that for the rest of the process, and without a registered PrivateUse1 backend it breaks every later
``torch.compile`` (dynamo asks ``torch.accelerator.current_stream()`` -> "PyTorch is not linked with
support for neuron devices"; checked with torch 2.13). So ``torch.device("neuron")`` does not
parse under the fake; ``torch_neuronx.synchronize("neuron:1")`` still works (the fake parses it).
"""
from __future__ import annotations

import os
import sys
import tempfile
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from .dynamo import FakeEntryPoint
from .modules import FakeTorchNeuronx, LazySubmodules
from .worker import WorkerThread

_MISSING = object()
_TIMING_KEYS = ("torch_neuronx_compile", "torch_neuronx_fx_passes", "torch_neuronx_lower")


def _env_flag(env: Mapping[str, str], name: str, default: bool) -> bool:
    value = env.get(name)
    return default if value is None else value in ("1", "true")


def make_fake(*, device_count: int = 2, version: str = "0.1.0",
              instance_type: str = "trn2", compile_duration_s: float = 2.0,
              compile_outcome: str = "compiled", metrics_enabled: bool | None = None,
              launch_blocking: bool | None = None, use_disk: bool = False,
              cache_dir: Path | str | None = None, local_cache_dir: Path | str | None = None,
              real_sleep: bool = False, env: Mapping[str, str] | None = None,
              persistent_enabled: bool | None = None, threaded: bool = False) -> FakeTorchNeuronx:
    """A built, not installed, fake. Unset options follow the environment as the source reads it.

    ``launch_blocking``: ``NEURON_LAUNCH_BLOCKING == "1"``, read when the fake is built (after
    ``installed_fake`` applied the build's default). ``metrics_enabled``:
    ``TORCH_NEURONX_METRICS_ENABLED``. ``use_disk``: write real files under ``cache_dir`` /
    ``local_cache_dir``, else the persistent cache lives in memory. The cache folders, the disable
    switch and the size limits are read when the resource manager is created (manager.py), not
    here, unless given. ``threaded``: the compile worker runs on a thread of its own (worker.py).
    """
    source = os.environ if env is None else env
    fixed: dict[str, Any] = {}
    if cache_dir is not None:
        fixed["cache_dir"] = Path(cache_dir)
    if local_cache_dir is not None:
        fixed["local_cache_dir"] = Path(local_cache_dir)
    if persistent_enabled is not None:
        fixed["persistent_enabled"] = persistent_enabled
    fake = FakeTorchNeuronx(
        count=device_count, instance_type=instance_type,
        compile_duration_s=compile_duration_s, compile_outcome=compile_outcome,
        launch_blocking=(source.get("NEURON_LAUNCH_BLOCKING") == "1" if launch_blocking is None
                         else launch_blocking),
        fallback_enabled=_env_flag(source, "NEURON_FALLBACK_ENABLED", True),
        real_sleep=real_sleep, use_disk=use_disk, fixed=fixed, env=env)
    fake.build(version)
    if threaded:
        fake.worker = WorkerThread(fake)
    if metrics_enabled is not None:
        fake.arena.set_enabled(metrics_enabled)
    return fake


_SET_ENV = ("NEURON_LAUNCH_BLOCKING", "TORCH_NEURONX_NEFF_CACHE_DIR",
            "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR")


def _import_defaults(build_type: str, launch_blocking: bool | None) -> None:
    """What ``import torch_neuronx`` sets: the build's sync-mode default with ``setdefault``
    (``tn/_build_config.py:7-11``, ``tn/__init__.py:46``: RELEASE "1", DEV "0"); an explicit
    ``launch_blocking`` stands for the user's own setting. The NEFF folders default to a fresh
    temporary folder here (the source's ``/tmp/neff_cache``), so a test never writes the machine's."""
    if build_type not in ("RELEASE", "DEV"):
        raise ValueError(f"build_type must be RELEASE or DEV, got {build_type!r}")
    if launch_blocking is not None:
        os.environ["NEURON_LAUNCH_BLOCKING"] = "1" if launch_blocking else "0"
    os.environ.setdefault("NEURON_LAUNCH_BLOCKING", "1" if build_type == "RELEASE" else "0")
    if "TORCH_NEURONX_NEFF_CACHE_DIR" not in os.environ:
        root = Path(tempfile.mkdtemp(prefix="neuron_fake_"))
        os.environ["TORCH_NEURONX_NEFF_CACHE_DIR"] = str(root / "neff_cache")
        os.environ.setdefault("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(root / "local_cache"))


def _restore_env(saved: dict[str, str | None]) -> None:
    for name, value in saved.items():
        if value is None:
            os.environ.pop(name, None)
        else:
            os.environ[name] = value


@contextmanager
def installed_fake(*, reset_dynamo: bool = True, **options: Any) -> Iterator[FakeTorchNeuronx]:
    """Install a fresh fake (options as ``make_fake``); restore everything on exit."""
    import torch
    import torch._dynamo
    from torch._dynamo.backends import registry
    from torch._dynamo.utils import compilation_time_metrics, counters, cumulative_time_spent_ns

    saved_env = {n: os.environ.get(n) for n in _SET_ENV}
    _import_defaults(options.pop("build_type", "RELEASE"), options.get("launch_blocking"))
    fake = make_fake(**options)
    finder = LazySubmodules(fake)
    names = [*fake.submodules(), "torch_neuronx.metrics", "torch.neuron"]
    saved_modules = {n: sys.modules.get(n, _MISSING) for n in names}
    saved_attr = torch.__dict__.get("neuron", _MISSING)
    saved_backend = (registry._BACKENDS.get("neuron", _MISSING),
                     registry._COMPILER_FNS.get("neuron", _MISSING))
    saved_counters = dict(counters["neuron"]) if "neuron" in counters else _MISSING
    saved_timing = {k: compilation_time_metrics.get(k, _MISSING) for k in _TIMING_KEYS}
    saved_cumulative = cumulative_time_spent_ns.get("torch_neuronx_compile", _MISSING)

    if reset_dynamo:
        torch._dynamo.reset()
    for name in names:
        sys.modules.pop(name, None)
    sys.modules.update(fake.submodules())
    sys.modules["torch.neuron"] = fake.neuron
    torch.neuron = fake.neuron
    sys.meta_path.insert(0, finder)
    registry._COMPILER_FNS.pop("neuron", None)
    registry._BACKENDS["neuron"] = FakeEntryPoint("neuron", fake.backend)
    counters.pop("neuron", None)
    for key in _TIMING_KEYS:
        compilation_time_metrics.pop(key, None)
    try:
        yield fake
    finally:
        _restore_env(saved_env)
        fake.stop_worker()
        fake.queue.clear()  # pending async work dies with the "process"
        if reset_dynamo:
            torch._dynamo.reset()
        if finder in sys.meta_path:
            sys.meta_path.remove(finder)
        for name, module in saved_modules.items():
            if module is _MISSING:
                sys.modules.pop(name, None)
            else:
                sys.modules[name] = module
        if saved_attr is _MISSING:
            torch.__dict__.pop("neuron", None)
        else:
            torch.neuron = saved_attr
        for table, value in zip((registry._BACKENDS, registry._COMPILER_FNS), saved_backend, strict=True):
            if value is _MISSING:
                table.pop("neuron", None)
            else:
                table["neuron"] = value
        counters.pop("neuron", None)
        if saved_counters is not _MISSING:
            counters["neuron"].update(saved_counters)
        for key, value in saved_timing.items():
            if value is _MISSING:
                compilation_time_metrics.pop(key, None)
            else:
                compilation_time_metrics[key] = value
        if saved_cumulative is _MISSING:
            cumulative_time_spent_ns.pop("torch_neuronx_compile", None)
        else:
            cumulative_time_spent_ns["torch_neuronx_compile"] = saved_cumulative
