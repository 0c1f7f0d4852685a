"""Neuron's compile rules, applied on any machine while an ``as_neuron`` recorder records.

    with nk.CompileRecorder(as_neuron=True) as rec:   # enter() at start, leave() at stop
        model(x)

Native Neuron compiles differently from a CPU or GPU run, and these rules make this run compile
as it would there (a rehearsal: the counts are forecasts, never Neuron measurements):

* ``static-shapes``: no automatic dynamic shapes. ``torch._dynamo.config.patch(
  automatic_dynamic_shapes=False, assume_static_by_default=True)``, what transformers' Trainer
  asks for with the neuron backend, and the neuron backend itself forces ``dynamic=False``
  (torch-neuronx snapshot ``ndb/backend.py:295-298``). Each new input shape is a new graph.
* ``refuse-symbolic-shapes``: a graph that still has symbolic shapes (``dynamic=True``,
  ``mark_dynamic``) is compiled here but flagged: Neuron refuses it (``ndb/backend.py:299`` runs
  ``preprocess_graph``, ``ndb/fx/pipelines/preprocessing_pipeline.py:38``, whose
  ``DynamicShapeAnalysis`` raises "Dynamic shapes detected ..." for any symbol of the graph's
  ShapeEnv, ``ndb/fx/passes/dynamic_shape_analysis.py:59-64,95-118``). See :func:`symbols_of`.
* ``aot-backward``: the neuron backend is AOTAutograd-based (``ndb/backend.py:300-305``), so a
  graph whose outputs need gradients gets a backward graph built at its first ``.backward()``.
  A job compiling with ``eager`` (no AOTAutograd, no backward graph) is compiled with
  ``aot_eager`` in its place, so that the backward graph is traced and recorded.
* ``eager-kernel-forecast``: eager ops forecast as the kernels native Neuron would build
  (``kernel_forecast.py``; the recorder runs it).

The backend stand-in goes through Dynamo's per-graph backend override
(``torch._dynamo.config.debug_backend_override``): every graph reaches :func:`_stand_in`, which
checks it and calls the job's own backend (``aot_eager`` for ``eager``). A torch without that
setting gets the static shapes only (said once). Nested and concurrent as_neuron recorders are
counted, the first to start enters the settings, the last to stop leaves them: per process where
torch's config is process-wide, per thread where it is per thread (torch 2.13 keeps config values
in ``contextvars``: there the rules apply in the threads whose recorders started them).
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import sys
import threading
from collections import OrderedDict
from typing import Any

from neuronkit.sources.sink import say

__all__ = ["RULES", "enter", "leave", "active", "notes_for", "symbols_of"]

RULES: tuple[str, ...] = ("static-shapes", "refuse-symbolic-shapes", "aot-backward",
                          "eager-kernel-forecast")
STAND_IN = "aot_eager"               # compiles in place of a backend without AOTAutograd
_NO_AOT = frozenset({"eager"})       # backends that build no backward graph
_BACKEND = "neuronkit_as_neuron"     # the registered name of the stand-in
_OVERRIDE_KEY = "debug_backend_override"

_lock = threading.Lock()
_notes: OrderedDict[str, dict[str, Any]] = OrderedDict()   # compile id -> notes for its event
_said: set[str] = set()


@dataclasses.dataclass
class _Scope:
    """Where one config patch applies: the process (torch's config is global), or one thread
    (a torch whose config values are per thread / ``contextvars`` context, 2.13 here)."""

    count: int = 0                   # as_neuron recorders active in it
    stack: contextlib.ExitStack | None = None
    prior: dict[str, Any] = dataclasses.field(default_factory=dict)   # restored by the last
    entered_in: int = 0              # the thread that entered the patch


_scopes: dict[int, _Scope] = {}


def active() -> bool:
    """Whether an as_neuron recorder is active (the rules apply)."""
    return any(scope.count for scope in _scopes.values())


def enter() -> int:
    """One more as_neuron recorder: the first of its scope (the process, or this thread where
    torch's config is per thread) enters the rules; returns the scope, for :func:`leave`."""
    key = threading.get_ident() if _per_thread_config() else 0
    with _lock:
        scope = _scopes.setdefault(key, _Scope())
        if scope.count == 0:
            scope.stack, scope.prior = _patch()
            scope.entered_in = threading.get_ident()
        scope.count += 1
    return key


def leave(key: int) -> None:
    """One fewer in the scope ``enter()`` returned: the last leaves the rules (the settings
    found are restored; a config patch keeps its prior values per thread, so from another
    thread they are set back directly, which a per-thread config cannot: said so)."""
    with _lock:
        scope = _scopes.get(key)
        if scope is None or scope.count == 0:
            return
        scope.count -= 1
        if scope.count or scope.stack is None:
            return
        del _scopes[key]
        if not _scopes:
            _notes.clear()
        if threading.get_ident() == scope.entered_in:
            scope.stack.close()
        elif key == 0:
            import torch._dynamo

            for name, value in scope.prior.items():
                setattr(torch._dynamo.config, name, value)
        else:
            _say_once("thread", "neuronkit as_neuron: a recorder stopped from another thread than "
                      "the one that started it: torch's config is per thread here, so that "
                      "thread keeps Neuron's compile settings")


def _per_thread_config() -> bool:
    """Whether torch keeps Dynamo's config values per thread (``contextvars``), not process-wide."""
    import torch._dynamo

    entry = getattr(torch._dynamo.config, "_config", {}).get("automatic_dynamic_shapes")
    return isinstance(getattr(entry, "user_override", None), contextvars.ContextVar)


def notes_for(compile_id: str) -> dict[str, Any]:
    """What the rules noted about the graph of ``compile_id`` (``refused_on_neuron``: why Neuron
    would refuse it; ``as_neuron_backend``: the backend compiled in the job's place)."""
    with _lock:
        return dict(_notes.get(compile_id) or {})


def _patch() -> tuple[contextlib.ExitStack, dict[str, Any]]:
    """Enter Neuron's compile settings (this thread's, where torch's config is per thread)."""
    import torch._dynamo

    stack = contextlib.ExitStack()
    config: Any = torch._dynamo.config
    settings: dict[str, Any] = {"automatic_dynamic_shapes": False, "assume_static_by_default": True}
    if not hasattr(config, _OVERRIDE_KEY):
        _say_once("override", f"neuronkit as_neuron: torch {torch.__version__} has no "
                  f"torch._dynamo.config.{_OVERRIDE_KEY}: shapes are static as on Neuron, but "
                  "graphs with symbolic shapes are not flagged and an 'eager' backend records "
                  "no backward graphs")
    elif getattr(config, _OVERRIDE_KEY):
        _say_once("theirs", f"neuronkit as_neuron: torch._dynamo.config.{_OVERRIDE_KEY} is set "
                  f"({getattr(config, _OVERRIDE_KEY)!r}), kept: graphs with symbolic shapes are "
                  "not flagged and an 'eager' backend records no backward graphs")
    else:
        _register()
        settings[_OVERRIDE_KEY] = f">=0:{_BACKEND}"   # every graph id
    prior = {key: getattr(config, key) for key in settings}
    stack.enter_context(config.patch(**settings))
    return stack, prior


def _register() -> None:
    from torch._dynamo.backends.registry import _COMPILER_FNS, register_backend

    if _BACKEND not in _COMPILER_FNS:
        register_backend(_stand_in, name=_BACKEND, tags=("debug",))


def _stand_in(gm: Any, example_inputs: list[Any], **kwargs: Any) -> Any:
    """Every graph compiled while the rules apply: noted (symbols, stand-in), then compiled by
    the job's own backend, or by ``aot_eager`` where that one has no AOTAutograd."""
    from torch._dynamo.backends.registry import lookup_backend
    from torch._guards import CompileContext

    backend = _job_backend()
    name = str(getattr(backend, "compiler_name", None) or getattr(backend, "__name__", ""))
    notes: dict[str, Any] = {}
    symbols = symbols_of(gm)
    if symbols:
        shown = ", ".join(symbols[:3]) + (", ..." if len(symbols) > 3 else "")
        notes["refused_on_neuron"] = (
            f"symbolic shapes ({len(symbols)} dynamic dimension(s): {shown}): the neuron backend "
            "compiles static shapes only and refuses this graph ('Dynamic shapes detected')")
    if backend is None:  # torch moved Dynamo's compile: the stand-in is all there is
        _say_once("backend", "neuronkit as_neuron: the job's compile backend was not found; "
                  f"graphs compile with {STAND_IN}")
    if backend is None or name in _NO_AOT:
        notes["as_neuron_backend"] = STAND_IN
        backend = lookup_backend(STAND_IN)
    compile_id = CompileContext.current_compile_id()
    if compile_id is not None:
        with _lock:
            _notes[str(compile_id)] = notes
            _notes.move_to_end(str(compile_id))
            while len(_notes) > 512:
                _notes.popitem(last=False)
    return backend(gm, example_inputs, **kwargs)


def _job_backend() -> Any:
    """The backend the job compiles with: Dynamo's ``OutputGraph.compiler_fn`` of the compile
    in progress (the caller of the override, ``_call_user_compiler``)."""
    frame: Any = sys._getframe(1)
    for _ in range(50):
        if frame is None:
            break
        if frame.f_code.co_name == "_call_user_compiler":
            fn = getattr(frame.f_locals.get("self"), "compiler_fn", None)
            if fn is not None:
                return fn
        frame = frame.f_back
    from torch._dynamo.symbolic_convert import InstructionTranslator

    tx = InstructionTranslator.current_tx()
    return getattr(getattr(tx, "output", None), "compiler_fn", None)


def symbols_of(gm: Any) -> list[str]:
    """The symbols of the graph's ShapeEnv, as the neuron backend's ``DynamicShapeAnalysis``
    counts them: ``var_to_val | var_to_range`` (``ndb/fx/passes/dynamic_shape_analysis.py:59-64``).
    That pass finds the ShapeEnv on ``gm._shape_env``, ``gm.graph._shape_env`` or a node's
    ``meta["val"]`` (``:37-56``); the graph Dynamo hands a backend carries its fake values in
    ``meta["example_value"]``, which is read too."""
    env = getattr(gm, "_shape_env", None) or getattr(gm.graph, "_shape_env", None)
    metas = (node.meta.get(key) for node in gm.graph.nodes for key in ("val", "example_value"))
    for value in metas if env is None else ():
        env = getattr(getattr(value, "fake_mode", None), "shape_env", None)
        if env is not None:
            break
    if env is None:
        return []
    values = getattr(env, "backed_var_to_val", None)  # torch 2.13 renamed var_to_val
    values = env.var_to_val if values is None else values
    return sorted({str(s) for s in (*values.keys(), *env.var_to_range.keys())})


def _say_once(key: str, message: str) -> None:
    if key not in _said:
        _said.add(key)
        say(message)
