"""Where compile events come from: one handler on torch's structured trace, shared by recorders.

torch's in-process structured trace (what ``TORCH_TRACE`` writes to files; logger
``torch.__trace``) delivers, per Dynamo compile, the input tensors and their sources, every
guard-failure reason (``recompile_reasons``) and, last, the ``compilation_metrics`` record. The
tap assembles an event when that last record arrives, so each event is complete and emitted
exactly once, to every active ``CompileRecorder``. No Dynamo callbacks are used, so
``torch._dynamo.reset()`` (which wipes them) cannot unhook it; warm calls emit no trace records,
so it costs nothing on them. A logging filter on ``torch._dynamo.convert_frame`` reads torch's
recompile-limit warning (the only place naming the function that hit it) and hides it when quiet.

With ``recorder.py`` (its public face), the only module that touches ``torch._dynamo`` /
``torch._logging`` internals.
"""
from __future__ import annotations

import contextlib
import json
import logging
import re
import threading
import time
import warnings
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .recorder import CompileRecorder

_TRACE_LOGGER = "torch.__trace"                   # torch._logging._internal.trace_log
_LIMIT_LOGGER = "torch._dynamo.convert_frame"      # logs "torch._dynamo hit config.recompile_limit"
_LIMIT_MSG = "torch._dynamo hit config."
_SIZE_MISMATCH = re.compile(r"tensor '(?P<name>.+?)' size mismatch at index (?P<dim>\d+)\. "
                            r"expected (?P<old>-?\d+), actual (?P<new>-?\d+)")
_FUNC_INFO = re.compile(r"^'(?P<name>.*)' \((?P<location>.*)\)$")
_SOURCE_ROOT = re.compile(r"^[LG]\['(?P<name>[^']*)'\]")
_DEVICE = re.compile(r"type='(?P<type>\w+)'(?:, index=(?P<index>\d+))?")
_KEPT_METRICS = ("guard_count", "graph_node_count", "graph_op_count", "graph_input_count",
                 "cache_size", "accumulated_cache_size", "backend_compile_time_s",
                 "inductor_compile_time_s", "fail_type", "fail_reason", "recompile_user_contexts")


# --------------------------------------------------------------------------- small pure helpers

def input_name(source: str) -> str:
    """Dynamo's source text -> the user-facing name: ``L['x']`` -> ``x`` (as guards print it)."""
    return _SOURCE_ROOT.sub(lambda m: m.group("name"), source, count=1)


def parse_device(text: Any) -> str | None:
    """torch's device text -> a device string: ``"device(type='cuda', index=1)"`` -> ``"cuda:1"``."""
    match = _DEVICE.search(str(text or ""))
    if match is None:
        return None
    return f"{match['type']}:{match['index']}" if match["index"] else match["type"]


def parse_reasons(payload: Any) -> list[str]:
    """The ``recompile_reasons`` payload (one string, or a JSON list) -> a list of reasons."""
    if payload is None:
        return []
    if isinstance(payload, str) and payload.startswith("["):
        try:
            payload = json.loads(payload)
        except ValueError:
            return [payload]
    return [str(r) for r in payload] if isinstance(payload, list) else [str(payload)]


def failure_reason(text: str, width: int = 160) -> str:
    """torch's failure message in one line: the whole text when short, else its first line
    (the graph-break type: ``Attempted to call function marked as skipped``)."""
    lines = [line.strip() for line in text.strip().splitlines() if line.strip()]
    whole = " ".join(lines)
    if len(whole) <= width or not lines:
        return whole
    first = lines[0]
    if first.endswith(":") and len(lines) > 1:  # "backend='x' raised:" says nothing alone
        first = f"{first} {lines[1]}"
    return first


def _mismatches(reasons: list[str]) -> list[tuple[str, int, int, int]]:
    """(name, dim, old, new) from the first reason (torch lists the last-used graph first)."""
    first = reasons[0] if reasons else ""
    return [(m["name"], int(m["dim"]), int(m["old"]), int(m["new"]))
            for m in _SIZE_MISMATCH.finditer(first)]


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
                parts += [f"{name} dim {i}: {a} -> {b}" for i, (a, b) in enumerate(zip(old, dims))
                          if a != b]
        parts += [f"{name}: no longer passed" for name in previous if name not in shapes]
    if not parts:
        parts = [f"{n} dim {d}: {a} -> {b}" for n, d, a, b in _mismatches(reasons)]
    if not parts and reasons:  # not a size: the failed guard itself, without torch's comment
        first_line = (reasons[0].split(": ", 1)[-1].splitlines() or [""])[0]
        parts = [f"guard failed: {first_line.split('  #')[0].strip()}"]
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
    for name, dim, _, new in _mismatches(reasons):
        dims = shapes.setdefault(name, list((previous or {}).get(name, [])))
        if dim < len(dims):
            dims[dim] = new
    return {name: dims for name, dims in shapes.items() if dims}


def _config_limit() -> int:
    import torch._dynamo

    return int(torch._dynamo.config.recompile_limit)


# --------------------------------------------------------------------------- the shared tap

class _Tap(logging.Handler):
    """One handler on torch's structured trace, shared by every active recorder."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.recorders: list[CompileRecorder] = []
        self.pending: dict[tuple, dict[str, Any]] = {}       # (frame_id, frame_compile_id) -> parts
        self.frames: dict[Any, tuple[str, str]] = {}         # frame_id -> (function, location)
        self.functions: dict[tuple[str, str], dict[str, Any]] = {}   # last shapes, graphs
        self.limit_notes: dict[int, dict[str, Any]] = {}     # thread id -> torch's limit warning
        self.errors: list[BaseException] = []
        self.neuron_seen: tuple[int, int] = (0, 0)     # (id of torch_neuronx, entries seen)
        self._saved_level: int | None = None

    # -- install / remove (under the handler's lock) ---------------------------------
    def add(self, recorder: CompileRecorder) -> None:
        with self.lock:
            if not self.recorders:
                trace = logging.getLogger(_TRACE_LOGGER)
                self._saved_level = trace.level
                if trace.level == logging.NOTSET or trace.level > logging.DEBUG:
                    trace.setLevel(logging.DEBUG)
                trace.addHandler(self)
                logging.getLogger(_LIMIT_LOGGER).addFilter(self.limit_filter)
                try:
                    self._neuron_metrics()  # graphs compiled before recording are not ours
                except Exception as exc:
                    self._error(exc)
            self.recorders.append(recorder)

    def remove(self, recorder: CompileRecorder) -> None:
        with self.lock:
            if recorder in self.recorders:
                self.recorders.remove(recorder)
            if not self.recorders:
                trace = logging.getLogger(_TRACE_LOGGER)
                trace.removeHandler(self)
                if self._saved_level is not None:
                    trace.setLevel(self._saved_level)
                logging.getLogger(_LIMIT_LOGGER).removeFilter(self.limit_filter)
                self.pending.clear()
                self.limit_notes.clear()

    # -- torch's recompile-limit warning: remember it, and hide it when quiet -----------
    def limit_filter(self, record: logging.LogRecord) -> bool:
        if not str(record.msg).startswith(_LIMIT_MSG):
            return True
        try:
            limit_type, limit, func = record.args[0], record.args[1], record.args[2]
            match = _FUNC_INFO.match(str(func))
            function, location = (match["name"], match["location"]) if match else ("", "")
            self.limit_notes[threading.get_ident()] = dict(
                limit_type=str(limit_type), limit=limit, function=function, location=location)
        except Exception as exc:  # torch changed its message: still record the event, from metrics
            self.errors.append(exc)
        return not all(r.quiet for r in list(self.recorders))

    # -- the structured trace ---------------------------------------------------------
    def emit(self, record: logging.LogRecord) -> None:
        try:
            metadata = getattr(record, "metadata", None)
            if metadata:
                self._on_record(metadata, getattr(record, "payload", None))
        except Exception as exc:  # never break the user's compile
            self._error(exc)

    def _error(self, exc: Exception) -> None:
        self.errors.append(exc)
        if len(self.errors) == 1:  # say so once
            say(f"neuronkit failed to record a compile event ({exc!r}); compile events may be "
                f"incomplete (all errors: neuronkit.recorder_sources.TAP.errors)")

    def _on_record(self, md: dict[str, Any], payload: Any) -> None:
        key = (md.get("frame_id"), md.get("frame_compile_id"))
        if "compilation_metrics" in md:
            self._finish(key, md["compilation_metrics"])
            return
        if any(name.endswith("compilation_metrics") for name in md):  # backward, runtime
            self.pending.pop(key, None)
            return
        if not any(name in md for name in ("describe_tensor", "describe_source", "artifact",
                                           "dynamo_output_graph")):
            return
        if key not in self.pending and len(self.pending) > 64:  # never finished: drop the oldest
            self.pending.pop(next(iter(self.pending)))
        parts = self.pending.setdefault(key, {"reasons": [], "tensors": {}, "inputs": {},
                                              "backend": None, "device": None})
        if "describe_tensor" in md:
            t = md["describe_tensor"]
            size = None if t.get("is_parameter") else t.get("size")
            parts["tensors"][(t.get("describer_id"), t.get("id"))] = (size, t.get("device"))
        elif "describe_source" in md:
            s = md["describe_source"]
            size, device = parts["tensors"].get((s.get("describer_id"), s.get("id")), (None, None))
            source = str(s.get("source", ""))
            if size is not None and "._parameters[" not in source and "._buffers[" not in source:
                parts["inputs"][input_name(source)] = list(size)
                parts["device"] = parts["device"] or parse_device(device)  # where it really ran
        elif "artifact" in md:
            if md["artifact"].get("name") == "recompile_reasons":
                parts["reasons"] = parse_reasons(payload)
        else:
            parts["backend"] = self._current_backend()

    @staticmethod
    def _current_backend() -> str | None:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        fn = getattr(getattr(tx, "output", None), "compiler_fn", None)
        name = getattr(fn, "compiler_name", None) or getattr(fn, "__name__", None)
        return str(name) if name else None

    def _finish(self, key: tuple, m: dict[str, Any]) -> None:
        """The compile's last record: assemble its event and hand it to every recorder."""
        parts = self.pending.pop(key, None) or {"reasons": [], "inputs": {}, "backend": None,
                                                "device": None}
        note = self.limit_notes.pop(threading.get_ident(), None)
        function, location = m.get("co_name") or "", ""
        if function:  # a limit hit's record names no function: take it from torch's warning
            location = f"{m.get('co_filename')}:{m.get('co_firstlineno')}"
            self.frames[key[0]] = (function, location)
        elif note and note["function"]:
            function, location = note["function"], note["location"]
        else:
            function, location = self.frames.get(key[0], ("?", ""))
        state = self.functions.setdefault((function, location),
                                          {"shapes": None, "graphs": 0, "device": None})
        cached = m.get("accumulated_cache_size")  # graphs Dynamo holds for this code already
        fail_type = str(m.get("fail_type") or "")
        if (note or "RecompileLimit" in fail_type
                or "recompile limit" in str(m.get("fail_reason") or "").lower()):
            kind = "limit_hit"
            limit = note or {"limit_type": "recompile_limit", "limit": _config_limit()}
        elif fail_type:
            kind = "failed"
        elif cached == 0 or (cached is None and state["graphs"] == 0):
            kind = "first"  # also after torch._dynamo.reset()
            state.update(shapes=None, graphs=0)
        else:
            kind = "recompile"
        reasons, shapes = list(parts["reasons"]), dict(parts["inputs"])
        if kind == "first":
            changed = ""
        elif kind == "limit_hit" and not shapes:  # torch traced nothing for the refused call
            shapes = _limit_shapes(state["shapes"], reasons)
            changed = describe_change(None, shapes, reasons)
        else:
            changed = describe_change(state["shapes"], shapes, reasons)
        if kind == "failed" and m.get("fail_reason"):  # why it failed comes first
            reasons.insert(0, failure_reason(str(m["fail_reason"])))
        if kind in ("first", "recompile"):
            state["graphs"] = cached + 1 if isinstance(cached, int) else state["graphs"] + 1
            state["shapes"] = shapes
        device = parts["device"] or state.get("device")  # a refused call traces no tensors
        state["device"] = device
        metrics: dict[str, Any] = {"dynamo": {k: m[k] for k in _KEPT_METRICS
                                              if m.get(k) not in (None, [], "")}}
        if kind == "limit_hit":
            metrics["limit"] = {"name": limit["limit_type"], "value": limit["limit"]}
            if not state["graphs"] and isinstance(limit["limit"], int):
                state["graphs"] = limit["limit"]  # its graphs were compiled before recording
        try:
            neuron = self._neuron_metrics()
        except Exception as exc:  # a broken torch_neuronx must not cost the event
            self._error(exc)
            neuron = []
        if neuron:
            metrics["neuron"] = neuron
        raw = dict(compile_id=str(m.get("compile_id") or f"{key[0]}/{key[1]}"), function=function,
                   location=location, backend=parts["backend"] or "", device=device,
                   started_at=float(m.get("start_time") or time.time()),
                   duration_s=float(m.get("entire_frame_compile_time_s") or 0.0),
                   input_shapes=shapes, changed=changed, reasons=reasons, kind=kind,
                   graph_count=state["graphs"], metrics=metrics)
        for recorder in list(self.recorders):
            try:
                recorder._record(raw)
            except Exception as exc:  # e.g. its log file became unwritable: the others go on
                self._error(exc)
        if kind == "limit_hit":
            _warn_limit(raw)

    def _neuron_metrics(self) -> list[Any]:
        """New per-graph entries of torch-neuronx's dynamo metrics (``device.py``) since the last
        event."""
        from .device import import_neuronx, neuron_dynamo_metrics

        entries = neuron_dynamo_metrics()
        module = import_neuronx() if entries else None  # already imported when it has entries
        owner, seen = self.neuron_seen
        if owner != id(module) or len(entries) < seen:  # another module, or it reset its table
            seen = 0
        self.neuron_seen = (id(module), len(entries))
        return entries[seen:]


def _warn_limit(raw: dict[str, Any]) -> None:
    """Say, once per limit hit, what torch does silently: the function now runs eager."""
    name, value = raw["metrics"]["limit"]["name"], raw["metrics"]["limit"]["value"]
    message = (f"neuronkit: {raw['function']} hit torch._dynamo.config.{name} ({value} graphs): "
               f"torch now runs it EAGER (uncompiled) for new input shapes. Changed: "
               f"{raw['changed'] or 'see the event reasons'}. Pad inputs to a few fixed shapes "
               f"(nk.Buckets), or raise torch._dynamo.config.{name}.")
    say(message, raw["location"])


def say(message: str, location: str = "") -> None:
    """A RuntimeWarning (at ``file:line`` if given) that never raises into torch's compile."""
    filename, _, line = location.rpartition(":")
    with contextlib.suppress(Warning):  # warnings turned into errors must not break the compile
        if filename and line.isdigit():
            warnings.warn_explicit(message, RuntimeWarning, filename, int(line))
        else:
            warnings.warn(message, RuntimeWarning, stacklevel=3)


TAP = _Tap()
