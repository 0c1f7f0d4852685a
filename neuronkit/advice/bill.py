"""The compile bill of a run: what Neuron would build for it, and the seconds that would take,
priced by a model that is always named (never a measurement).

    bill = compile_bill(log)                          # assumed: 60 s a graph, 2 s a kernel
    bill = compile_bill(log, calibrate(neuron_log))   # fitted on the user's own Neuron builds

Counted from the log: forward graphs (kinds first/recompile) and backward graphs (kind
backward: the neuron backend is AOTAutograd-based, torch-neuronx snapshot
``neuron_dynamo_backend/backend.py:300-305``, so each graph whose outputs need gradients gets a
backward build), eager-op kernels (``kernels`` events; forecast ones on a run off Neuron), graph
breaks, and graphs refused on Neuron (``metrics["refused_on_neuron"]``: symbolic shapes, which the
neuron backend rejects, ``neuron_dynamo_backend/fx/passes/dynamic_shape_analysis.py:95-118``;
these would fail, so they are listed and not priced). Each row is a function.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from neuronkit.advice.calibrate import Calibration
from neuronkit.events.event import BUILD_KINDS, GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import function_labels, number, readable, text_of
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S

__all__ = ["DEFAULT_KERNEL_COST_S", "Bill", "BillRow", "Refusal", "as_neuron_of", "compile_bill"]

# Assumed seconds one eager-op kernel takes to build on Neuron: the project's own assumption,
# ``bench/generation.py --kernel-cost-s`` (default 2, "an assumption, not a measurement") and
# docs/testing.md ("an eager kernel at an assumed 2 s"). Eager kernels build at -O1
# (torch-neuronx snapshot ``csrc/core/KernelExecution.cpp:65-83``), one small op each.
DEFAULT_KERNEL_COST_S = 2.0
ASSUMED_GRAPH = (f"{DEFAULT_COMPILE_COST_S:g} s per graph "
                 "(workloads/shapes.DEFAULT_COMPILE_COST_S)")
ASSUMED_KERNEL = f"{DEFAULT_KERNEL_COST_S:g} s per eager kernel (bench/generation.py --kernel-cost-s)"


@dataclass
class BillRow:
    """One function's share of the bill: graphs it would build (forward, backward), eager
    kernels, graph breaks, graphs refused on Neuron, and their priced seconds."""

    function: str
    location: str = ""
    forward: int = 0
    backward: int = 0
    kernels: int = 0
    graph_breaks: int = 0
    refused: int = 0
    graph_s: float = 0.0
    kernel_s: float = 0.0

    @property
    def total_s(self) -> float:
        return self.graph_s + self.kernel_s

    def to_dict(self) -> dict[str, Any]:
        return {"function": self.function, "location": self.location, "forward": self.forward,
                "backward": self.backward, "kernels": self.kernels,
                "graph_breaks": self.graph_breaks, "refused": self.refused,
                "graph_s": self.graph_s, "kernel_s": self.kernel_s, "total_s": self.total_s}


@dataclass(frozen=True)
class Refusal:
    """A graph Neuron would refuse: its function label, kind and the recorder's reason."""

    function: str
    kind: str
    why: str


@dataclass(frozen=True)
class Bill:
    """What a run would build on Neuron and its priced seconds. ``basis``: "assumed" or
    "calibrated"; ``model``: the pricing named in words; ``kernel_basis``: where the per-kernel
    seconds come from; ``priced_at_mean``: graphs the calibrated model could not read (no op
    count), priced at its mean build; ``as_neuron``: the log header's rehearsal facts."""

    rows: tuple[BillRow, ...]
    refusals: tuple[Refusal, ...]
    basis: str
    model: str
    graph_cost_s: float | None
    kernel_cost_s: float
    kernel_basis: str
    kernels_forecast: bool
    calibration: Calibration | None = None
    as_neuron: dict[str, Any] | None = None
    device: str = ""
    priced_at_mean: int = 0

    def _total(self, name: str) -> Any:
        return sum(getattr(r, name) for r in self.rows)

    forward = property(lambda self: self._total("forward"))
    backward = property(lambda self: self._total("backward"))
    kernels = property(lambda self: self._total("kernels"))
    graph_breaks = property(lambda self: self._total("graph_breaks"))
    graph_s = property(lambda self: self._total("graph_s"))
    kernel_s = property(lambda self: self._total("kernel_s"))

    @property
    def graphs(self) -> int:
        """Graphs that would build: forward and backward."""
        return int(self.forward + self.backward)

    @property
    def refused(self) -> int:
        return len(self.refusals)

    @property
    def total_s(self) -> float:
        return self.graph_s + self.kernel_s

    def to_dict(self) -> dict[str, Any]:
        """The bill as JSON-ready data (values from the log as they are: escape when printing)."""
        return {"basis": self.basis, "model": self.model, "graph_cost_s": self.graph_cost_s,
                "kernel_cost_s": self.kernel_cost_s, "kernel_basis": self.kernel_basis,
                "kernels_forecast": self.kernels_forecast, "device": self.device,
                "as_neuron": self.as_neuron, "priced_at_mean": self.priced_at_mean,
                **{k: getattr(self, k) for k in _SUMMED}, "graphs": self.graphs,
                "rows": [r.to_dict() for r in self.rows],
                "refusals": [{"function": r.function, "kind": r.kind, "why": r.why}
                             for r in self.refusals],
                "calibration": None if self.calibration is None else self.calibration.to_dict()}


_SUMMED = ("forward", "backward", "kernels", "graph_breaks", "refused", "graph_s", "kernel_s",
           "total_s")


def as_neuron_of(log: CompileLog) -> dict[str, Any] | None:
    """The log header's ``as_neuron`` facts (a run recorded under Neuron's compile rules), or
    None. A header value that is no dict counts as present, with no facts."""
    header = log.header if isinstance(log.header, dict) else {}
    if "as_neuron" not in header or header["as_neuron"] in (None, False):
        return None
    value = header["as_neuron"]
    return dict(value) if isinstance(value, dict) else {}


def _refused(e: CompileEvent) -> str:
    """The recorder's reason this graph would fail on Neuron, or ""."""
    why = e.metrics.get("refused_on_neuron") if isinstance(e.metrics, dict) else None
    return "" if why in (None, False, "") else (text_of(why) if why is not True else "refused")


def _graph_seconds(e: CompileEvent, calibration: Calibration | None) -> tuple[float, bool]:
    """A graph's priced seconds, and whether the calibrated model fell back to its mean."""
    if calibration is None:
        return DEFAULT_COMPILE_COST_S, False
    metrics = e.metrics if isinstance(e.metrics, dict) else {}
    found = metrics.get("dynamo")
    dynamo: dict[str, Any] = found if isinstance(found, dict) else {}
    seconds = calibration.seconds(ops=dynamo.get("graph_op_count"),
                                  nodes=dynamo.get("graph_node_count"),
                                  parameters=metrics.get("parameters"))
    return (calibration.mean_s, True) if seconds is None else (seconds, False)


def _kernel_cost(calibration: Calibration | None) -> tuple[float, str]:
    if calibration is not None and calibration.kernel_s is not None:
        return calibration.kernel_s, (f"calibrated: {calibration.kernel_s:.3g} s per eager kernel, "
                                      f"measured over {calibration.kernels_measured} kernels")
    return DEFAULT_KERNEL_COST_S, f"assumed: {ASSUMED_KERNEL}"


def compile_bill(log: CompileLog, calibration: Calibration | None = None) -> Bill:
    """The bill of ``log``: counts per function and seconds priced by ``calibration`` (a
    :func:`~neuronkit.advice.calibrate.calibrate` fit) or, without one, the stated defaults."""
    events = readable(log.events)
    labels = function_labels(events)
    rows: dict[tuple[str, str], BillRow] = {}
    refusals: list[Refusal] = []
    kernel_cost, kernel_basis = _kernel_cost(calibration)
    at_mean, forecast = 0, False
    for e in events:
        if e.kind not in (*BUILD_KINDS, "kernels", "graph_break"):
            continue
        key = (e.function, e.location)
        row = rows.get(key)
        if row is None:
            row = rows[key] = BillRow(labels[key], e.location)
        why = _refused(e) if e.kind in BUILD_KINDS else ""
        if why:
            row.refused += 1
            refusals.append(Refusal(labels[key], e.kind, why))
        elif e.kind in BUILD_KINDS:
            row.forward += e.kind in GRAPH_KINDS
            row.backward += e.kind == "backward"
            seconds, mean = _graph_seconds(e, calibration)
            row.graph_s += seconds
            at_mean += mean
        elif e.kind == "kernels":
            kernels = int(number(e.kernels) or 0)
            row.kernels += kernels
            row.kernel_s += kernels * kernel_cost
            forecast = forecast or bool(e.forecast)
        else:
            row.graph_breaks += 1
    if calibration is None:
        basis, graph_cost = "assumed", DEFAULT_COMPILE_COST_S
        model = f"assumed: {ASSUMED_GRAPH}, {ASSUMED_KERNEL}"
    else:
        basis, graph_cost = "calibrated", None
        model = f"{calibration.label}; eager kernels {kernel_basis}"
    as_neuron = as_neuron_of(log)
    device = text_of((as_neuron or {}).get("device") or
                     (log.header.get("device") if isinstance(log.header, dict) else ""))
    return Bill(rows=tuple(sorted(rows.values(), key=lambda r: -r.total_s)),
                refusals=tuple(refusals), basis=basis, model=model, graph_cost_s=graph_cost,
                kernel_cost_s=kernel_cost, kernel_basis=kernel_basis, kernels_forecast=forecast,
                calibration=calibration, as_neuron=as_neuron, device=device,
                priced_at_mean=at_mean)

