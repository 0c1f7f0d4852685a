"""Module objects of the fake: ``torch_neuronx``, its ``_C``, ``metrics``, ``neuron`` (= ``torch.neuron``)
and ``neuron_dynamo_backend``, all bound to one ``FakeTorchNeuronx``.

Checked against (snapshot 98154b86): ``torch_neuronx/__init__.py`` (version 1, ``_C`` callables
wrapped in ``torch._dynamo.disable`` 73-83, ``device_count/current_device/set_device`` 186-206,
``get_fallback_ops/get_executed_ops/clear_op_tracking`` 251-278, ``_get_device_index`` 281-300,
``synchronize`` 303-308; ``metrics`` is *not* imported there, 93), ``torch_neuronx/neuron.py``
(the ``torch.neuron`` module: ``is_available`` = ``device_count() > 0`` 63-70, ``set_device`` 22-33,
``synchronize`` 249-253, ``get_dynamo_metrics`` 429-440, ``is_bf16_supported`` 443-447),
``torch_neuronx/metrics.py`` (whole file) and ``csrc/core/NeuronBindings.cpp`` (713, 1014-1140,
1146-1232, 1280-1431 for the ``_C`` names and return shapes).
"""
from __future__ import annotations

import importlib.abc
import importlib.machinery
import inspect
import sys
import types
from typing import Any

from . import keys
from .dynamo import DynamoMetrics, create_neuron_backend
from .manager import run_python_eager
from .runtime import C, Runtime


class FakeTorchNeuronx(Runtime):
    """The handle tests hold: runtime state plus the module objects built on it."""

    version: str = "0.1.0"

    def build(self, version: str = "0.1.0") -> FakeTorchNeuronx:
        self.version = version
        self.module = _make_package(self, version)
        self.C = self.module._C
        self.dynamo = DynamoMetrics(self.module)
        self.module.get_dynamo_metrics = self.dynamo.get_dynamo_metrics
        self.module.reset_dynamo_metrics = self.dynamo.reset_dynamo_metrics
        self.backend = create_neuron_backend(self.module, self.dynamo)
        self.neuron = _make_device_module(self)
        self.module.neuron = self.neuron
        self.ndb, self.ndb_metrics, self.ndb_backend = _make_ndb(self)
        self.module.neuron_dynamo_backend = self.ndb
        return self

    @property
    def metrics(self) -> list:
        """The live list ``get_dynamo_metrics()`` copies (``ndb/metrics.py:217-227``)."""
        return self.dynamo.compilation_metrics

    def submodules(self) -> dict[str, types.ModuleType]:
        """Eagerly imported submodules, by ``sys.modules`` name (``metrics`` is lazy)."""
        cache = _module("torch_neuronx.python_ops.compilation.cache")
        cache._GLOBAL_CACHE = self.python_cache  # python_ops/compilation/cache.py:15
        return {"torch_neuronx": self.module, "torch_neuronx._C": self.C,
                "torch_neuronx.python_ops.compilation.cache": cache,
                "torch_neuronx.neuron": self.neuron,
                "torch_neuronx.neuron_dynamo_backend": self.ndb,
                "torch_neuronx.neuron_dynamo_backend.metrics": self.ndb_metrics,
                "torch_neuronx.neuron_dynamo_backend.backend": self.ndb_backend}

    def make_metrics_module(self) -> types.ModuleType:
        return _make_metrics(self)

    # ---------------------------------------------------------------- eager ops
    def run_eager_op(self, op_name: str, *inputs: Any, kwargs: dict[str, Any] | None = None,
                     static_indices: tuple[int, ...] | None = None,
                     static_argnames: tuple[str, ...] = ()) -> str:
        """One eager aten op on "neuron" (inputs are CPU stand-ins); returns its cache key.

        Async mode submits to the worker (the key appears in ``_get_all_cache_keys()`` once the
        worker ran, e.g. after ``synchronize()``). With ``NEURON_LAUNCH_BLOCKING=1`` the op takes
        the Python path (``kernel.py:785-806,925-934``): no C++ key, counter or entry; its key
        goes to ``python_cache`` instead.
        """
        py_key = keys.eager_python_key(op_name, *inputs, kwargs=kwargs,
                                       static_indices=static_indices,
                                       static_argnames=static_argnames)
        ir = f"module @{op_name} {py_key}".encode()
        self.initialized = True  # its inputs live on the device: allocating them initialized it
        if self.launch_blocking:
            run_python_eager(self, op_name, py_key, ir)
            return py_key
        self.C._submit_xla_task_to_pipeline(op_name, list(inputs), [], ir, None, py_key, "",
                                            False, None)
        return keys.final_key(py_key, self.instance_type, keys.EAGER_OPT)


    def run_unimplemented_op(self, op_name: str) -> None:
        """An op with no Neuron kernel: the boxed CPU fallback, no compile, no cache
        (``csrc/core/NeuronBindings.cpp:232-246,483-484``); the op is tracked as a fallback."""
        self.fallback_ops.add(op_name)


def _module(name: str, doc: str = "", package: bool = False) -> types.ModuleType:
    module = types.ModuleType(name, doc)
    module.__spec__ = importlib.machinery.ModuleSpec(name, None, is_package=package)
    module.__file__ = f"<neuron_fake:{name}>"
    if package:
        module.__path__ = []
    return module


def _set(module: types.ModuleType, **functions: Any) -> None:
    for name, fn in functions.items():
        setattr(module, name, fn)


def _make_c(fake: FakeTorchNeuronx) -> types.ModuleType:
    import torch

    c = _module("torch_neuronx._C", "Fake native extension.")

    def set_device(device: int) -> None:
        fake.current = int(device)

    def init() -> None:
        fake.initialized = True

    def cache_stats() -> dict[str, Any]:
        get = lambda n: fake.arena.counter_value(C + n) or 0  # noqa: E731
        hits = get("InMemoryHits") + get("PersistentHits")
        misses = get("InMemoryMisses") + get("PersistentMisses")
        time_data = fake.arena.metric_data(C + "CompilationTime")
        usage = fake.memory_usage()
        limit = fake.max_cache_size_bytes
        return {"total_entries": len(fake.entries), "in_memory_hits": get("InMemoryHits"),
                "in_memory_misses": get("InMemoryMisses"),
                "persistent_hits": get("PersistentHits"),
                "persistent_misses": get("PersistentMisses"),
                "cache_hits": hits, "cache_misses": misses,
                "hit_rate": hits / (hits + misses) if hits + misses else 0.0,
                "memory_usage_bytes": usage,
                # ⚠ source: accumulator / 1000 "µs -> ms", but samples are ns: this is µs.
                "total_compilation_time_ms":
                    (time_data["accumulator"] if time_data else 0.0) / 1000.0,
                "evictions_performed": get("Evictions"),
                "total_compilations": get("TotalCompilations"),
                "max_cache_size_bytes": limit, "max_cache_entries": fake.max_cache_entries,
                "memory_utilization_ratio": usage / limit if limit else 0.0}

    def cache_entries() -> list[dict[str, Any]]:  # real order: unordered_map; here: insertion
        return [{"cache_key": k, "neff_size_bytes": len(e.neff), "access_count": e.access_count,
                 "compilation_time_ms": e.compilation_time_ms} for k, e in fake.entries.items()]

    def submit_xla(op_name: str, inputs: list, outputs: list, lowered_ir_bytes: bytes,
                   stream: Any, cache_key: str, python_stack_trace: str, has_collectives: bool,
                   cpu_fallback_context: Any = None) -> None:
        fake.submit_eager(op_name, cache_key, lowered_ir_bytes)

    def neff_info(cache_key: str) -> tuple[str, bytes] | None:
        entry = fake.entries.get(cache_key)
        return None if entry is None else (entry.persistent_key, entry.neff)

    def put_neff_cache(key: str, neff_bytes: bytes) -> bool:
        return fake._disk_put(key, bytes(neff_bytes))

    def created(name: str, fn: Any) -> Any:  # each calls NeuronResourceManager::Instance()
        def call(*args: Any) -> Any:
            fake.manager(name)
            return fn(*args)
        return call

    cache_stats = created("_get_compilation_cache_stats", cache_stats)
    cache_entries = created("_get_compilation_cache_entries", cache_entries)
    neff_info = created("get_neff_info", neff_info)
    put_neff_cache = created("put_neff_cache", put_neff_cache)
    _set(c,
         _register_device=lambda: None, _register_profiler=lambda: None,
         _set_python_ops_registered=lambda value: None,
         _neuron_init=init, _is_neuron_runtime_initialized=lambda: fake.initialized,
         _neuron_getDeviceCount=lambda: fake.count,
         _neuron_getCurrentDevice=lambda: fake.current, _neuron_setDevice=set_device,
         _neuron_synchronize=lambda device_index=-1: fake.synchronize(device_index),
         _get_instance_type=lambda: fake.instance_type,
         _get_platform_target=lambda: keys.platform(fake.instance_type)[0],
         _get_logical_neuron_cores=lambda: keys.platform(fake.instance_type)[1],
         _get_compilation_cache_stats=cache_stats,
         _get_compilation_cache_entries=cache_entries,
         _get_all_cache_keys=created("_get_all_cache_keys", lambda: set(fake.entries)),
         _clear_compilation_cache=fake.clear_cache,
         _clear_compilation_memory_cache=fake.clear_memory_cache,
         _submit_xla_task_to_pipeline=submit_xla,
         compile_graph=lambda base_cache_key, stablehlo_bytes, has_collectives:
             fake.submit_graph(base_cache_key, stablehlo_bytes, has_collectives),
         execute_compiled_graph=lambda graph_name, cache_key, inputs, outputs, has_collectives:
             fake.submit_execute(graph_name, cache_key),
         get_neff_info=neff_info, get_neff_cache=created("get_neff_cache", fake._disk_get),
         put_neff_cache=put_neff_cache,
         _get_executed_ops=lambda: sorted(fake.executed_ops),
         _get_fallback_ops=lambda: sorted(fake.fallback_ops),
         _clear_op_tracking=lambda: (fake.executed_ops.clear(), fake.fallback_ops.clear())[-1],
         _neuron_counter_names=fake.arena.counter_names,
         _neuron_counter_value=fake.arena.counter_value,
         _neuron_metric_names=fake.arena.metric_names,
         _neuron_metric_data=fake.arena.metric_data,
         _neuron_metrics_report=lambda: fake.arena.report(),
         _neuron_metrics_report_filtered=lambda counter_names, metric_names:
             fake.arena.report(list(counter_names), list(metric_names)),
         _neuron_clear_counters=fake.arena.clear_counters,
         _neuron_clear_metrics=fake.arena.clear_metrics,
         _neuron_metrics_enabled=fake.arena.is_enabled,
         _neuron_set_metrics_enabled=lambda enabled: fake.arena.set_enabled(enabled))
    for name in dir(c):  # tn/__init__.py:73-83
        obj = getattr(c, name)
        if callable(obj) and not inspect.isclass(obj) and not name.startswith("__"):
            setattr(c, name, torch._dynamo.disable(obj))
    return c


def _make_package(fake: FakeTorchNeuronx, version: str) -> types.ModuleType:
    import torch

    tn = _module("torch_neuronx", "Fake torch-neuronx (native TorchNeuron).", package=True)
    tn.__version__ = version
    tn._C = _make_c(fake)
    tn._real_torch_device = torch.device

    def device_count() -> int:
        return tn._C._neuron_getDeviceCount()

    def set_device(device: int) -> None:
        if device < 0 or device >= device_count():
            raise ValueError(
                f"Invalid device id: {device}. Valid range is 0 to {device_count() - 1}")
        tn._C._neuron_setDevice(device)

    def _get_device_index(device: Any, optional: bool = False, allow_cpu: bool = False) -> Any:
        if device is None:
            return None if optional else tn.current_device()
        if isinstance(device, str):
            try:
                device = torch.device(device)
            except RuntimeError:  # "neuron" is unknown until PrivateUse1 is renamed
                kind, _, index = device.partition(":")
                if kind != "neuron":
                    raise ValueError(f"Expected neuron device, got {kind}") from None
                return int(index) if index else tn.current_device()
        if isinstance(device, torch.device):
            if device.type != "neuron":
                raise ValueError(f"Expected neuron device, got {device.type}")
            return device.index if device.index is not None else tn.current_device()
        if isinstance(device, int):
            return device
        raise ValueError(f"Invalid device specification: {device}")

    def synchronize(device: Any = None) -> None:
        """Wait for all kernels in all streams on a Neuron device to complete."""
        index = _get_device_index(device, optional=True)
        tn._C._neuron_synchronize(-1 if index is None else index)

    def _lazy_init() -> None:
        if not fake.initialized:
            tn._C._neuron_init()

    _set(tn, device_count=device_count, set_device=set_device,
         current_device=lambda: tn._C._neuron_getCurrentDevice(),
         is_neuron_runtime_initialized=lambda: tn._C._is_neuron_runtime_initialized(),
         _lazy_init=_lazy_init, _get_device_index=_get_device_index, synchronize=synchronize,
         get_fallback_ops=lambda: tn._C._get_fallback_ops(),
         get_executed_ops=lambda: tn._C._get_executed_ops(),
         clear_op_tracking=lambda: tn._C._clear_op_tracking(), _is_loaded=True)
    return tn


def _make_device_module(fake: FakeTorchNeuronx) -> types.ModuleType:
    import torch

    tn = fake.module
    neuron = _module("torch_neuronx.neuron", "Fake torch.neuron device module.")

    def set_device(device: Any) -> None:
        index = getattr(device, "index", device)
        tn.set_device(tn.current_device() if index is None else index)

    def is_available() -> bool:
        try:
            return tn.device_count() > 0
        except Exception:
            return False

    def get_device_name(device: Any = 0) -> str:
        if isinstance(device, torch.device):
            return str(device)
        if isinstance(device, int):
            return f"neuron:{device}"
        raise ValueError("Incorrect device argument found, expected torch.device or int type, "
                         f"found {type(device)}")

    def synchronize(device: Any = None) -> None:
        tn.synchronize(device)

    def get_dynamo_metrics() -> list:
        return tn.get_dynamo_metrics()

    _set(neuron, is_initialized=lambda: tn.is_neuron_runtime_initialized(),
         current_device=lambda: tn._C._neuron_getCurrentDevice(), set_device=set_device,
         get_device_name=get_device_name, device_count=lambda: tn.device_count(),
         is_available=is_available, init=lambda: tn._lazy_init(),
         get_amp_supported_dtype=lambda: [torch.float32, torch.float16, torch.bfloat16],
         synchronize=synchronize, get_dynamo_metrics=get_dynamo_metrics,
         reset_dynamo_metrics=lambda: tn.reset_dynamo_metrics(),
         empty_cache=lambda: None,  # tn/neuron.py empty_cache -> torch_neuronx.empty_cache()
         is_bf16_supported=lambda: True)  # unconditionally, as tn/neuron.py:443-447
    return neuron


def _make_ndb(fake: FakeTorchNeuronx) -> tuple[types.ModuleType, ...]:
    from .dynamo import LazyTimingList, NeuronCompilationMetrics

    ndb = _module("torch_neuronx.neuron_dynamo_backend", package=True)
    metrics = _module("torch_neuronx.neuron_dynamo_backend.metrics")
    backend = _module("torch_neuronx.neuron_dynamo_backend.backend")
    _set(metrics, NeuronCompilationMetrics=NeuronCompilationMetrics,
         LazyTimingList=LazyTimingList, record_compilation=fake.dynamo.record_compilation,
         get_dynamo_metrics=fake.dynamo.get_dynamo_metrics,
         reset_dynamo_metrics=fake.dynamo.reset_dynamo_metrics,
         _compilation_metrics=fake.dynamo.compilation_metrics)
    _set(backend, neuron_backend=fake.backend,
         create_neuron_backend=lambda: create_neuron_backend(fake.module, fake.dynamo))
    _set(ndb, metrics=metrics, backend=backend, neuron_backend=fake.backend,
         get_dynamo_metrics=fake.dynamo.get_dynamo_metrics,
         reset_dynamo_metrics=fake.dynamo.reset_dynamo_metrics)
    return ndb, metrics, backend


def _make_metrics(fake: FakeTorchNeuronx) -> types.ModuleType:
    c = fake.C
    met = _module("torch_neuronx.metrics", "Fake Neuron Metrics Python API.")

    def get_compilation_metrics() -> dict[str, Any]:
        result: dict[str, Any] = {}
        for name in met.get_counter_names():
            if "Compilation" in name:
                result[name] = met.get_counter_value(name)
        for name in met.get_metric_names():
            if "Compilation" in name:
                data = met.get_metric_data(name)
                if data:
                    result[name] = {"accumulator": data["accumulator"],
                                    "total_samples": data["total_samples"],
                                    "formatted": data["repr"]}
        return result

    _set(met, is_enabled=lambda: c._neuron_metrics_enabled(),
         set_enabled=lambda enabled: c._neuron_set_metrics_enabled(enabled),
         get_counter_names=lambda: c._neuron_counter_names(),
         get_counter_value=lambda name: c._neuron_counter_value(name),
         get_metric_names=lambda: c._neuron_metric_names(),
         get_metric_data=lambda name: c._neuron_metric_data(name),
         report=lambda: c._neuron_metrics_report(),
         report_filtered=lambda counter_names=None, metric_names=None:
             c._neuron_metrics_report_filtered(counter_names or [], metric_names or []),
         clear_counters=lambda: c._neuron_clear_counters(),
         clear_metrics=lambda: c._neuron_clear_metrics(),
         clear_all=lambda: (c._neuron_clear_counters(), c._neuron_clear_metrics())[-1],
         get_compilation_metrics=get_compilation_metrics)
    return met


class LazySubmodules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Lets ``import torch_neuronx.metrics`` build the metrics module on first import only."""

    def __init__(self, fake: FakeTorchNeuronx):
        self.fake = fake
        self.builders = {"torch_neuronx.metrics": fake.make_metrics_module}

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        if fullname in self.builders and sys.modules.get("torch_neuronx") is self.fake.module:
            return importlib.machinery.ModuleSpec(fullname, self)
        return None

    def create_module(self, spec: Any) -> types.ModuleType:
        module = self.builders[spec.name]()
        module.__spec__ = spec
        return module

    def exec_module(self, module: types.ModuleType) -> None:
        pass
