"""Assembling one CompileEvent from what torch's trace said about a compile: pure, no torch.

The trace delivers, per compile, the input tensors with their sources, the guard-failure reasons
and, last, the ``compilation_metrics`` record; a refused compile (recompile-limit hit) traces no
inputs and its warning names the function. :func:`assemble` classifies the compile (first,
recompile, limit_hit, failed), says what changed against the function's previous graph and
updates that function's :class:`FunctionState`.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any

from .._torch_text import failure_reason, first_guard, size_mismatches
from ..events import CompileEvent, EventKind

__all__ = ["FunctionState", "TracedParts", "assemble", "describe_change"]

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


@dataclass
class FunctionState:
    """Per (function, location): the last graph's input shapes, graphs so far, the device."""

    shapes: dict[str, list] | None = None
    graphs: int = 0
    device: str | None = None


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
    if not parts and reasons:  # not a size: the failed guard itself, without torch's comment
        parts = [f"guard failed: {first_guard(reasons[0])}"]
    return _collapse(parts)


def _collapse(parts: list[str]) -> str:
    """Group identical changes on many inputs (e.g. every KV-cache layer) into one phrase."""
    if len(parts) <= 2:
        return "; ".join(parts)
    groups: dict[str, list[str]] = {}
    for part in parts:
        name, sep, rest = part.partition(" dim ")
        groups.setdefault(f"dim {rest}" if sep else part, []).append(name if sep else "")
    out = []
    for change, names in groups.items():
        if names[0] and len(names) > 1:
            out.append(f"{names[0]} {change} (and {len(names) - 1} more inputs alike)")
        else:
            out.append(f"{names[0]} {change}" if names[0] else change)
    return "; ".join(out)


def _limit_shapes(previous: dict[str, list] | None, reasons: list[str]) -> dict[str, list]:
    """What is known of a limit-hit call's inputs: the previous shapes of the inputs a guard
    names, with the failed dims patched (torch traces nothing for a call it refuses)."""
    shapes: dict[str, list] = {}
    for name, dim, _, new in (size_mismatches(reasons[0]) if reasons else []):
        dims = shapes.setdefault(name, list((previous or {}).get(name, [])))
        if dim < len(dims):
            dims[dim] = new
    return {name: dims for name, dims in shapes.items() if dims}


def assemble(parts: TracedParts, m: dict[str, Any], note: dict[str, Any] | None,
             state: FunctionState, function: str, location: str,
             config_limit: int) -> CompileEvent:
    """The event for one compile (``m``: its metrics record; ``note``: torch's limit warning,
    if one came; ``config_limit``: the recompile limit in force); updates ``state``."""
    cached = m.get("accumulated_cache_size")  # graphs Dynamo holds for this code already
    fail_type = str(m.get("fail_type") or "")
    limit = None
    kind: EventKind
    if (note or "RecompileLimit" in fail_type
            or "recompile limit" in str(m.get("fail_reason") or "").lower()):
        kind = "limit_hit"
        limit = note or {"limit_type": "recompile_limit", "limit": config_limit}
    elif fail_type:
        kind = "failed"
    elif cached == 0 or (cached is None and state.graphs == 0):
        kind = "first"  # also after torch._dynamo.reset()
        state.shapes, state.graphs = None, 0
    else:
        kind = "recompile"
    reasons, shapes = list(parts.reasons), dict(parts.inputs)
    if kind == "first":
        changed = ""
    elif kind == "limit_hit" and not shapes:  # torch traced nothing for the refused call
        shapes = _limit_shapes(state.shapes, reasons)
        changed = describe_change(None, shapes, reasons)
    else:
        changed = describe_change(state.shapes, shapes, reasons)
    if kind == "failed" and m.get("fail_reason"):  # why it failed comes first
        reasons.insert(0, failure_reason(str(m["fail_reason"])))
    if kind in ("first", "recompile"):
        state.graphs = cached + 1 if isinstance(cached, int) else state.graphs + 1
        state.shapes = shapes
    device = parts.device or state.device  # a refused call traces no tensors
    state.device = device
    metrics: dict[str, Any] = {"dynamo": {k: m[k] for k in KEPT_METRICS
                                          if m.get(k) not in (None, [], "")}}
    if limit is not None:
        metrics["limit"] = {"name": limit["limit_type"], "value": limit["limit"]}
        if not state.graphs and isinstance(limit["limit"], int):
            state.graphs = limit["limit"]  # its graphs were compiled before recording
    return CompileEvent(
        compile_id=str(m.get("compile_id") or ""), function=function, location=location,
        backend=parts.backend or "", device=device or "",
        started_at=float(m.get("start_time") or time.time()),
        duration_s=float(m.get("entire_frame_compile_time_s") or 0.0),
        input_shapes=shapes, changed=changed, reasons=reasons, kind=kind,
        graph_count=state.graphs, metrics=metrics)
