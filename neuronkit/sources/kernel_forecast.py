"""A forecast of the eager-op kernels native Neuron would compile, counted on any machine.

On native torch-neuronx every aten op run eagerly on the ``neuron`` device compiles a kernel the
first time the process sees its key (op, tensor shapes and dtypes, the *types* of its scalars),
then reuses it. ``nk.generate``'s prefill runs uncompiled, so each new prompt shape compiles a
batch of kernels there, which a CPU run never shows. Here a ``TorchDispatchMode`` counts the
distinct keys of the ops run eagerly while it is active:

    with nk.forecast_kernels(rec, within=model) as fc:  # one "kernels" event (forecast=True)
        model(**inputs)                                  # per fc.checkpoint() and at the end
    fc.kernels, fc.ops                     # new kernels, and per op name (aten::add.Tensor)

``within=model`` counts only the ops run inside the model's forward: with inputs left on the CPU
(as ``nk.generate`` does) only those run on the device, the rest (``generate``'s decode loop,
sampling) stays on the host and compiles nothing.

Each op is keyed as native Neuron keys it (``neuron_op_keys``, which cites torch-neuronx's
source): the name torch-neuronx registered the op under, each tensor's shape and dtype (as given:
the int64 -> int32 and float64 -> float32 casts come after the key), a Python number by its type
only (``x + 1`` and ``x + 2`` share a kernel, ``x + 2.5`` does not), the arguments the op declares
static by value. ``fc.ops`` names the ops Neuron runs, not the CPU's:
``_scaled_dot_product_fused_attention_overrideable`` where the CPU ran
``_scaled_dot_product_flash_attention_for_cpu``, ``aten::linear`` for an ``nn.Linear``,
``aten::div.out`` for a ``div.Tensor``. An op torch-neuronx does not register runs as torch's
composite for it, here as there, and its parts are counted. Not counted, as native Neuron compiles
nothing for them: view ops, allocations and host reads, ops with an empty input, copies between
devices, the casts torch-neuronx bounces through the CPU (to or from float64; int64 to or from
int32 or bool) and higher-order ops such as ``torch.cond`` (run, not keyed).

What the mapping cannot key exactly (an op with no torch-neuronx kernel, which runs on its CPU
fallback; attention in float64; attention the CPU ran on torch's math path) is named in
``fc.unmapped`` and in the event (``not mapped: <op>`` reasons, ``metrics["not_mapped"]``): the
count cannot vouch for those calls. Keys seen are kept per process, like Neuron's in-memory cache:
a key counted once is not new again (:func:`reset_forecast` forgets them). Neuron's on-disk NEFF
cache, which can spare a later process the compile, is not modelled. It is a forecast: a CPU run
may take other code paths than a Neuron one, and which ops torch-neuronx lowers itself differs
between its versions (``neuron_op_keys`` names the source snapshot the mapping reads).

Compiled code is left alone. An active ``TorchDispatchMode`` makes Dynamo skip every frame
("non-infra torch dispatch mode present") and run it eagerly, so the forecast would change what
it forecasts. This mode says ``ignore_compile_internals() -> True``: Dynamo then compiles as
without it (the mode is off while Dynamo traces and the backend compiles), and only the compiled
artifact's *runtime* ops reach the mode (with the ``eager`` / ``aot_eager`` backends; inductor's
fused kernels do not dispatch). Those ops are part of the graph's NEFF on Neuron, not eager
kernels, so they are skipped: Dynamo installs every compiled graph wrapped in
``torch._dynamo.disable(..., reason="do not trace Dynamo-compiled graph")``, and an op whose
Python stack holds that wrapper's frame runs inside a compiled graph. A compiled graph's backward
runs from autograd, outside that wrapper: an op whose stack holds AOTAutograd's
``CompiledFunction._backward_impl`` runs inside the backward graph (its NEFF on Neuron) and is
skipped too. Ops Dynamo leaves to Python (around a graph break) run outside any graph and are
counted, as they are eager on Neuron.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import sys
import threading
import time
from collections import Counter
from types import FrameType
from typing import Any, Iterator, NamedTuple

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from neuronkit.safe import terminal_safe
from neuronkit.sources import neuron_op_keys
from neuronkit.sources.neuron import KERNELS_FUNCTION
from neuronkit.sources.sink import say

__all__ = ["KernelForecast", "forecast_kernels", "reset_forecast", "counting", "checkpoint"]

_GRAPH_REASON = "do not trace Dynamo-compiled graph"   # torch/_dynamo/output_graph.py
# a compiled graph's backward: torch/_functorch/_aot_autograd/runtime_wrappers.py
_BACKWARD = ("_backward_impl", os.path.join("_aot_autograd", "runtime_wrappers.py"))
_SEEN: set[tuple[Any, ...]] = set()   # every key counted in this process
_SEEN_LOCK = threading.Lock()
_LOCAL = threading.local()            # per thread: the active forecasts (dispatch modes are too)
_OPS: dict[Any, tuple[str, tuple[str, Any]] | None] = {}   # op overload -> (name, route)
_DISABLED_CODE: list[Any] = []        # the code object of torch._dynamo.disable's wrapper
_TORCH = os.path.dirname(torch.__file__)
# the files of the frames between an op and the code that called it
_HERE = {__file__, neuron_op_keys.__file__, *(os.path.join(_TORCH, *p.split("/")) for p in (
    "_ops.py", "_compile.py", "_dynamo/eval_frame.py", "utils/_python_dispatch.py"))}


def reset_forecast() -> None:
    """Forget every key counted in this process: the next ops forecast as if it had just started."""
    with _SEEN_LOCK:
        _SEEN.clear()


class KernelForecast:
    """The kernels forecast by one :func:`forecast_kernels` (or by ``nk.generate``).

    ``kernels`` / ``ops``: new kernels counted so far, in total and per op name as Neuron runs it;
    ``unmapped`` / ``unmapped_calls``: the ops the mapping could not key as Neuron does, with why,
    and how many calls (the count cannot vouch for those); ``events``: the ``kernels`` events
    recorded (one per :meth:`checkpoint` that found new kernels); ``device``: the device type the
    ops were counted on. ``within``: see :func:`forecast_kernels`.
    """

    def __init__(self, recorder: Any = None, *, label: str | None = None,
                 within: Any = None) -> None:
        self.recorder = recorder
        self.label = label
        self.within = _place_of(within) if within is not None else None
        self.kernels = 0
        self.calls = 0          # eager op calls counted (each would launch a kernel on Neuron)
        self.ops: Counter[str] = Counter()
        self.unmapped: dict[str, str] = {}
        self.unmapped_calls: Counter[str] = Counter()
        self.events: list[Any] = []
        self.device = ""
        self._pending: Counter[str] = Counter()
        self._pending_unmapped: Counter[str] = Counter()
        self._pending_since: float | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        text = f"KernelForecast({self.kernels} new kernels, {len(self.ops)} ops, forecast"
        if self.unmapped:
            text += "; " + "; ".join(f"not mapped: {op}" for op in self.unmapped)
        return terminal_safe(text + ")")

    @contextlib.contextmanager
    def counting(self) -> Iterator[KernelForecast]:
        """Count the ops this thread runs eagerly inside the block (nested forecasts each count
        what is new; a forecast already counting is not counted twice)."""
        _check_torch()
        active: list[KernelForecast] = _active()
        if self in active:
            yield self
            return
        active.append(self)
        mode = None
        if len(active) == 1:
            mode = _CountingMode()
            mode.__enter__()
        try:
            yield self
        finally:
            active.remove(self)
            if mode is not None:
                mode.__exit__(None, None, None)

    def checkpoint(self, label: str | None = None) -> Any | None:
        """Record the kernels counted since the last checkpoint as ONE ``kernels`` event
        (``forecast=True``) through the recorder, when there are any, with the ops not mapped
        since then; returns it (or None). ``label``: the event's context (default: the
        forecast's label, else the recorder's)."""
        with self._lock:
            ops, since, unmapped = self._pending, self._pending_since, self._pending_unmapped
            self._pending, self._pending_since, self._pending_unmapped = Counter(), None, Counter()
        n = sum(ops.values())
        if not n or self.recorder is None:
            return None
        label = label if label is not None else self.label
        where = self.device or "cpu"
        fields = dict(kind="kernels", function=KERNELS_FUNCTION, kernels=n, forecast=True,
                      ops=dict(ops.most_common()), started_at=since or time.time(),
                      reasons=[f"a forecast counted on {where}, not measured on Neuron: {n} "
                               "eager-op kernel(s) native Neuron would compile here (op, shape, "
                               "dtype and scalar-type keys new to this process)"]
                      + [f"not mapped: {op}: {self.unmapped[op]}" for op in unmapped])
        if unmapped:
            fields["metrics"] = {"not_mapped": dict(unmapped.most_common())}
        scope = self.recorder.context(label) if label is not None else contextlib.nullcontext()
        with scope:
            event = self.recorder.record(**fields)
        self.events.append(event)
        return event

    def _add(self, op: str, device: str) -> None:
        with self._lock:
            self.kernels += 1
            self.ops[op] += 1
            self._pending[op] += 1
            if self._pending_since is None:
                self._pending_since = time.time()
            self.device = self.device or device

    def _not_mapped(self, op: str, why: str) -> None:
        with self._lock:
            self.unmapped.setdefault(op, why)
            self.unmapped_calls[op] += 1
            self._pending_unmapped[op] += 1


@contextlib.contextmanager
def forecast_kernels(recorder: Any = None, *, label: str | None = None,
                     within: Any = None) -> Iterator[KernelForecast]:
    """Forecast the eager-op kernels native Neuron would compile for the ops run inside.

    Counts, in this thread, the distinct kernel keys not seen before in this process (see the
    module docstring); compiled code is neither changed nor counted. ``recorder``: a
    ``CompileRecorder`` that gets one ``kernels`` event (``forecast=True``) per
    ``fc.checkpoint()`` and one at the end, each only when new kernels were counted; without
    one, read ``fc.kernels`` and ``fc.ops``. ``label``: the events' context (default: the
    recorder's current one). ``within``: a module (its ``forward``) or a function: count only
    the ops run inside it, i.e. on the device when only it runs there (``model.generate`` with
    CPU inputs moves just the forward's tensors to Neuron; its decode loop stays on the host).
    A forecast, counted on this machine: not a Neuron measurement.
    """
    forecast = KernelForecast(recorder, label=label, within=within)
    try:
        with forecast.counting():
            yield forecast
    finally:
        forecast.checkpoint()


def counting(forecast: KernelForecast | None) -> contextlib.AbstractContextManager[Any]:
    """``forecast.counting()``, or nothing when there is no forecast (for ``nk.generate``)."""
    return forecast.counting() if forecast is not None else contextlib.nullcontext()


def checkpoint(forecast: KernelForecast | None) -> None:
    """``forecast.checkpoint()`` when there is a forecast (for ``nk.generate``)."""
    if forecast is not None:
        forecast.checkpoint()


# --------------------------------------------------------------------------- the mode

def _active() -> list[KernelForecast]:
    active = getattr(_LOCAL, "active", None)
    if active is None:
        active = _LOCAL.active = []
    return active


def _check_torch() -> None:
    if not hasattr(TorchDispatchMode, "ignore_compile_internals"):
        raise RuntimeError(f"forecast_kernels needs a torch whose TorchDispatchMode has "
                           f"ignore_compile_internals (torch {torch.__version__} has not): without "
                           "it the forecast would make torch.compile skip every frame")
    if not _DISABLED_CODE:
        from torch._dynamo import disable, output_graph

        _DISABLED_CODE.append(disable(_noop).__code__)
        try:
            known = _GRAPH_REASON in inspect.getsource(output_graph)
        except (OSError, TypeError):
            known = False
        if not known:
            say("neuronkit: this torch does not mark compiled graphs the way forecast_kernels "
                "knows; ops run inside compiled graphs may be counted as eager kernels")


def _noop() -> None:
    pass


def _place_of(within: Any) -> tuple[str, int]:
    """(file, first line) of a module's ``forward`` or a function, decorators unwrapped: where
    its frames are found on the stack, Dynamo's transformed copies of it included."""
    fn = type(within).forward if isinstance(within, torch.nn.Module) else within
    code = getattr(inspect.unwrap(fn), "__code__", None)
    if code is None:
        raise TypeError(f"within must be a torch.nn.Module or a Python function, got {within!r}")
    return code.co_filename, code.co_firstlineno


class _Plan(NamedTuple):
    """One op call the forecasts of this thread count: how Neuron runs it, who counts it."""

    name: str
    route: tuple[str, Any]
    takers: list[KernelForecast]
    caller: FrameType | None


def _scan(places: set[tuple[str, int]]) -> tuple[set[tuple[str, int]], FrameType | None] | None:
    """The ``places`` on the caller's stack and the op's caller (the first frame outside the
    dispatch machinery), or None inside a Dynamo-compiled graph or its backward (module
    docstring): there nothing is an eager kernel."""
    code = _DISABLED_CODE[0] if _DISABLED_CODE else None
    found: set[tuple[str, int]] = set()
    caller = None
    frame: Any = sys._getframe(1)
    while frame is not None:
        f_code = frame.f_code
        if caller is None and f_code.co_filename not in _HERE:
            caller = frame
        if f_code is code and getattr(frame.f_locals.get("self"), "msg", None) == _GRAPH_REASON:
            return None
        if f_code.co_name == _BACKWARD[0] and f_code.co_filename.endswith(_BACKWARD[1]):
            return None  # inside a compiled graph's backward: part of its NEFF on Neuron
        if places and (f_code.co_filename, f_code.co_firstlineno) in places:
            found.add((f_code.co_filename, f_code.co_firstlineno))
        frame = frame.f_back
    return found, caller


def _plan(func: Any) -> _Plan | None:
    """How the forecasts of this thread count this call, or None when none does."""
    if func not in _OPS:
        ok = isinstance(func, torch._ops.OpOverload)   # not a higher-order op
        _OPS[func] = (func.name(), neuron_op_keys.route(func)) if ok else None
    info = _OPS[func]
    if info is None or info[1][0] == "skip":
        return None
    active = list(_active())
    scanned = _scan({f.within for f in active if f.within is not None})
    if scanned is None:
        return None  # inside a compiled graph: part of its NEFF on Neuron, no eager kernel
    found, caller = scanned
    takers = [f for f in active if f.within is None or f.within in found]
    if not takers:
        return None  # outside every ``within``: on the host on Neuron, no kernel, not marked seen
    return _Plan(info[0], info[1], takers, caller)


def _device_of(args: tuple[Any, ...], out: Any) -> str:
    for value in (*args, out):
        if isinstance(value, torch.Tensor):
            return value.device.type
    return ""


class _CountingMode(TorchDispatchMode):
    """Counts each new kernel key for every forecast active in this thread; runs an op Neuron
    does not register as torch's composite for it (as Neuron does), so its parts are counted."""

    supports_higher_order_operators = True  # run them (torch.cond, ...) instead of refusing them

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True  # Dynamo compiles as if the mode were not there (module docstring)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        try:
            plan = _plan(func)
        except Exception as exc:  # a forecast never breaks the user's op
            say(f"neuronkit: forecast_kernels could not key {func}: {exc!r}")
            plan = None
        if plan is not None and plan.route[0] in ("composite", "decompose"):
            try:
                return self._composite(func, plan, args, kwargs)
            except Exception as exc:
                out = func(*args, **kwargs)   # a mistake of the caller's raises from here
                say(f"neuronkit: forecast_kernels could not run torch's composite for {func}, "
                    f"its parts are not counted: {exc!r}")
                return out
        out = func(*args, **kwargs)
        if plan is not None:
            try:
                _count(plan, args, kwargs, out)
            except Exception as exc:
                say(f"neuronkit: forecast_kernels could not key {func}: {exc!r}")
        return out

    def _composite(self, func: Any, plan: _Plan, args: tuple, kwargs: dict) -> Any:
        note = neuron_op_keys.composite_note(plan.name, args)
        for forecast in plan.takers if note else ():
            forecast._not_mapped(plan.name, note or "")
        with self:  # the composite's parts dispatch through this mode again
            if plan.route[0] == "decompose":
                return func.decompose(*args, **kwargs)
            return func._op_dk(plan.route[1], *args, **kwargs)


def _count(plan: _Plan, args: tuple[Any, ...], kwargs: dict[str, Any], out: Any) -> None:
    """Hand the new keys of one op call to the forecasts that count it."""
    mapped = neuron_op_keys.whole_keys(plan.caller)
    if mapped is None:
        mapped = neuron_op_keys.translate(plan.name, args, kwargs, out)
    if mapped.note:
        for forecast in plan.takers:
            forecast._not_mapped(mapped.about or plan.name, mapped.note)
    new = []
    with _SEEN_LOCK:
        for op, key in mapped.keys:
            if key not in _SEEN:
                _SEEN.add(key)
                new.append(op)
    device = _device_of(args, out)
    for forecast in plan.takers:
        forecast.calls += len(mapped.keys)  # eager op calls, new keys or not
        for op in new:
            forecast._add(op, device)
