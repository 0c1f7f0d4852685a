"""Assembling CompileEvents from what torch's trace said about a compile: pure, no torch.

The trace delivers, per compile, the input tensors with their sources, the guard-failure reasons,
any graph-break reports and, last, the ``compilation_metrics`` record; a refused compile
(recompile-limit hit) traces no inputs. :func:`assemble` classifies the compile (first,
recompile, limit_hit, graph_break, failed) per function variant (``forward[prefill]`` and
``forward[decode]`` each have a first graph), says what changed against the variant's previous
graph and updates that variant's :class:`FunctionState`; :func:`break_events` gives the breaks a
compiled frame resumed after; :func:`name_frame` names the compiled frame for people.
"""
from __future__ import annotations

import dis
import inspect
import time
import types
from dataclasses import dataclass, field
from typing import Any

from neuronkit.events.event import CompileEvent, EventKind
from neuronkit.sources.torch_text import (
    BreakSite,
    break_cause,
    failure_reason,
    guard_text,
    is_torch_file,
    limit_failure,
    size_mismatches,
)

__all__ = ["FrameName", "FunctionState", "TracedParts", "assemble", "break_events",
           "describe_change", "dims_named", "name_frame", "with_others"]

KEPT_METRICS = ("guard_count", "graph_node_count", "graph_op_count", "graph_input_count",
                "cache_size", "accumulated_cache_size", "backend_compile_time_s",
                "inductor_compile_time_s", "fail_type", "fail_reason", "recompile_user_contexts")


@dataclass
class TracedParts:
    """What the trace delivered for one compile before its metrics record."""

    reasons: list[str] = field(default_factory=list)
    tensors: dict[tuple, tuple] = field(default_factory=dict)   # (describer, id) -> (size, device)
    inputs: dict[str, list] = field(default_factory=dict)       # input name -> size
    backend: str | None = None
    device: str | None = None
    breaks: list[BreakSite] = field(default_factory=list)       # graph breaks, in trace order
    dtypes: dict[str, str] = field(default_factory=dict)        # input name -> dtype
    lookups: list[dict[str, Any]] = field(default_factory=list)  # cache lookups (cache_keys.py)


@dataclass
class FunctionState:
    """Per readable function: the last graph's input shapes, graphs so far, the device."""

    shapes: dict[str, list] | None = None
    graphs: int = 0
    device: str | None = None


@dataclass
class FrameName:
    """The compiled frame, for people (``function``, ``location``: ``Qwen3ForCausalLM.forward
    [decode]`` at ``modeling_qwen3.py:440``) and as torch saw it (``raw``, ``raw_location``:
    ``wrapped_func`` at ``deprecation.py:121``); ``phase``: ``prefill``, ``decode`` or None."""

    function: str
    location: str
    raw: str = ""
    raw_location: str = ""
    phase: str | None = None

    def __post_init__(self) -> None:
        self.raw = self.raw or self.function
        self.raw_location = self.raw_location or self.location


CACHE_ARGS = ("past_key_values", "cache", "past_key_value")


def _wrapped_callable(code: types.CodeType, closure: Any) -> Any:
    """The function a functools.wraps-style wrapper frame passes its call to, else None: the
    code takes ``*args`` or ``**kwargs``, passes arguments on with ``f(*args, **kwargs)``, and a
    closure cell holds a Python function or method (transformers' ``deprecate_kwarg`` and
    ``can_return_tuple`` wrappers, accelerate's autocast wrapper of ``forward``) or a module
    (``torch.compile(module)`` calls it through torch/_dynamo/external_utils.py ``wrap_inline``'s
    ``inner``: named after the module's ``forward``)."""
    if not code.co_flags & (inspect.CO_VARARGS | inspect.CO_VARKEYWORDS) or not any(
            i.opname == "CALL_FUNCTION_EX" for i in dis.get_instructions(code)):
        return None
    for cell in closure or ():
        try:
            value = cell.cell_contents
        except ValueError:  # an empty cell
            continue
        if isinstance(value, (types.FunctionType, types.MethodType)) \
                and getattr(value, "__code__", None) is not code:
            return value
        if hasattr(value, "_modules") and callable(getattr(type(value), "forward", None)):
            return value.forward  # a module: torch.compile(module) calls it through wrap_inline
    return None


def _call_args(code: types.CodeType, f_locals: dict[str, Any]) -> tuple[list[Any], dict[str, Any]]:
    """The frame's call as ``(positional, keyword)`` arguments, read from its locals."""
    names = code.co_varnames
    n = code.co_argcount + code.co_kwonlyargcount
    positional = [f_locals[a] for a in names[:code.co_argcount] if a in f_locals]
    keyword = {a: f_locals[a] for a in names[code.co_argcount:n] if a in f_locals}
    if code.co_flags & inspect.CO_VARARGS:
        positional += list(f_locals.get(names[n], ()) or ())
        n += 1
    if code.co_flags & inspect.CO_VARKEYWORDS and isinstance(f_locals.get(names[n]), dict):
        keyword.update(f_locals[names[n]])
    return positional, keyword


def _length(value: Any, dim: int) -> int | None:
    """Dim ``dim`` of a tensor-like argument's shape, else None."""
    try:
        return int(value.shape[dim])
    except (AttributeError, TypeError, ValueError, IndexError):
        return None


def phase_of(arguments: dict[str, Any]) -> str | None:
    """``decode`` / ``prefill`` / None from a model call's arguments: with a KV cache passed
    (``past_key_values`` / ``cache``), one new position is a decode step and more are a prefill
    (chunked or speculative steps read as prefill, a one-token prompt as decode); no cache, no
    phase (training, a plain forward). Only shapes are read, never tensor values."""
    if not any(arguments.get(a) is not None for a in CACHE_ARGS):
        return None
    new = _length(arguments.get("input_ids"), -1)
    if new is None:
        new = _length(arguments.get("inputs_embeds"), -2)
    if new is None:
        new = _length(arguments.get("cache_position"), -1)
    return None if new is None else "decode" if new == 1 else "prefill"


def _bind(fn: Any, positional: list[Any], keyword: dict[str, Any]) -> dict[str, Any]:
    """The call's arguments by parameter name (``**kwargs`` ones by their own names)."""
    try:
        signature = inspect.signature(fn)
        bound = dict(signature.bind_partial(*positional, **keyword).arguments)
    except (TypeError, ValueError):
        return dict(keyword)
    for p in signature.parameters.values():
        if p.kind is p.VAR_KEYWORD and isinstance(bound.get(p.name), dict):
            bound.update(bound.pop(p.name))
    return bound


def name_frame(code: types.CodeType, f_locals: dict[str, Any] | None, closure: Any) -> FrameName:
    """The compiled frame named for people. A functools.wraps-style wrapper (see
    :func:`_wrapped_callable`) is named after what it wraps, unwrapped to the end
    (``inspect.unwrap``): ``Class.method`` of the instance it was called on, at the method's own
    ``file:line``; other frames keep their code name and place. ``[prefill]`` / ``[decode]`` is
    added where :func:`phase_of` can tell."""
    raw_location = f"{code.co_filename}:{code.co_firstlineno}"
    f_locals = f_locals or {}
    positional, keyword = _call_args(code, f_locals)
    inner = _wrapped_callable(code, closure)
    function, location, arguments = code.co_name, raw_location, None
    if inner is not None:
        owner = getattr(inner, "__self__", None)
        if owner is not None:  # a bound method: its instance is not among the arguments
            positional = [owner, *positional]
        real = inspect.unwrap(getattr(inner, "__func__", inner))
        owner = owner if owner is not None else (positional[0] if positional else None)
        method = getattr(real, "__name__", code.co_name)
        if owner is not None and not isinstance(owner, type) and \
                callable(getattr(type(owner), method, None)):
            function = f"{type(owner).__name__}.{method}"
        else:
            function = getattr(real, "__qualname__", method)
        real_code = getattr(real, "__code__", None)
        if real_code is not None:
            location = f"{real_code.co_filename}:{real_code.co_firstlineno}"
        arguments = _bind(real, positional, keyword)
    else:
        named = code.co_varnames[:code.co_argcount]
        arguments = {**{a: f_locals[a] for a in named if a in f_locals}, **keyword}
    phase = phase_of(arguments)
    return FrameName(function + (f"[{phase}]" if phase else ""), location, code.co_name,
                     raw_location, phase)


def describe_change(previous: dict[str, list] | None, shapes: dict[str, list],
                    reasons: list[str]) -> str:
    """Human text of what changed vs the previous graph: ``"x dim 1: 17 -> 33"``."""
    parts: list[str] = []
    if previous and shapes:
        for name, dims in shapes.items():
            old = previous.get(name)
            if old is None:
                parts.append(f"{name}: new input {list(dims)}")
            elif len(old) != len(dims):
                parts.append(f"{name} shape: {list(old)} -> {list(dims)}")
            else:
                parts += [f"{name} dim {i}: {a} -> {b}"
                          for i, (a, b) in enumerate(zip(old, dims, strict=True)) if a != b]
        parts += [f"{name}: no longer passed" for name in previous if name not in shapes]
    if not parts:  # torch lists the last-used graph's failure first
        parts = [f"{n} dim {d}: {a} -> {b}" for n, d, a, b in size_mismatches(reasons[0])] \
            if reasons else []
    if not parts and reasons:  # not a size: the failed guard in plain words
        parts = [guard_text(reasons[0])]
    return _collapse(parts)


def _collapse(parts: list[str]) -> str:
    """Group the dims that made one change (``137 -> 115``: input_ids dim 1, position_ids dim 1,
    the mask's dim 2; every KV-cache layer's dim 2) into one phrase, each dim named once."""
    groups: dict[str, list[str]] = {}
    for part in parts:
        name, sep, rest = part.partition(" dim ")
        dim, colon, change = rest.partition(": ")
        if sep and colon:
            groups.setdefault(change, []).append(f"{name} dim {dim}")
        else:
            groups.setdefault(part, [])
    out = []
    for change, names in groups.items():
        if not names:
            out.append(change)
            continue
        out.append(f"{names[0]}: {change}{with_others(names[1:])}")
    return "; ".join(out)


def with_others(others: list[str]) -> str:
    """The dims beside the first one of a change: `` (with b dim 1 and c dim 2)``, past two
    `` (with b dim 1 and 3 more alike)``; "" for none. :func:`dims_named` counts them back."""
    if len(others) > 2:
        others = [others[0], f"{len(others) - 1} more alike"]
    return f" (with {' and '.join(others)})" if others else ""


def dims_named(phrase: str) -> int:
    """How many dims one phrase of a ``changed`` text names: ``a dim 1: 8 -> 16 (with b dim 1
    and 2 more alike)`` names 4 (:func:`with_others` wrote it)."""
    _, found, names = phrase.partition(" (with ")
    n = 1
    for name in names.rstrip(")").split(" and ") if found else []:
        count = name.removesuffix(" more alike")
        n += int(count) if count != name and count.isdigit() else 1
    return n


def _limit_shapes(previous: dict[str, list] | None, reasons: list[str]) -> dict[str, list]:
    """What is known of a limit-hit call's inputs: the previous shapes of the inputs a guard
    names, with the failed dims patched (torch traces nothing for a call it refuses)."""
    shapes: dict[str, list] = {}
    for name, dim, _, new in (size_mismatches(reasons[0]) if reasons else []):
        dims = shapes.setdefault(name, list((previous or {}).get(name, [])))
        if dim < len(dims):
            dims[dim] = new
    return {name: dims for name, dims in shapes.items() if dims}


def _break_metrics(site: BreakSite | None, reason: str, resumed: bool,
                   fallback_where: str = "") -> dict[str, Any]:
    """``metrics["graph_break"]``: the user frame that broke, torch's reason, its cause."""
    where = site.where if site else fallback_where
    stack = site.frames if site else []
    cause, words = break_cause(site.reason if site else reason, where, *stack)
    return {"where": where, "reason": site.reason if site and site.reason else reason,
            "cause": cause, "cause_text": words, "resumed": resumed, "stack": stack[-6:]}


def _frame_metrics(name: FrameName) -> dict[str, Any]:
    out: dict[str, Any] = {"frame": {"name": name.raw, "location": name.raw_location}}
    if name.phase:
        out["phase"] = name.phase
    return out


def _graph_kind(cached: Any, state: FunctionState) -> EventKind:
    """``first`` or ``recompile`` for a graph of one variant (``cached``: the graphs Dynamo held
    for its code object). A code that held none, or fewer than the variant last saw (a
    ``torch._dynamo.reset()`` since), starts the variant again. A variant's first graph here
    (``forward[decode]`` after ``forward[prefill]``, or code compiled before recording began)
    is its ``first`` though Dynamo counts a recompile of the code object (the count is kept)."""
    if cached == 0 or (cached is None and state.graphs == 0) or (
            isinstance(cached, int) and cached < state.graphs):
        state.shapes, state.graphs = None, 0
        return "first"
    return "first" if state.graphs == 0 else "recompile"


def assemble(parts: TracedParts, m: dict[str, Any], note: dict[str, Any] | None,
             state: FunctionState, name: FrameName, config_limit: int) -> CompileEvent:
    """The event for one compile (``m``: its metrics record; ``note``: torch's limit warning,
    if one came; ``name``: the compiled frame, named; ``config_limit``: the recompile limit in
    force); updates ``state``. A refused compile is a ``limit_hit`` even when no warning came
    (torch's dynamo logging silenced): its metrics say so."""
    cached = m.get("accumulated_cache_size")  # graphs Dynamo holds for this code already
    fail_type = str(m.get("fail_type") or "")
    limit = note or limit_failure(fail_type, m.get("fail_reason"))
    kind: EventKind
    if limit is not None:
        kind = "limit_hit"
        if not isinstance(limit.get("limit"), int):
            limit = {**limit, "limit": config_limit}
    elif fail_type == "Unsupported":  # Dynamo met code it cannot trace and ran the frame eagerly
        kind = "graph_break"
    elif fail_type:
        kind = "failed"
    else:
        kind = _graph_kind(cached, state)
    reasons, shapes = list(parts.reasons), dict(parts.inputs)
    if kind == "first":
        changed = ""
    elif kind == "limit_hit" and not shapes:  # torch traced nothing for the refused call
        shapes = _limit_shapes(state.shapes, reasons)
        changed = describe_change(None, shapes, reasons)
    else:
        changed = describe_change(state.shapes, shapes, reasons)
    if kind in ("failed", "graph_break") and m.get("fail_reason"):  # why it failed comes first
        reasons.insert(0, failure_reason(str(m["fail_reason"])))
    if kind in ("first", "recompile"):
        state.graphs = cached + 1 if isinstance(cached, int) else state.graphs + 1
        state.shapes = shapes
    device = parts.device or state.device  # a refused call traces no tensors
    state.device = device
    metrics: dict[str, Any] = {"dynamo": {k: m[k] for k in KEPT_METRICS
                                          if m.get(k) not in (None, [], "")}}
    metrics.update(_frame_metrics(name))
    if parts.dtypes:
        metrics["input_dtypes"] = {n: parts.dtypes[n] for n in shapes if n in parts.dtypes}
    if kind == "first" and isinstance(cached, int) and cached > 0:
        metrics["code_graphs_before"] = cached  # other variants' graphs, or earlier recordings
    if limit is not None:
        metrics["limit"] = {"name": limit["limit_type"], "value": limit["limit"]}
        if isinstance(limit["limit"], int) and limit["limit_type"] == "recompile_limit":
            # the code held the limit's graphs when torch refused (a shared wrapper's graphs of
            # other models, or graphs compiled before recording, included)
            state.graphs = max(state.graphs, limit["limit"])
    if kind == "graph_break":
        user = m.get("fail_user_frame_filename")
        at = f"{user}:{m.get('fail_user_frame_lineno')}" if user and not is_torch_file(user) else ""
        site = parts.breaks[-1] if parts.breaks else None
        metrics["graph_break"] = _break_metrics(site, reasons[0] if reasons else "", False,
                                                at or name.location)
        if at and site is not None and is_torch_file(site.where):
            metrics["graph_break"]["where"] = at
    return CompileEvent(
        compile_id=str(m.get("compile_id") or ""), function=name.function,
        location=name.location, backend=parts.backend or "", device=device or "",
        started_at=float(m.get("start_time") or time.time()),
        duration_s=float(m.get("entire_frame_compile_time_s") or 0.0),
        input_shapes=shapes, changed=changed, reasons=reasons, kind=kind,
        graph_count=state.graphs, metrics=metrics,
        cache_key=list(parts.lookups) if kind in ("first", "recompile") else [])


def break_events(parts: TracedParts, compiled: CompileEvent, name: FrameName) -> list[CompileEvent]:
    """One ``graph_break`` event per break a compiled frame resumed after (the graph it built is
    ``compiled``: Dynamo split the function there and compiles the rest as a resume function)."""
    if compiled.kind not in ("first", "recompile"):
        return []
    return [CompileEvent(
        compile_id=compiled.compile_id, function=name.function, location=name.location,
        backend=compiled.backend, device=compiled.device, started_at=compiled.started_at,
        reasons=[site.reason] if site.reason else [], kind="graph_break",
        graph_count=compiled.graph_count,
        metrics={**_frame_metrics(name), "graph_break": _break_metrics(site, site.reason, True)})
        for site in parts.breaks]


def backward_event(m: dict[str, Any], forward: CompileEvent | None, key: tuple,
                   lookups: list[dict[str, Any]] | None = None) -> CompileEvent:
    """The backward graph of a compile, from torch's ``bwd_compilation_metrics`` record:
    AOTAutograd builds it lazily at the graph's first ``.backward()`` (and on Neuron its NEFF
    build follows). It belongs to its forward compile (``forward``: same compile id, function,
    shapes and, in the recorder, step), whichever thread autograd ran it on."""
    compile_id = str(m.get("compile_id") or f"{key[0]}/{key[1]}")
    fwd = forward or CompileEvent(function="?")
    start_us, duration_us = m.get("start_time_us"), m.get("duration_us")
    if not isinstance(duration_us, (int, float)):
        duration_us = m.get("backward_cumulative_compile_time_us")
    dynamo = {k: m[k] for k in ("graph_node_count", "graph_op_count") if m.get(k) is not None}
    return CompileEvent(
        compile_id=compile_id, function=fwd.function, location=fwd.location, backend=fwd.backend,
        device=fwd.device, input_shapes={n: list(d) for n, d in fwd.input_shapes.items()},
        started_at=start_us / 1e6 if isinstance(start_us, (int, float)) else time.time(),
        duration_s=duration_us / 1e6 if isinstance(duration_us, (int, float)) else 0.0,
        changed="backward graph", kind="backward", graph_count=fwd.graph_count,
        reasons=[f"the backward graph of compile {compile_id}, built at its first .backward()"],
        metrics={"dynamo": dynamo, **{k: v for k, v in fwd.metrics.items()
                                      if k in ("frame", "phase", "input_dtypes")}},
        cache_key=list(lookups or ()))
