"""The torch.compile side: per-graph metrics and the ``neuron`` dynamo backend.

Checked against (snapshot 98154b86):

- ``torch_neuronx/neuron_dynamo_backend/metrics.py``: ``NeuronCompilationMetrics`` (153-177),
  ``record_compilation`` (184-201: ``counters["neuron"]["compiled_graphs"]`` and
  ``["graphs_with_collectives"]``), ``get_dynamo_metrics`` (217-227: ``torch_neuronx.synchronize()``
  first, then fills every zero ``torch_neuronx_compile_us`` from
  ``_C._get_compilation_cache_entries()`` as ms*1000, returns a shallow copy of live objects),
  ``reset_dynamo_metrics`` (301-309), ``LazyTimingList`` (45-81, 269-298).
- ``torch_neuronx/neuron_dynamo_backend/backend.py``: the wrapper (285-305: non-default mode
  warns, ``options.setdefault("dynamic", False)``, ``aot_autograd`` with
  ``keep_inference_input_mutations=True`` and no ``bw_compiler``) and the per-graph compiler
  (122-249: ``dynamo_timed("torch_neuronx_fx_passes")``, timestamp segment id,
  ``model_name = options.get("model_name", "model_default")``, graph name from
  ``get_aot_graph_name()``, ``dynamo_timed("torch_neuronx_lower")``, ``_C.compile_graph`` which
  only submits, ``record_compilation``, an executor that submits ``execute_compiled_graph``).
  Registered through the ``torch_dynamo_backends`` entry point ``neuron`` (``pyproject.toml:14-18``).

The fake lowers nothing: the "IR" is the FX code, and the graph runs eagerly on CPU via
``gm.forward``. It never calls ``synchronize`` itself.
"""
from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from . import keys

COLLECTIVES = ("all_reduce", "all_gather", "reduce_scatter", "all_to_all")


@dataclass
class NeuronCompilationMetrics:
    """Per-graph compilation metrics (field names and order as in the source)."""

    graph_id: str
    graph_name: str = ""
    model_name: str = ""
    has_collectives: bool = False
    graph_node_count: int = 0
    timestamp: str = ""
    torch_neuronx_fx_passes_us: int = 0
    torch_neuronx_lower_us: int = 0
    torch_neuronx_compile_us: int = 0


class LazyTimingList(list):
    """A list that re-resolves (and so synchronizes) on access when the count changed."""

    def __init__(self, resolver: Callable[[], list[float]], get_count: Callable[[], int]):
        super().__init__()
        self._resolver = resolver
        self._get_count = get_count
        self._last_count = 0
        self._resolve_lock = threading.Lock()

    def _ensure_resolved(self) -> None:
        with self._resolve_lock:
            current = self._get_count()
            if current != self._last_count:
                self.clear()
                self.extend(self._resolver())
                self._last_count = current

    def __iter__(self):
        self._ensure_resolved()
        return super().__iter__()

    def __getitem__(self, idx):
        self._ensure_resolved()
        return super().__getitem__(idx)

    def __len__(self) -> int:
        self._ensure_resolved()
        return super().__len__()

    def __repr__(self) -> str:
        self._ensure_resolved()
        return super().__repr__()


class DynamoMetrics:
    """``neuron_dynamo_backend.metrics`` state; ``module`` is the fake ``torch_neuronx``."""

    def __init__(self, module: Any):
        self.module = module
        self._lock = threading.Lock()
        self.compilation_metrics: list[NeuronCompilationMetrics] = []

    def _last_phase_us(self, phase: str) -> int:
        from torch._dynamo.utils import compilation_time_metrics

        times = compilation_time_metrics.get(phase, [])
        return int(times[-1] * 1_000_000) if times else 0

    def _compile_ms(self, cache_key: str) -> int:
        entries = self.module._C._get_compilation_cache_entries()
        return next((e["compilation_time_ms"] for e in entries if e["cache_key"] == cache_key), 0)

    def record_compilation(self, metrics: NeuronCompilationMetrics) -> None:
        from torch._dynamo.utils import counters

        self.register_lazy_timing_list()
        metrics.torch_neuronx_fx_passes_us = self._last_phase_us("torch_neuronx_fx_passes")
        metrics.torch_neuronx_lower_us = self._last_phase_us("torch_neuronx_lower")
        with self._lock:
            self.compilation_metrics.append(metrics)
            counters["neuron"]["compiled_graphs"] += 1
            if metrics.has_collectives:
                counters["neuron"]["graphs_with_collectives"] += 1

    def get_dynamo_metrics(self) -> list[NeuronCompilationMetrics]:
        """Synchronizes (through the module attribute, as the source does), then fills times."""
        self.module.synchronize()
        with self._lock:
            for m in self.compilation_metrics:
                if m.torch_neuronx_compile_us == 0:
                    m.torch_neuronx_compile_us = self._compile_ms(m.graph_id) * 1000
            return list(self.compilation_metrics)

    def reset_dynamo_metrics(self) -> None:
        from torch._dynamo.utils import counters

        with self._lock:
            self.compilation_metrics.clear()
            counters["neuron"].clear()

    def _resolve_compile_timing(self) -> list[float]:
        from torch._dynamo.utils import cumulative_time_spent_ns

        self.module.synchronize()
        with self._lock:
            result = []
            for m in self.compilation_metrics:
                if m.torch_neuronx_compile_us == 0:
                    m.torch_neuronx_compile_us = self._compile_ms(m.graph_id) * 1000
                result.append(m.torch_neuronx_compile_us / 1_000_000)
            cumulative_time_spent_ns["torch_neuronx_compile"] = sum(result) * 1e9
            return result

    def _count(self) -> int:
        with self._lock:
            return len(self.compilation_metrics)

    def register_lazy_timing_list(self) -> None:
        from torch._dynamo.utils import compilation_time_metrics

        if "torch_neuronx_compile" not in compilation_time_metrics:
            compilation_time_metrics["torch_neuronx_compile"] = LazyTimingList(
                self._resolve_compile_timing, self._count)


def has_collectives_in_graph(gm: Any) -> bool:
    """``_has_collectives_in_graph``: a call_function whose name contains a collective."""
    for node in gm.graph.nodes:
        if node.op == "call_function":
            name = getattr(node.target, "__name__", str(node.target))
            if any(c in name for c in COLLECTIVES):
                return True
    return False


def _input_specs(example_inputs: list[Any]) -> list[tuple[tuple[int, ...], str]]:
    return [(tuple(getattr(x, "shape", ())), str(getattr(x, "dtype", type(x).__name__)))
            for x in example_inputs]


def create_neuron_backend(module: Any, dynamo_metrics: DynamoMetrics) -> Callable[..., Any]:
    """The ``neuron`` backend bound to one fake ``torch_neuronx`` module."""
    from functorch.compile import make_boxed_func
    from torch._dynamo.backends.common import aot_autograd
    from torch._dynamo.utils import dynamo_timed
    from torch._functorch._aot_autograd.logging_utils import get_aot_graph_name

    def fx_compiler(gm: Any, example_inputs: list[Any], options: dict[str, Any]) -> Any:
        with dynamo_timed("torch_neuronx_fx_passes"):
            pass  # post-AOT FX passes: nothing to do on CPU
        segment_id = datetime.now().strftime("%Y%m%d_%H%M%S_%f")
        model_name = options.get("model_name", "model_default")
        aot_name = get_aot_graph_name()
        compile_id = aot_name.split("__", 1)[-1] if "__" in aot_name else aot_name
        graph_name = f"{model_name}_{compile_id}"
        try:
            has_collectives = has_collectives_in_graph(gm)
            with dynamo_timed("torch_neuronx_lower"):
                ir = gm.code.encode("utf-8")
                base_key = keys.graph_base_key(gm.code, _input_specs(example_inputs))
            final_key = module._C.compile_graph(base_key, ir, has_collectives)
            dynamo_metrics.record_compilation(NeuronCompilationMetrics(
                graph_id=final_key, graph_name=graph_name, model_name=model_name,
                has_collectives=has_collectives, graph_node_count=len(gm.graph.nodes),
                timestamp=segment_id))

            def execution_wrapper(*inputs: Any) -> Any:
                module._C.execute_compiled_graph(model_name, final_key, list(inputs), [],
                                                 has_collectives)
                return gm.forward(*inputs)

            return make_boxed_func(execution_wrapper)
        except Exception as e:
            raise RuntimeError(
                f"Neuron backend NEFF execution setup failed with unexpected error: {e}") from e

    def neuron_backend(gm: Any, example_inputs: list[Any], *, options: dict | None = None,
                       mode: str = "default") -> Any:
        if mode != "default":
            logging.warning(f"Neuron backend does not support mode='{mode}', "
                            "falling back to default mode.")
        options = {} if options is None else options
        options.setdefault("dynamic", False)
        aot_backend = aot_autograd(
            fw_compiler=lambda g, inputs: fx_compiler(g, inputs, options),
            keep_inference_input_mutations=True)
        return aot_backend(gm, example_inputs)

    return neuron_backend


class FakeEntryPoint:
    """Stands in for the ``torch_dynamo_backends`` entry point; torch calls ``load()`` lazily."""

    def __init__(self, name: str, backend: Callable[..., Any]):
        self.name = name
        self.value = "torch_neuronx.neuron_dynamo_backend.backend:neuron_backend"
        self.group = "torch_dynamo_backends"
        self._backend = backend

    def load(self) -> Callable[..., Any]:
        return self._backend
