"""Fake of the C++ metrics arena behind ``torch_neuronx.metrics``.

Checked against ``torch_neuronx/csrc/core/metrics/NeuronMetrics.{h,cpp}`` and the bindings
in ``torch_neuronx/csrc/core/NeuronBindings.cpp:1146-1232`` (snapshot 98154b86):

- off unless ``TORCH_NEURONX_METRICS_ENABLED`` is one of ``1 true TRUE yes YES``, read once on
  the first check (``NeuronMetrics.cpp:59-83``); ``set_enabled`` toggles it at runtime;
- a name is registered on its first increment *while enabled* (the macros test the flag,
  ``NeuronMetrics.h:271-308``) and stays listed after a clear (value 0 / no samples);
- names are kept in a ``std::map``, so listings are sorted;
- metric samples: ring of the last 1024, ``total_samples``/``accumulator`` cumulative,
  ``timestamp_ns`` from ``steady_clock`` (here: ``time.monotonic_ns``);
- ``report()`` skips zero counters and metrics without samples.
"""
from __future__ import annotations

import math
import os
import threading
import time
from collections import deque
from collections.abc import Callable, Iterable
from typing import Any

METRICS_ENV = "TORCH_NEURONX_METRICS_ENABLED"
ENABLE_VALUES = ("1", "true", "TRUE", "yes", "YES")
MAX_SAMPLES = 1024


def fmt_value(value: float) -> str:
    """``MetricFnValue``: fixed, 2 decimals."""
    return f"{value:.2f}"


def fmt_bytes(value: float) -> str:
    """``MetricFnBytes``: B/KB/MB/GB/TB/PB with 2 decimals."""
    suffixes = ("B", "KB", "MB", "GB", "TB", "PB")
    index = 0
    while index + 1 < len(suffixes) and value >= 1024.0:
        value /= 1024.0
        index += 1
    return f"{value:.2f}{suffixes[index]}"


def fmt_time(value: float) -> str:
    """``MetricFnTime``: the value is in **nanoseconds**, e.g. ``02s500ms000.000us``."""
    parts = (("d", 86400e9, 2, 0), ("h", 3600e9, 2, 0), ("m", 60e9, 2, 0), ("s", 1e9, 2, 0),
             ("ms", 1e6, 3, 0), ("us", 1e3, 7, 3))
    out, count = [], 0
    for i, (suffix, scaler, width, precision) in enumerate(parts):
        ctime = value / scaler
        if ctime >= 1.0 or count > 0 or i + 1 == len(parts):
            out.append(f"{ctime:0{width}.{precision}f}{suffix}")
            value -= math.floor(ctime) * scaler
            count += 1
    return "".join(out)


class MetricData:
    """``NeuronMetricData``: a ring of samples plus cumulative count and sum."""

    def __init__(self, repr_fn: Callable[[float], str], max_samples: int = MAX_SAMPLES):
        self.repr_fn = repr_fn
        self.samples: deque[tuple[int, float]] = deque(maxlen=max_samples)
        self.count = 0
        self.accumulator = 0.0

    def add(self, timestamp_ns: int, value: float) -> None:
        self.count += 1
        self.accumulator += value
        self.samples.append((int(timestamp_ns), float(value)))

    def clear(self) -> None:
        self.samples.clear()
        self.count = 0
        self.accumulator = 0.0


class MetricsArena:
    """Counters and metrics, as ``NeuronMetricsArena`` plus the enable flag."""

    def __init__(self, env: dict[str, str] | None = None):
        self._env = env
        self._enabled: bool | None = None  # None: env not read yet (std::call_once)
        self._lock = threading.Lock()
        self.counters: dict[str, int] = {}
        self.metrics: dict[str, MetricData] = {}

    # ---------------------------------------------------------------- enable flag
    def is_enabled(self) -> bool:
        if self._enabled is None:
            env = os.environ if self._env is None else self._env
            self._enabled = env.get(METRICS_ENV) in ENABLE_VALUES
        return self._enabled

    def set_enabled(self, enabled: bool) -> None:
        self.is_enabled()  # the env is read once even when set first
        self._enabled = bool(enabled)

    # ---------------------------------------------------------------- recording (macros)
    def counter(self, name: str, value: int = 1) -> None:
        """``TORCH_NEURONX_COUNTER``: no-op while disabled."""
        if self.is_enabled():
            with self._lock:
                self.counters[name] = self.counters.get(name, 0) + int(value)

    def metric(self, name: str, value: float, repr_fn: Callable[[float], str] = fmt_value,
               timestamp_ns: int | None = None) -> None:
        """``TORCH_NEURONX_*METRIC``: one sample stamped now (or at ``timestamp_ns``)."""
        if self.is_enabled():
            with self._lock:
                data = self.metrics.setdefault(name, MetricData(repr_fn))
                data.add(time.monotonic_ns() if timestamp_ns is None else timestamp_ns, value)

    def clear_counter(self, name: str) -> None:
        with self._lock:
            if name in self.counters:
                self.counters[name] = 0

    def clear_metric(self, name: str) -> None:
        with self._lock:
            if name in self.metrics:
                self.metrics[name].clear()

    # ---------------------------------------------------------------- bindings
    def counter_names(self) -> list[str]:
        return sorted(self.counters)

    def counter_value(self, name: str) -> int | None:
        return self.counters.get(name)

    def metric_names(self) -> list[str]:
        return sorted(self.metrics)

    def metric_data(self, name: str) -> dict[str, Any] | None:
        data = self.metrics.get(name)
        if data is None:
            return None
        return {"accumulator": data.accumulator, "total_samples": data.count,
                "repr": data.repr_fn(data.accumulator),
                "samples": [{"timestamp_ns": ts, "value": v} for ts, v in data.samples]}

    def clear_counters(self) -> None:
        for name in list(self.counters):
            self.clear_counter(name)

    def clear_metrics(self) -> None:
        for name in list(self.metrics):
            self.clear_metric(name)

    def _emit_metric(self, name: str, data: MetricData) -> list[str]:
        lines = [f"Metric: {name}", f"  TotalSamples: {data.count}",
                 f"  Accumulator: {data.repr_fn(data.accumulator)}"]
        values = [v for _, v in data.samples]
        if values:
            lines += [f"  Mean: {data.repr_fn(sum(values) / len(values))}",
                      f"  Min: {data.repr_fn(min(values))}", f"  Max: {data.repr_fn(max(values))}"]
        return lines + [""]

    def report(self, counter_names: Iterable[str] | None = None,
               metric_names: Iterable[str] | None = None) -> str:
        """``CreateMetricReport``: all names, or (filtered) only the given ones, in that order."""
        filtered = counter_names is not None or metric_names is not None
        lines = ["=== Neuron Metrics Report (Filtered) ===" if filtered
                 else "=== Neuron Metrics Report ==="]
        metrics = list(metric_names or []) if filtered else self.metric_names()
        counters = list(counter_names or []) if filtered else self.counter_names()
        for name in metrics:
            data = self.metrics.get(name)
            if data is not None and data.count > 0:
                lines += self._emit_metric(name, data)
        for name in counters:
            value = self.counters.get(name)
            if value:
                lines += [f"Counter: {name}", f"  Value: {value}", ""]
        return "\n".join(lines) + "\n"
