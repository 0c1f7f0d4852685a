"""The Dynamo source: one handler on torch's structured trace, shared by every recorder.

torch's in-process structured trace (what ``TORCH_TRACE`` writes to files; logger
``torch.__trace``) delivers, per Dynamo compile, the input tensors and their sources, every
guard-failure reason and, last, the ``compilation_metrics`` record. The tap gathers the parts and,
when the last record arrives, has ``assemble`` build the event and hands it to every attached sink,
exactly once (a frame compiled up to a graph break adds a ``graph_break`` event). Each compile
is also announced while it runs (``starts.py``): at ``dynamo_start`` (the frame named, before any
tracing), again at its first traced input and at ``dynamo_output_graph`` (all inputs traced, the
backend compile follows), ended by its event; on Neuron a pending NEFF build is then announced. The compiled
frame is named from Dynamo's own arguments on the stack (``name_frame``): transformers' shared
decode wrapper ``wrapped_func`` becomes ``Qwen3ForCausalLM.forward[decode]``, torch's name staying
in ``metrics["frame"]``. No Dynamo callbacks are used, so ``torch._dynamo.reset()`` (which wipes
them) cannot unhook it; warm calls emit no trace records, so it costs nothing on them. A logging
filter on ``torch._dynamo.convert_frame`` reads torch's recompile-limit warning and hides it when
every sink is quiet; with dynamo logging silenced the metrics record alone says it was a hit.

Here live most of neuronkit's uses of torch's private Dynamo internals (the trace logger, the
frames of ``convert_frame._compile``, the compile context, the instruction translator, the
recompile-context hooks of :func:`add_recompile_context`). The others: ``sources/neuron.py``
(Dynamo's ``counters``), ``sources/kernel_forecast.py`` (``torch._dynamo.disable``'s wrapper and
``output_graph``'s graph marker), ``setup/decode_graphs.py`` (a code's cache entries and its run-only
mark) and ``workloads/recompile_limit.py`` (``torch._dynamo.config.patch`` of the limits).
"""
from __future__ import annotations

import dataclasses
import logging
import sys
import threading
import time
from types import FrameType
from typing import Any, Callable

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.sources.assemble import (
    FrameName,
    FunctionState,
    TracedParts,
    assemble,
    backward_event,
    break_events,
    name_frame,
)
from neuronkit.sources.cache_keys import CACHE_ARTIFACTS, lookup_of
from neuronkit.sources.neuron import NEURON, awaits_build
from neuronkit.sources.sink import EventSink, say
from neuronkit.sources.starts import CompileStart, device_start
from neuronkit.sources.torch_text import break_site, input_name, limit_note, parse_device, parse_reasons

__all__ = ["TAP", "add_recompile_context"]

_TRACE_LOGGER = "torch.__trace"                   # torch._logging._internal.trace_log
_LIMIT_LOGGER = "torch._dynamo.convert_frame"      # logs "torch._dynamo hit config.recompile_limit"


def _config_limit() -> int:
    import torch._dynamo

    return int(torch._dynamo.config.recompile_limit)


def _compile_id(key: tuple) -> str:
    """The running compile's id as its metrics record will give it (``"0/1"``)."""
    from torch._guards import CompileContext

    current = CompileContext.current_compile_id()
    return str(current) if current is not None else f"{key[0]}/{key[1]}"


def _compiled_frame() -> FrameName | None:
    """The frame Dynamo is compiling, named: read from ``convert_frame._compile``'s arguments
    (``code``, ``locals``, ``closure``) on the current stack. Every trace record of a compile,
    its metrics record and the recompile-limit warning included, is written inside that call."""
    frame: FrameType | None = sys._getframe(1)
    for _ in range(200):
        if frame is None:
            return None
        code = frame.f_code
        if code.co_name == "_compile" and code.co_filename.endswith("convert_frame.py"):
            args = frame.f_locals
            if "code" in args:
                return name_frame(args["code"], args.get("locals"), args.get("closure"))
        frame = frame.f_back
    return None


class _Tap(logging.Handler):
    """One handler on torch's structured trace, shared by every attached sink."""

    def __init__(self) -> None:
        super().__init__(level=logging.DEBUG)
        self.sinks: list[EventSink] = []
        self.pending: dict[tuple, TracedParts] = {}         # (frame_id, frame_compile_id) -> parts
        self.started: dict[tuple, CompileStart] = {}        # the same key -> compile in progress
        self.frames: dict[Any, FrameName] = {}              # frame_id -> its last name
        self.functions: dict[tuple[str, str], FunctionState] = {}
        self.forwards: dict[tuple, CompileEvent] = {}       # the same key -> its graph's event
        self.limit_notes: dict[int, dict[str, Any]] = {}    # thread id -> torch's limit warning
        self.errors: list[BaseException] = []
        self._saved_level: int | None = None
        self._guard = threading.RLock()   # attach / detach from any thread

    # -- attach / detach ----------------------------------------------------------------
    def attach(self, sink: EventSink) -> None:
        with self._guard:
            if not self.sinks:
                trace = logging.getLogger(_TRACE_LOGGER)
                self._saved_level = trace.level
                if trace.level == logging.NOTSET or trace.level > logging.DEBUG:
                    trace.setLevel(logging.DEBUG)
                trace.addHandler(self)
                logging.getLogger(_LIMIT_LOGGER).addFilter(self.limit_filter)
                NEURON.begin()  # graphs compiled before recording are not ours
            self.sinks.append(sink)

    def detach(self, sink: EventSink) -> None:
        with self._guard:
            if sink in self.sinks:
                self.sinks.remove(sink)
            if not self.sinks:
                trace = logging.getLogger(_TRACE_LOGGER)
                trace.removeHandler(self)
                if self._saved_level is not None:
                    trace.setLevel(self._saved_level)
                logging.getLogger(_LIMIT_LOGGER).removeFilter(self.limit_filter)
                self.pending.clear()
                self.started.clear()
                self.limit_notes.clear()

    # -- torch's recompile-limit warning: remember it, and hide it when quiet -----------
    def limit_filter(self, record: logging.LogRecord) -> bool:
        try:
            note = limit_note(str(record.msg), record.args)
        except Exception as exc:  # torch changed its message: still record the event, from metrics
            self.errors.append(exc)
            return True
        if note is None:
            return True
        try:  # the refused call's own name (a shared wrapper serves several models)
            note["name"] = _compiled_frame()
        except Exception as exc:
            self.errors.append(exc)
        self.limit_notes[threading.get_ident()] = note
        return not all(s.quiet for s in list(self.sinks))

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
                f"incomplete (all errors: neuronkit.sources.dynamo.TAP.errors)")

    def _on_record(self, md: dict[str, Any], payload: Any) -> None:
        key = (md.get("frame_id"), md.get("frame_compile_id"))
        if "compilation_metrics" in md:
            self._finish(key, md["compilation_metrics"])
            return
        if "bwd_compilation_metrics" in md:  # the lazy backward graph, at the first .backward()
            lookups = (self.pending.pop(key, None) or TracedParts()).lookups  # its cache lookups
            self._hand_out(backward_event(md["bwd_compilation_metrics"], self.forwards.get(key),
                                          key, lookups))
            return
        if any(name.endswith("compilation_metrics") for name in md):  # runtime
            self.pending.pop(key, None)
            return
        if "dynamo_start" in md:
            self._start(key)
            return
        if not any(name in md for name in ("describe_tensor", "describe_source", "artifact",
                                           "dynamo_output_graph")):
            return
        if key not in self.pending and len(self.pending) > 64:  # never finished: drop the oldest
            self.pending.pop(next(iter(self.pending)))
        self._on_part(key, self.pending.setdefault(key, TracedParts()), md, payload)

    def _on_part(self, key: tuple, parts: TracedParts, md: dict[str, Any], payload: Any) -> None:
        """One traced part of a compile: an input tensor, its source, an artifact (recompile
        reasons, a graph break, a cache lookup), or the output graph (all inputs traced)."""
        if "describe_tensor" in md:
            t = md["describe_tensor"]
            size = None if t.get("is_parameter") else t.get("size")
            parts.tensors[(t.get("describer_id"), t.get("id"))] = (size, t.get("device"),
                                                                   t.get("dtype"))
        elif "describe_source" in md:
            s = md["describe_source"]
            size, device, dtype = parts.tensors.get((s.get("describer_id"), s.get("id")),
                                                    (None, None, None))
            source = str(s.get("source", ""))
            if size is not None and "._parameters[" not in source and "._buffers[" not in source:
                parts.inputs[input_name(source)] = list(size)
                if dtype:
                    parts.dtypes[input_name(source)] = str(dtype).removeprefix("torch.")
                parts.device = parts.device or parse_device(device)  # where it really ran
                if len(parts.inputs) == 1:  # the first input: its start shows something at once
                    self._traced(key, parts, done=False)
        elif "artifact" in md:
            name = md["artifact"].get("name")
            if name == "recompile_reasons":
                parts.reasons = parse_reasons(payload)
            elif name in CACHE_ARTIFACTS:  # an FX graph or AOTAutograd cache lookup
                lookup = lookup_of(name, payload)
                if lookup is not None and len(parts.lookups) < 16:
                    parts.lookups.append(lookup)
            elif name == "dynamo_graph_break_reason":
                site = break_site(payload)
                if site is not None:
                    parts.breaks.append(site)
        else:
            parts.backend = self._current_backend()
            self._traced(key, parts, done=True)

    # -- compiles in progress -----------------------------------------------------------
    def _start(self, key: tuple) -> None:
        """A Dynamo compile begins: announce it, named, before any tracing."""
        try:
            name = _compiled_frame() or self.frames.get(key[0]) or FrameName("?", "")
        except Exception as exc:  # torch moved _compile: named from the last compile of the frame
            self._error(exc)
            name = self.frames.get(key[0]) or FrameName("?", "")
        if key not in self.started and len(self.started) > 64:  # never finished: end the oldest
            self._announce(self._ended(self.started.pop(next(iter(self.started)))))
        self.started[key] = CompileStart(compile_id=_compile_id(key), function=name.function,
                                         location=name.location)
        self._announce(self.started[key])

    def _traced(self, key: tuple, parts: TracedParts, done: bool) -> None:
        """The start learns the input shapes traced so far (``done``: all of them, and the
        backend)."""
        start = self.started.get(key)
        if start is None:
            return
        update = dataclasses.replace(
            start, input_shapes={n: list(d) for n, d in parts.inputs.items()},
            backend=parts.backend or "", traced=done)
        if update != start:
            self.started[key] = update
            self._announce(update)

    @staticmethod
    def _ended(start: CompileStart) -> CompileStart:
        return dataclasses.replace(start, ended_at=time.time())

    def _announce(self, start: CompileStart) -> None:
        for sink in list(self.sinks):
            try:
                sink.receive_start(start)
            except Exception as exc:
                self._error(exc)

    @staticmethod
    def _current_backend() -> str | None:
        from torch._dynamo.symbolic_convert import InstructionTranslator

        tx = InstructionTranslator.current_tx()
        fn = getattr(getattr(tx, "output", None), "compiler_fn", None)
        name = getattr(fn, "compiler_name", None) or getattr(fn, "__name__", None)
        return str(name) if name else None

    def _finish(self, key: tuple, m: dict[str, Any]) -> None:
        """The compile's last record: assemble its event and hand it to every sink."""
        parts = self.pending.pop(key, None) or TracedParts()
        note = self.limit_notes.pop(threading.get_ident(), None)
        start = self.started.pop(key, None)
        try:
            name = self._frame_name(key, m, note)
            state = self.functions.setdefault((name.function, name.location), FunctionState())
            event = assemble(parts, m, note, state, name, _config_limit())
            event.compile_id = event.compile_id or f"{key[0]}/{key[1]}"
            if event.kind in GRAPH_KINDS:  # its backward graph may follow, lazily
                if len(self.forwards) > 256:
                    self.forwards.pop(next(iter(self.forwards)))
                self.forwards[key] = event
            for e in [event, *break_events(parts, event, name)]:
                self._hand_out(e)
        finally:  # each sink ended it on receiving the event; this is in case one did not
            if start is not None:
                self._announce(self._ended(start))
        if event.kind == "limit_hit":
            _warn_limit(event)

    def _frame_name(self, key: tuple, m: dict[str, Any], note: dict[str, Any] | None) -> FrameName:
        """The compile's frame, named: from Dynamo's frame on the stack, else from the metrics
        record, else (a limit hit's record names no function) torch's warning or the last
        name of the same frame id."""
        try:
            name = (note or {}).get("name") or _compiled_frame()
        except Exception as exc:  # torch moved _compile: the raw names below
            self._error(exc)
            name = None
        if name is None and m.get("co_name"):
            where = f"{m.get('co_filename')}:{m.get('co_firstlineno')}"
            name = FrameName(str(m["co_name"]), where)
        elif name is None and note and note["function"]:
            name = FrameName(note["function"], note["location"])
        name = name or self.frames.get(key[0]) or FrameName("?", "")
        self.frames[key[0]] = name
        return name

    def _hand_out(self, event: CompileEvent) -> None:
        try:
            NEURON.note_compile(event)  # which NEFF builds are its own; resolved at a safe point
        except Exception as exc:  # a broken torch_neuronx must not cost the event
            self._error(exc)
        for sink in list(self.sinks):
            try:
                received = sink.receive(event)
                if received is not None and awaits_build(received):  # the first call waits
                    sink.receive_start(device_start(received))
            except Exception as exc:  # e.g. its log file became unwritable: the others go on
                self._error(exc)


def add_recompile_context(label: Callable[[], str]) -> Callable[[], None]:
    """Hand ``label()`` to torch's own ``recompile_user_contexts`` metric of every compile;
    returns the function that takes it back."""
    import torch._dynamo

    hook = lambda: label()  # noqa: E731  (a hook of its own, removed by identity)
    torch._dynamo.register_hook_for_recompile_user_context(hook)

    def remove() -> None:
        from torch._dynamo import utils

        hooks = getattr(utils, "_recompile_user_contexts", None) or []
        if hook in hooks:
            hooks.remove(hook)
    return remove


def _warn_limit(event: CompileEvent) -> None:
    """Say, once per limit hit, what torch does silently: the function now runs eager."""
    name, value = event.metrics["limit"]["name"], event.metrics["limit"]["value"]
    message = (f"neuronkit: {event.function} hit torch._dynamo.config.{name} ({value} graphs): "
               f"torch now runs it EAGER (uncompiled) for new input shapes. Changed: "
               f"{event.changed or 'see the event reasons'}. Pad inputs to a few fixed shapes "
               f"(nk.Buckets), or raise torch._dynamo.config.{name}.")
    say(message, event.location)

TAP = _Tap()
