"""A compile log as a Chrome trace (Perfetto / chrome://tracing): one slice per event."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any, Iterable

from ..events import CompileEvent, CompileLog, as_events, function_labels

__all__ = ["write_chrome_trace"]


def write_chrome_trace(log: CompileLog | Iterable[CompileEvent],
                       path: str | os.PathLike[str]) -> Path:
    """Write a Chrome trace (Perfetto / chrome://tracing): one slice per event.

    One process per rank, one thread row per function; times are relative to the first event.
    On Neuron each graph's NEFF build is a second slice, on a "neuronx-cc" row, starting when
    Dynamo handed it over (the worker may have started it later: a queue is not recorded).
    """
    events = as_events(log)
    t0 = min((e.started_at for e in events), default=0.0)
    labels = function_labels(events)
    tids: dict[tuple[int, str], int] = {}
    trace: list[dict[str, Any]] = []
    for e in events:
        label = labels[e.function, e.location]
        key = (e.rank, label)
        if key not in tids:
            tids[key] = len(tids) + 1
            trace.append({"name": "thread_name", "ph": "M", "pid": e.rank, "tid": tids[key],
                          "args": {"name": label or "?"}})
        trace.append({
            "name": f"{label} [{e.kind}]", "cat": "compile", "ph": "X",
            "ts": round((e.started_at - t0) * 1e6, 3),
            "dur": round(max(e.duration_s, 0.0) * 1e6, 3),
            "pid": e.rank, "tid": tids[key],
            "args": {"compile_id": e.compile_id, "kind": e.kind, "location": e.location,
                     "changed": e.changed, "reasons": e.reasons, "context": e.context,
                     "input_shapes": e.input_shapes, "graph_count": e.graph_count,
                     "neff_compile_s": e.neff_compile_s, "neff_cache": e.neff_cache},
        })
        if e.neff_compile_s and not e.metrics.get("neff_in_duration"):
            worker = (e.rank, "neuronx-cc")
            if worker not in tids:
                tids[worker] = len(tids) + 1
                trace.append({"name": "thread_name", "ph": "M", "pid": e.rank,
                              "tid": tids[worker], "args": {"name": "neuronx-cc (NEFF builds)"}})
            trace.append({
                "name": f"{label} NEFF build", "cat": "neff", "ph": "X",
                "ts": round((e.started_at + e.duration_s - t0) * 1e6, 3),
                "dur": round(e.neff_compile_s * 1e6, 3), "pid": e.rank, "tid": tids[worker],
                "args": {"seq": e.seq, "neff_cache": e.neff_cache, "context": e.context}})
    for rank in sorted({e.rank for e in events}):
        trace.append({"name": "process_name", "ph": "M", "pid": rank, "tid": 0,
                      "args": {"name": f"rank {rank}"}})
    out = Path(path)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"traceEvents": trace, "displayTimeUnit": "ms"}, default=str),
                   encoding="utf-8")
    return out
