"""A compile-cost model fitted on the user's own Neuron log: how many seconds neuronx-cc takes to
build one graph's NEFF, from the builds that log measured.

    cal = calibrate("neuron-run.jsonl")        # >= MIN_BUILDS builds, else a ValueError saying why
    cal.label    # calibrated on neuron-run.jsonl: seconds = 4.1 + 0.31 * ops (leave-one-out ...)
    cal.seconds(ops=900, nodes=1000)

A build is an event of a graph kind (first, recompile, backward) whose NEFF neuronx-cc built:
``neff_cache == "compiled"`` and ``neff_compile_s > 0`` (a cache hit is stored with 0 ms:
torch-neuronx snapshot ``core/compilation/CompilationCache.cpp:196-197,540-541``). Features:
Dynamo's ``metrics["dynamo"]["graph_op_count"]`` and ``graph_node_count`` and, where every build
has it, ``metrics["parameters"]``. Candidate models: the mean; linear in ops; linear in nodes;
a power law in ops (a straight line in log-log); linear in parameters. The one with the lowest
leave-one-out mean absolute error is chosen and that error is reported (seconds, and as a share
of the mean build), so a noisy log says so. Eager-kernel seconds come from the log's measured
``kernels`` events (``duration_s / kernels``, forecasts left out) where it has them.
"""
from __future__ import annotations

import math
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable, Sequence

import numpy as np

from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import is_synthetic, number, readable
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log

__all__ = ["MIN_BUILDS", "MODELS", "Calibration", "builds_of", "calibrate"]

MIN_BUILDS = 5  # fewer builds than this fit nothing worth stating
MEAN, OPS, NODES, POWER, PARAMS = ("mean", "linear in ops", "linear in nodes",
                                   "power law in ops", "linear in parameters")
MODELS: tuple[str, ...] = (MEAN, OPS, NODES, POWER, PARAMS)  # in order of preference on a tie
FEATURE = {MEAN: "", OPS: "ops", NODES: "nodes", POWER: "ops", PARAMS: "parameters"}


@dataclass(frozen=True)
class Build:
    """One measured NEFF build: its seconds and features (None where the log lacks one)."""

    seconds: float
    ops: float | None
    nodes: float | None
    parameters: float | None


@dataclass(frozen=True)
class Calibration:
    """A fitted model of one graph's NEFF build seconds. ``a``, ``b``: the model's parameters
    (mean: ``a``; linear: ``a + b * x``; power law: ``a * ops ** b``); ``loo_mae_s``: its
    leave-one-out mean absolute error over the ``n`` builds, ``loo_rel`` that error over the mean
    build (``mean_s``); ``candidates``: (model, its error) for every model fitted, best first;
    ``skipped``: why a model was not fitted; ``kernel_s``: measured seconds per eager kernel
    (None: the log has none), over ``kernels_measured`` kernels."""

    source: str
    model: str
    a: float
    b: float
    n: int
    mean_s: float
    loo_mae_s: float
    loo_rel: float
    candidates: tuple[tuple[str, float], ...]
    skipped: tuple[str, ...] = ()
    kernel_s: float | None = None
    kernels_measured: int = 0
    synthetic: bool = False

    @property
    def feature(self) -> str:
        """What the model reads: "ops", "nodes", "parameters", or "" (the mean)."""
        return FEATURE[self.model]

    @property
    def formula(self) -> str:
        """``seconds = 4.1 + 0.31 * ops``."""
        if self.model == MEAN:
            return f"seconds = {self.a:.3g} (the mean build)"
        if self.model == POWER:
            return f"seconds = {self.a:.3g} * ops ^ {self.b:.3g}"
        return f"seconds = {self.a:.3g} {'-' if self.b < 0 else '+'} {abs(self.b):.3g} * {self.feature}"

    @property
    def label(self) -> str:
        """The model named with its source, its leave-one-out error and how many builds."""
        note = " (a synthetic log, not a measurement)" if self.synthetic else ""
        error = f"{self.loo_mae_s:.3g}" if self.loo_mae_s >= 5e-4 else "0"  # not 1.4e-14
        return (f"calibrated on {self.source}{note}: {self.formula} (leave-one-out error "
                f"±{error} s, {self.loo_rel:.0%} of the mean build, {self.n} builds)")

    def seconds(self, ops: Any = None, nodes: Any = None, parameters: Any = None) -> float | None:
        """A graph's predicted build seconds (>= 0); None where it lacks the model's feature."""
        x = {"ops": ops, "nodes": nodes, "parameters": parameters, "": 0.0}[self.feature]
        x = number(x)
        if x is None or (self.model == POWER and x <= 0):
            return None
        return _predict(self.model, self.a, self.b, float(x))

    def to_dict(self) -> dict[str, Any]:
        return {"source": self.source, "model": self.model, "formula": self.formula,
                "a": self.a, "b": self.b, "builds": self.n, "mean_s": self.mean_s,
                "loo_mae_s": self.loo_mae_s, "loo_rel": self.loo_rel,
                "candidates": [{"model": m, "loo_mae_s": e} for m, e in self.candidates],
                "skipped": list(self.skipped), "kernel_s": self.kernel_s,
                "kernels_measured": self.kernels_measured, "synthetic": self.synthetic}


def _predict(model: str, a: float, b: float, x: float) -> float:
    if model == MEAN:
        return max(a, 0.0)
    if model == POWER:
        return max(a * x ** b, 0.0)
    return max(a + b * x, 0.0)


def _line(x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    """Least squares ``y = a + b * x``; flat x: the mean (b = 0)."""
    dx = x - x.mean()
    var = float(dx @ dx)
    if var <= 0.0:
        return float(y.mean()), 0.0
    b = float(dx @ (y - y.mean())) / var
    return float(y.mean()) - b * float(x.mean()), b


def _fit(model: str, x: np.ndarray, y: np.ndarray) -> tuple[float, float]:
    if model == MEAN:
        return float(y.mean()), 0.0
    if model == POWER:
        log_a, b = _line(np.log(x), np.log(y))
        return math.exp(log_a), b
    return _line(x, y)


def _loo_error(model: str, x: np.ndarray, y: np.ndarray) -> float:
    """The mean absolute error of predicting each build from a fit on all the others."""
    errors = []
    for i in range(len(y)):
        keep = np.arange(len(y)) != i
        a, b = _fit(model, x[keep], y[keep])
        errors.append(abs(_predict(model, a, b, float(x[i])) - float(y[i])))
    return float(np.mean(errors))


def builds_of(events: Sequence[CompileEvent]) -> list[Build]:
    """The events whose NEFF neuronx-cc built, with their seconds and features."""
    out = []
    for e in readable(list(events)):
        seconds = number(e.neff_compile_s)
        if e.kind not in BUILD_KINDS or e.neff_cache != "compiled" or not seconds or seconds <= 0:
            continue
        metrics = e.metrics if isinstance(e.metrics, dict) else {}
        found = metrics.get("dynamo")
        dynamo: dict[str, Any] = found if isinstance(found, dict) else {}
        out.append(Build(float(seconds), _positive(dynamo.get("graph_op_count")),
                         _positive(dynamo.get("graph_node_count")),
                         _positive(metrics.get("parameters"))))
    return out


def _positive(value: Any) -> float | None:
    n = number(value)
    return float(n) if n is not None and n >= 0 else None


def _too_few(source: str, events: Sequence[CompileEvent], n: int) -> ValueError:
    """Why a log cannot calibrate: what it holds instead of ``MIN_BUILDS`` measured builds."""
    graphs = [e for e in events if e.kind in BUILD_KINDS]
    states: dict[str, int] = {}
    for e in graphs:
        state = e.neff_cache if isinstance(e.neff_cache, str) else "no NEFF state"
        if e.neff_cache == "compiled" and not (number(e.neff_compile_s) or 0) > 0:
            state = "compiled without seconds"
        states[state] = states.get(state, 0) + 1
    held = ", ".join(f"{k} {v}" for k, v in sorted(states.items())) or "none"
    return ValueError(
        f"cannot calibrate on {source}: it holds {n} NEFF build(s) with their seconds, at least "
        f"{MIN_BUILDS} are needed (graph events whose neff_cache is \"compiled\" and "
        f"neff_compile_s > 0, kinds {'/'.join(BUILD_KINDS)}); its {len(graphs)} graph event(s) "
        f"by NEFF state: {held}. Record a run on Neuron with an empty NEFF cache "
        "(TORCH_NEURONX_NEFF_CACHE_DIR) so its graphs build")


def _kernel_seconds(events: Sequence[CompileEvent]) -> tuple[float | None, int]:
    """Measured seconds per eager kernel (kernels events with seconds, no forecasts)."""
    seconds, kernels = 0.0, 0
    for e in events:
        n, s = number(e.kernels), number(e.duration_s)
        if e.kind == "kernels" and not e.forecast and n and n > 0 and s and s > 0:
            seconds, kernels = seconds + float(s), kernels + int(n)
    return (seconds / kernels if kernels else None), kernels


def _choose(builds: list[Build]) -> tuple[list[tuple[str, float, float, float]], list[str]]:
    """Every model that can be fitted: (model, a, b, LOO error); and why the others cannot."""
    y = np.array([b.seconds for b in builds])
    fitted, skipped = [], []
    for model in MODELS:
        feature = FEATURE[model]
        values: list[float | None] = [0.0] * len(builds) if not feature else [
            getattr(b, feature) for b in builds]
        missing = sum(v is None or (model == POWER and v <= 0) for v in values)
        if missing:
            skipped.append(f"{model}: {missing} of {len(builds)} builds have no "
                           f"{'positive ' if model == POWER else ''}{feature} count")
            continue
        x = np.array(values, dtype=float)
        if feature and float(np.ptp(x)) == 0.0:
            skipped.append(f"{model}: every build has the same {feature} count")
            continue
        a, b = _fit(model, x, y)
        fitted.append((model, a, b, _loo_error(model, x, y)))
    scale = float(y.mean())
    order = sorted(fitted, key=lambda f: (round(f[3] / scale, 9), MODELS.index(f[0])))
    return order, skipped


def calibrate(log: CompileLog | str | os.PathLike[str], source: str | None = None,
              loader: Callable[[str | os.PathLike[str]], CompileLog] = open_log) -> Calibration:
    """Fit the build-seconds model on a Neuron log (a :class:`CompileLog` or a path opened as
    ``neuronkit report`` opens one). Fewer than ``MIN_BUILDS`` measured builds: a ValueError
    naming what the log holds instead."""
    if not isinstance(log, CompileLog):
        source = source or Path(log).name
        log = loader(log)
    source = source or (log.path.name if log.path is not None else "the calibration log")
    events = readable(log.events)
    builds = builds_of(events)
    if len(builds) < MIN_BUILDS:
        raise _too_few(source, events, len(builds))
    order, skipped = _choose(builds)
    model, a, b, error = order[0]
    mean_s = float(np.mean([x.seconds for x in builds]))
    kernel_s, kernels = _kernel_seconds(events)
    return Calibration(source=source, model=model, a=a, b=b, n=len(builds), mean_s=mean_s,
                       loo_mae_s=error, loo_rel=error / mean_s,
                       candidates=tuple((m, e) for m, _, _, e in order), skipped=tuple(skipped),
                       kernel_s=kernel_s, kernels_measured=kernels,
                       synthetic=is_synthetic(log.header))
