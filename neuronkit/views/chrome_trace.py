"""A compile log as a Chrome trace (Perfetto / chrome://tracing): one slice per event.

A log is untrusted input, so the trace is built as Python objects and written by ``json.dumps``
only (never by string concatenation): names and args are JSON-escaped, control and bidi-override
characters are stripped from every string (names on one line), numbers that are not finite (NaN,
infinity: not JSON) become 0, a rank that is not an integer becomes pid 0, and ``< > &`` are
written as ``\\u003c``-style escapes so the file is safe to embed in a page. A text longer than
any recorder writes (``LONG_CHARS``, 10 kB) is written as its start and length (the log, and
``neuronkit report --json``, keep it whole).
"""
from __future__ import annotations

import json
import math
import os
from itertools import islice
from pathlib import Path
from typing import Any, Iterable

from neuronkit.advice.excerpts import ELLIPSIS, bounded_events, cut_long
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import as_events, function_labels, readable, synthetic_reason
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import strip_control

__all__ = ["write_chrome_trace"]

_HTML_SAFE = {ord("<"): "\\u003c", ord(">"): "\\u003e", ord("&"): "\\u0026"}
# the header fields a trace's metadata (``otherData``) repeats
ITEMS = 1000  # the most items of a list or object an arg shows (a log may hold a million reasons)
HEADER_KEYS = ("neuronkit", "torch", "transformers", "torch_neuronx", "device", "backend",
               "description")


def _name(value: Any) -> str:
    """A slice or row name: one clean line."""
    return " ".join(strip_control(value, keep_newlines=False).split())


def _clean(value: Any, depth: int = 0) -> Any:
    """Args as JSON-ready data: strings without control characters (newlines and tabs kept), one
    longer than ``LONG_CHARS`` as its start and length, finite numbers, containers cleaned
    recursively (their first ``ITEMS``, then how many there were); anything else as its cleaned
    text."""
    if value is None or isinstance(value, bool) or isinstance(value, int):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, str):
        return strip_control(cut_long(value))
    if depth < 20 and isinstance(value, (dict, list, tuple)):
        more = [f"{ELLIPSIS} ({len(value):,} in all)"] if len(value) > ITEMS else []
        if isinstance(value, dict):
            return {strip_control(cut_long(k)): _clean(v, depth + 1)
                    for k, v in islice(value.items(), ITEMS)} | dict.fromkeys(more)
        return [_clean(v, depth + 1) for v in value[:ITEMS]] + more
    return strip_control(cut_long(str(value)))


def _number(value: Any) -> float:
    """A finite float (0 for what is not one)."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return 0.0
    return number if math.isfinite(number) else 0.0


def _pid(rank: Any) -> int:
    return rank if isinstance(rank, int) and not isinstance(rank, bool) else 0


def write_chrome_trace(log: CompileLog | Iterable[CompileEvent],
                       path: str | os.PathLike[str]) -> Path:
    """Write a Chrome trace (Perfetto / chrome://tracing): one slice per event.

    One process per rank, one thread row per function; times are relative to the first event.
    On Neuron each graph's NEFF build is a second slice, on a "neuronx-cc" row, starting when
    Dynamo handed it over (the worker may have started it later: a queue is not recorded).
    The trace's metadata (``otherData``) holds the log header's versions, device, backend and
    description, and ``synthetic`` (with ``synthetic_reason``); a synthetic log's processes are
    named ``rank N (SYNTHETIC)`` and labelled so.
    """
    header = log.header if isinstance(log, CompileLog) and isinstance(log.header, dict) else {}
    synthetic = synthetic_reason(header)
    events = bounded_events(readable(as_events(log)))  # a 20 MB reason: its start and length
    t0 = min((_number(e.started_at) for e in events), default=0.0)
    labels = function_labels(events)
    tids: dict[tuple[int, str], int] = {}
    trace: list[dict[str, Any]] = []
    for e in events:
        label = _name(labels[e.function, e.location])
        pid, start, duration = _pid(e.rank), _number(e.started_at), _number(e.duration_s)
        key = (pid, label)
        if key not in tids:
            tids[key] = len(tids) + 1
            trace.append({"name": "thread_name", "ph": "M", "pid": pid, "tid": tids[key],
                          "args": {"name": label or "?"}})
        trace.append({
            "name": _name(f"{label} [{e.kind}]"), "cat": "compile", "ph": "X",
            "ts": round((start - t0) * 1e6, 3),
            "dur": round(max(duration, 0.0) * 1e6, 3),
            "pid": pid, "tid": tids[key],
            "args": _clean({"compile_id": e.compile_id, "kind": e.kind, "location": e.location,
                            "changed": e.changed, "reasons": e.reasons, "context": e.context,
                            "input_shapes": e.input_shapes, "graph_count": e.graph_count,
                            "neff_compile_s": e.neff_compile_s, "neff_cache": e.neff_cache}),
        })
        neff = _number(e.neff_s)
        if neff:
            worker = (pid, "neuronx-cc")
            if worker not in tids:
                tids[worker] = len(tids) + 1
                trace.append({"name": "thread_name", "ph": "M", "pid": pid,
                              "tid": tids[worker], "args": {"name": "neuronx-cc (NEFF builds)"}})
            trace.append({
                "name": _name(f"{label} NEFF build"), "cat": "neff", "ph": "X",
                "ts": round((start + duration - t0) * 1e6, 3),
                "dur": round(neff * 1e6, 3), "pid": pid, "tid": tids[worker],
                "args": _clean({"seq": e.seq, "neff_cache": e.neff_cache, "context": e.context})})
    for rank in sorted({_pid(e.rank) for e in events}):
        trace.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                      "args": {"name": f"rank {rank}" + (" (SYNTHETIC)" if synthetic else "")}})
        if synthetic:
            trace.append({"name": "process_labels", "ph": "M", "pid": rank, "tid": 0,
                          "args": {"labels": "SYNTHETIC, not measured"}})
    meta = _clean({k: header[k] for k in HEADER_KEYS if isinstance(header.get(k), (str, int, float))})
    meta.update(synthetic=bool(synthetic), synthetic_reason=synthetic or None)
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    text = json.dumps({"traceEvents": trace, "displayTimeUnit": "ms", "otherData": meta},
                      allow_nan=False, ensure_ascii=True)
    out.write_text(text.translate(_HTML_SAFE), encoding="utf-8")
    return out
