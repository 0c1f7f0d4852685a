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

The key mirrors the native one (``torch_neuronx/kernels/base.py``): the op overload's name,
each tensor's shape and dtype, a Python number given for a Scalar (or Tensor) argument by its
type only (``x + 1`` and ``x + 2`` share a kernel, ``x + 2.5`` does not); other non-tensor
arguments (dims, ``keepdim``, dtypes) by value, as the ops that need them declare them static;
and the outputs' shapes (so ``arange(0, n)`` differs per ``n``). Not counted, as native Neuron
compiles nothing for them: view ops (``func.is_view``, e.g. ``view``, ``slice``, ``transpose``:
strided aliases), allocations and host reads (``empty``, ``set_``, ``item()``), ops with an
empty input tensor (short-circuited), copies between devices and higher-order ops such as
``torch.cond`` (run, not keyed). Keys seen are kept per
process, like Neuron's in-memory cache: a key counted once is not new again
(:func:`reset_forecast` forgets them). Neuron's on-disk NEFF cache, which can spare a later
process the compile, is not modelled. It is a forecast: a CPU run may take other code paths
than a Neuron one, and which ops torch-neuronx lowers itself differs between its versions.

Compiled code is left alone. An active ``TorchDispatchMode`` makes Dynamo skip every frame
("non-infra torch dispatch mode present") and run it eagerly, so the forecast would change what
it forecasts. This mode says ``ignore_compile_internals() -> True``: Dynamo then compiles as
without it (the mode is off while Dynamo traces and the backend compiles), and only the compiled
artifact's *runtime* ops reach the mode (with the ``eager`` / ``aot_eager`` backends; inductor's
fused kernels do not dispatch). Those ops are part of the graph's NEFF on Neuron, not eager
kernels, so they are skipped: Dynamo installs every compiled graph wrapped in
``torch._dynamo.disable(..., reason="do not trace Dynamo-compiled graph")``, and an op whose
Python stack holds that wrapper's frame runs inside a compiled graph. Ops Dynamo leaves to
Python (around a graph break) run outside any graph and are counted, as they are eager on Neuron.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import threading
import time
from collections import Counter
from typing import Any, Iterator

import torch
from torch.utils._python_dispatch import TorchDispatchMode

from neuronkit.sources.neuron import KERNELS_FUNCTION
from neuronkit.sources.sink import say

__all__ = ["KernelForecast", "forecast_kernels", "reset_forecast", "counting", "checkpoint"]

_GRAPH_REASON = "do not trace Dynamo-compiled graph"   # torch/_dynamo/output_graph.py
# allocations, metadata changes and host reads: native C++ in torch-neuronx, no compiled kernel
_NO_KERNEL = frozenset({
    "aten::empty.memory_format", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::empty_like", "aten::resize_", "aten::resize_as_", "aten::set_", "aten::set_.source_Storage",
    "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor",
    "aten::set_.source_Tensor_storage_offset", "aten::_local_scalar_dense", "aten::_unsafe_view",
    "aten::_has_compatible_shallow_copy_type", "aten::record_stream",
})
_NUMBERS = (bool, int, float, complex)

_SEEN: set[tuple[Any, ...]] = set()   # every key counted in this process
_SEEN_LOCK = threading.Lock()
_LOCAL = threading.local()            # per thread: the active forecasts (dispatch modes are too)
_OPS: dict[Any, tuple[str, frozenset[Any]] | None] = {}   # op overload -> _op_info
_DISABLED_CODE: list[Any] = []        # the code object of torch._dynamo.disable's wrapper


def reset_forecast() -> None:
    """Forget every key counted in this process: the next ops forecast as if it had just started."""
    with _SEEN_LOCK:
        _SEEN.clear()


class KernelForecast:
    """The kernels forecast by one :func:`forecast_kernels` (or by ``nk.generate``).

    ``kernels`` / ``ops``: new kernels counted so far, in total and per op name; ``events``: the
    ``kernels`` events recorded (one per :meth:`checkpoint` that found new kernels); ``device``:
    the device type the ops were counted on. ``within``: see :func:`forecast_kernels`.
    """

    def __init__(self, recorder: Any = None, *, label: str | None = None,
                 within: Any = None) -> None:
        self.recorder = recorder
        self.label = label
        self.within = _place_of(within) if within is not None else None
        self.kernels = 0
        self.ops: Counter[str] = Counter()
        self.events: list[Any] = []
        self.device = ""
        self._pending: Counter[str] = Counter()
        self._pending_since: float | None = None
        self._lock = threading.Lock()

    def __repr__(self) -> str:
        return f"KernelForecast({self.kernels} new kernels, {len(self.ops)} ops, forecast)"

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
        (``forecast=True``) through the recorder, when there are any; returns it (or None).
        ``label``: the event's context (default: the forecast's label, else the recorder's)."""
        with self._lock:
            ops, since = self._pending, self._pending_since
            self._pending, self._pending_since = Counter(), None
        n = sum(ops.values())
        if not n or self.recorder is None:
            return None
        label = label if label is not None else self.label
        where = self.device or "cpu"
        fields = dict(kind="kernels", function=KERNELS_FUNCTION, kernels=n, forecast=True,
                      ops=dict(ops.most_common()), started_at=since or time.time(),
                      reasons=[f"a forecast counted on {where}, not measured on Neuron: {n} "
                               "eager-op kernel(s) native Neuron would compile here (op, shape, "
                               "dtype and scalar-type keys new to this process)"])
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


def _scan(places: set[tuple[str, int]]) -> set[tuple[str, int]] | None:
    """The ``places`` on the caller's stack, or None inside a Dynamo-compiled graph (module
    docstring): there nothing is an eager kernel."""
    code = _DISABLED_CODE[0] if _DISABLED_CODE else None
    found: set[tuple[str, int]] = set()
    frame: Any = sys._getframe(3)   # the op's caller (past _count and __torch_dispatch__)
    while frame is not None:
        f_code = frame.f_code
        if f_code is code and getattr(frame.f_locals.get("self"), "msg", None) == _GRAPH_REASON:
            return None
        if places and (f_code.co_filename, f_code.co_firstlineno) in places:
            found.add((f_code.co_filename, f_code.co_firstlineno))
        frame = frame.f_back
    return found


def _op_info(func: Any) -> tuple[str, frozenset[Any]] | None:
    """``(name, number slots)`` of an op overload, or None when native Neuron compiles no kernel
    for it (views, allocations, host reads). Number slots: the positions and names of its Scalar
    / Tensor arguments, where a Python number is a runtime value keyed by its type only."""
    if func in _OPS:
        return _OPS[func]
    info: tuple[str, frozenset[Any]] | None = None
    name = func.name() if isinstance(func, torch._ops.OpOverload) else ""
    if name and not (func.is_view or name in _NO_KERNEL):   # not a higher-order op either
        found: set[Any] = set()
        for i, arg in enumerate(func._schema.arguments):
            kind = str(arg.type)
            if "number" in kind or "Scalar" in kind or "Tensor" in kind:
                found.update((i, arg.name))
        info = (name, frozenset(found))
    _OPS[func] = info
    return info


def _sig(value: Any, by_type: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return ("t", tuple(value.shape), value.dtype)
    if isinstance(value, (list, tuple)):
        return tuple(_sig(v, by_type) for v in value)
    if isinstance(value, _NUMBERS):
        return type(value).__name__ if by_type else (type(value).__name__, value)
    try:
        hash(value)
    except TypeError:
        return repr(value)
    return value


def _kernel_key(name: str, slots: frozenset[Any], args: tuple[Any, ...], kwargs: dict[str, Any],
                out: Any) -> tuple | None:
    """The forecast key of one op call, or None when native Neuron compiles nothing for it."""
    if any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args):
        return None  # torch-neuronx short-circuits empty inputs
    if name in ("aten::_to_copy", "aten::copy_"):
        src = args[0] if name == "aten::_to_copy" else args[1]
        dst = kwargs.get("device") if name == "aten::_to_copy" else args[0].device
        if isinstance(src, torch.Tensor) and dst is not None and torch.device(dst) != src.device:
            return None  # a transfer between devices, not a kernel
    return (name,
            tuple(_sig(a, i in slots) for i, a in enumerate(args)),
            tuple((k, _sig(v, k in slots)) for k, v in sorted(kwargs.items())),
            _sig(out, False))


def _device_of(args: tuple[Any, ...], out: Any) -> str:
    for value in (*args, out):
        if isinstance(value, torch.Tensor):
            return value.device.type
    return ""


class _CountingMode(TorchDispatchMode):
    """Counts each new kernel key for every forecast active in this thread."""

    supports_higher_order_operators = True  # run them (torch.cond, ...) instead of refusing them

    @classmethod
    def ignore_compile_internals(cls) -> bool:
        return True  # Dynamo compiles as if the mode were not there (module docstring)

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        try:
            info = _op_info(func)
            if info is not None:
                _count(info, args, kwargs, out)
        except Exception as exc:  # a forecast never breaks the user's op
            say(f"neuronkit: forecast_kernels could not key {func}: {exc!r}")
        return out


def _count(info: tuple[str, frozenset[Any]], args: tuple[Any, ...], kwargs: dict[str, Any],
           out: Any) -> None:
    """Hand a new key to the forecasts of this thread that count where the op runs."""
    active = list(_active())
    found = _scan({f.within for f in active if f.within is not None})
    if found is None:
        return  # inside a compiled graph: part of its NEFF on Neuron, no eager kernel
    takers = [f for f in active if f.within is None or f.within in found]
    if not takers:
        return  # outside every ``within``: on the host on Neuron, no kernel, not marked seen
    key = _kernel_key(*info, args, kwargs, out)
    if key is None:
        return
    with _SEEN_LOCK:
        if key in _SEEN:
            return
        _SEEN.add(key)
    device = _device_of(args, out)
    for forecast in takers:
        forecast._add(key[0], device)
