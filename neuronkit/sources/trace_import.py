"""Compile logs from torch's structured-trace files (``TORCH_TRACE=DIR``, what tlparse reads).

A run on a machine without neuronkit can be studied later: :func:`read_torch_trace` reads every
trace file in a folder into compile events with the live recorder's
kinds, changes and per-function graph counts (the same pure helpers build both). Each file is one
process; its rank comes from the file name (``..._rank_1_...``), else its records' ``rank``,
else 0. Several files are merged in start-time order.

What a trace cannot tell, so imported events leave it empty: the backend's name, neuronkit's
contexts (``nk.context``), the wall time of the run, ``eager_fallback`` calls after a limit hit
(torch records nothing for them), eager-op ``kernels`` and NEFF build times and cache states.
Functions keep torch's code names (``wrapped_func``, not ``Qwen3ForCausalLM.forward[decode]``):
the live recorder names them from the running frame, which a file does not hold.

A trace file is untrusted input: a line that is not a trace record, a record of the wrong shape
and an event that fails the log schema are skipped with one warning per file naming the lines;
a compile cut off before its metrics record (a truncated file) gives no event.
"""
from __future__ import annotations

import dataclasses
import json
import os
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import in_start_order
from neuronkit.events.schema import FORMAT, FORMAT_VERSION, explain_event
from neuronkit.safe import strip_control
from neuronkit.sources.assemble import (
    FrameName,
    FunctionState,
    TracedParts,
    assemble,
    backward_event,
    break_events,
)
from neuronkit.sources.cache_keys import CACHE_ARTIFACTS, lookup_of
from neuronkit.sources.torch_logs import trace_file_rank, trace_record
from neuronkit.sources.torch_text import break_site, input_name, parse_device, parse_reasons

__all__ = ["is_trace_folder", "read_torch_trace", "trace_files"]

_DEFAULT_LIMIT = 8  # torch._dynamo.config.recompile_limit's default, when the trace does not say
_SHOWN = 10         # bad lines named in a warning; the rest are counted


def trace_files(folder: str | os.PathLike[str]) -> list[Path]:
    """The torch trace files (``*.log``) in ``folder``, by name."""
    return sorted(p for p in Path(folder).glob("*.log") if p.is_file())


def is_trace_folder(path: str | os.PathLike[str]) -> bool:
    """Whether ``path`` is a folder of torch trace files and holds no neuronkit log (``.jsonl``)."""
    folder = Path(path)
    return folder.is_dir() and bool(trace_files(folder)) and not any(folder.glob("*.jsonl"))


def rank_from_name(path: Path) -> int | None:
    """The rank a trace file's name gives (``dedicated_log_torch_trace_rank_1_x.log`` -> 1)."""
    return trace_file_rank(path.name)


@dataclass
class _Record:
    line: int
    data: dict[str, Any]
    payload: list[str] = field(default_factory=list)

    def payload_text(self) -> str | None:
        return "\n".join(self.payload) if self.payload else None


def _records(path: Path, bad: list[tuple[int, str]]) -> Iterator[_Record]:
    """The trace records of a file with their payloads (the TAB-led lines after them)."""
    current: _Record | None = None
    with open(path, encoding="utf-8", errors="replace") as fh:
        for number, raw in enumerate(fh, start=1):
            line = raw.rstrip("\r\n")
            if line.startswith("\t"):
                if current is not None:
                    current.payload.append(line[1:])
                continue
            if current is not None:
                yield current
                current = None
            if not line.strip():
                continue
            record = trace_record(line)
            try:
                data = json.loads(record) if record is not None else None
            except (ValueError, RecursionError):  # RecursionError: JSON nested too deep
                data = None
            if not isinstance(data, dict):
                bad.append((number, "not a trace record" if record is None else "bad JSON"))
                continue
            current = _Record(number, data)
    if current is not None:
        yield current


class _FileReader:
    """One trace file (one process) replayed into events, as the live recorder assembles them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self.bad: list[tuple[int, str]] = []
        self.events: list[CompileEvent] = []
        self.rank: int | None = rank_from_name(path)
        self.strings: dict[int, str] = {}                 # torch's interned file names
        self.pending: dict[tuple, TracedParts] = {}       # (frame_id, frame_compile_id) -> parts
        self.starts: dict[tuple, FrameName] = {}          # the same key -> dynamo_start's frame
        self.frames: dict[Any, FrameName] = {}            # frame_id -> its last name
        self.functions: dict[tuple[str, str], FunctionState] = {}
        self.torch_version: str | None = None
        self.key_parts: dict[str, tuple[str, dict[str, tuple[str, str]]]] = {}

    def read(self) -> list[CompileEvent]:
        for record in _records(self.path, self.bad):
            try:
                self._on_record(record)
            except Exception as exc:  # a record of the wrong shape: skip it, keep the rest
                self.bad.append((record.line, f"{type(exc).__name__}: {exc}"[:80]))
        return self.events

    def _on_record(self, record: _Record) -> None:
        md = record.data
        if self.rank is None and isinstance(md.get("rank"), int) and md["rank"] >= 0:
            self.rank = md["rank"]
        if "str" in md:  # ["path", index]: later stacks name files by index
            text, index = md["str"]
            self.strings[int(index)] = str(text)
            return
        key = (md.get("frame_id"), md.get("frame_compile_id"))
        if "compilation_metrics" in md:
            self._finish(key, md["compilation_metrics"], record.line)
        elif isinstance(md.get("bwd_compilation_metrics"), dict):  # the lazy backward graph
            self.pending.pop(key, None)
            self._backward(key, md["bwd_compilation_metrics"], record.line)
        elif any(isinstance(k, str) and k.endswith("compilation_metrics") for k in md):
            self.pending.pop(key, None)  # runtime: not a compile
        elif "dynamo_start" in md:
            self.starts[key] = self._start_frame(md["dynamo_start"])
        elif "artifact" in md:
            self._artifact(key, md["artifact"], record.payload_text())
        elif "describe_tensor" in md or "describe_source" in md:
            self._describe(self._parts(key), md)

    def _parts(self, key: tuple) -> TracedParts:
        if key not in self.pending and len(self.pending) > 64:  # never finished: drop the oldest
            self.pending.pop(next(iter(self.pending)))
        return self.pending.setdefault(key, TracedParts())

    def _start_frame(self, start: dict[str, Any]) -> FrameName:
        """The compiled frame from ``dynamo_start``'s stack (its last entry)."""
        frame = start["stack"][-1]
        where = frame.get("filename")
        filename = self.strings.get(where, str(where)) if isinstance(where, int) else str(where)
        return FrameName(str(frame.get("name") or "?"), f"{filename}:{frame.get('line')}")

    def _artifact(self, key: tuple, artifact: dict[str, Any], payload: str | None) -> None:
        name = artifact.get("name")
        if name == "recompile_reasons":
            self._parts(key).reasons = parse_reasons(payload)
        elif name == "dynamo_graph_break_reason":
            site = break_site(payload)
            if site is not None:
                self._parts(key).breaks.append(site)
        elif name in CACHE_ARTIFACTS:  # an FX graph or AOTAutograd cache lookup, with its parts
            lookup = lookup_of(name, payload, keep=self.key_parts)
            if lookup is not None:
                self._parts(key).lookups.append(lookup)
        elif name == "torch_version" and payload:
            try:
                self.torch_version = str(json.loads(payload).get("pytorch_version") or "") or None
            except (ValueError, AttributeError):
                pass

    @staticmethod
    def _describe(parts: TracedParts, md: dict[str, Any]) -> None:
        if "describe_tensor" in md:
            t = md["describe_tensor"]
            size = None if t.get("is_parameter") else t.get("size")
            parts.tensors[(t.get("describer_id"), t.get("id"))] = (size, t.get("device"))
            return
        s = md["describe_source"]
        size, device = parts.tensors.get((s.get("describer_id"), s.get("id")), (None, None))
        source = str(s.get("source", ""))
        if isinstance(size, list) and "._parameters[" not in source and "._buffers[" not in source:
            parts.inputs[input_name(source)] = list(size)
            parts.device = parts.device or parse_device(device)

    def _backward(self, key: tuple, m: dict[str, Any], line: int) -> None:
        wanted = str(m.get("compile_id") or f"{key[0]}/{key[1]}")
        forward = next((e for e in reversed(self.events) if e.kind in GRAPH_KINDS
                        and e.compile_id == wanted), None)
        event = backward_event(m, forward, key, (self.pending.pop(key, None) or TracedParts()).lookups)
        event.rank, event.context = self.rank or 0, forward.context if forward else ""
        problem = explain_event(event.to_dict())
        if problem is not None:
            self.bad.append((line, problem))
        else:
            self.events.append(event)

    def _finish(self, key: tuple, m: dict[str, Any], line: int) -> None:
        """A compile's metrics record: its event (and the breaks it resumed after)."""
        if not isinstance(m, dict):
            raise TypeError("compilation_metrics is not an object")
        parts = self.pending.pop(key, None) or TracedParts()
        started = self.starts.pop(key, None)
        name = self._frame_name(key, m, started)
        function = (name.function, name.location)
        state = dataclasses.replace(self.functions.get(function) or FunctionState())
        event = assemble(parts, m, None, state, name, _recompile_limit(m))
        event.compile_id = event.compile_id or f"{key[0]}/{key[1]}"
        for e in [event, *break_events(parts, event, name)]:
            e.rank = self.rank or 0
            problem = explain_event(e.to_dict())
            if problem is not None:
                self.bad.append((line, problem))
                if e is event:  # the function's state stays as before this record
                    return
                continue
            self.events.append(e)
        self.functions[function] = state

    def _frame_name(self, key: tuple, m: dict[str, Any], started: FrameName | None) -> FrameName:
        """The frame as the metrics record names it, else as ``dynamo_start`` did, else (a limit
        hit's record names none) the last name of the same frame id."""
        if m.get("co_name"):
            name = FrameName(str(m["co_name"]), f"{m.get('co_filename')}:{m.get('co_firstlineno')}")
        else:
            name = started or self.frames.get(key[0]) or FrameName("?", "")
        self.frames[key[0]] = name
        return name

    def warn(self) -> None:
        """One warning naming the lines skipped, if any."""
        if not self.bad:
            return
        self.bad.sort()
        shown = ", ".join(f"line {n} ({why})" for n, why in self.bad[:_SHOWN])
        more = f", and {len(self.bad) - _SHOWN} more" if len(self.bad) > _SHOWN else ""
        warnings.warn(strip_control(f"{self.path}: skipped {len(self.bad)} bad trace line"
                                    f"{'s' if len(self.bad) > 1 else ''}: {shown}{more}; kept "
                                    f"{len(self.events)} events", keep_newlines=False), stacklevel=4)


def _recompile_limit(m: dict[str, Any]) -> int:
    """The recompile limit in force, from the record's Dynamo config (torch's default if unsaid)."""
    try:
        value = json.loads(m.get("dynamo_config") or "{}").get("recompile_limit")
    except (TypeError, ValueError, AttributeError):
        return _DEFAULT_LIMIT
    return value if isinstance(value, int) and not isinstance(value, bool) else _DEFAULT_LIMIT


KeyPartsFound = dict[str, tuple[str, dict[str, tuple[str, str]]]]


def read_torch_trace(folder: str | os.PathLike[str]
                     ) -> tuple[dict[str, Any], list[CompileEvent], KeyPartsFound]:
    """The log header, the events and the parts of the cache keys they name (key -> (cache,
    parts)) of the torch trace files (``*.log``) in ``folder`` (or one file);
    ``CompileLog.from_torch_trace`` makes them a log."""
    path = Path(folder)
    if path.is_file():
        files = [path]
    elif path.is_dir():
        files = trace_files(path)
        if not files:
            raise FileNotFoundError(f"no torch trace files (*.log) in {path}: run with "
                                    "TORCH_TRACE=<folder> to write them")
    else:
        raise FileNotFoundError(f"torch trace folder not found: {path}")
    readers = [_FileReader(p) for p in files]
    for reader in readers:
        reader.read()
        reader.warn()
    header: dict[str, Any] = {"format": FORMAT, "version": FORMAT_VERSION, "source": "torch_trace",
                              "trace_files": [str(p) for p in files]}
    version = next((r.torch_version for r in readers if r.torch_version), None)
    if version:
        header["torch"] = version
    parts = {k: v for r in readers for k, v in r.key_parts.items()}
    if len(readers) == 1:
        events = readers[0].events
        for seq, event in enumerate(events):
            event.seq = seq
        return header, events, parts
    events = in_start_order(r.events for r in readers)
    header["ranks"] = sorted({e.rank for e in events})
    return header, events, parts
