"""Findings about compiles that built no graph: failures and graph breaks, counted per rank.

``diagnose()`` (diagnose.py) adds them. A graph break is a ``graph_break`` event (or, in logs written
before that kind, a ``failed`` compile with torch's ``Unsupported``); its finding says what the
break was (``.item()``, a data-dependent branch, an unsupported builtin, FSDP's hooks, ...) from
``sources/torch_text.break_cause`` and gives the fix for that cause; only FSDP's is "expected".
"""
from __future__ import annotations

import os
from typing import Any

from neuronkit.advice.excerpts import cut_long
from neuronkit.advice.finding import Advice
from neuronkit.advice.shapes import per_rank
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import of_kind
from neuronkit.sources.torch_text import break_cause, guard_text, limit_failure

__all__ = ["BREAK_FIXES", "failure_findings", "graph_break_findings", "is_graph_break", "on_ranks",
           "why"]


def _listed(values: list[str], most: int = 4) -> str:
    return ", ".join(values[:most]) + (f" and {len(values) - most} more" if len(values) > most else "")


def on_ranks(events: list[CompileEvent], ranks: list[int]) -> tuple[int, str, dict[int, int]]:
    """The count to quote (the most on one rank), how to say it, and the counts per rank:
    ``""`` for one rank, ``" on each of 2 ranks"``, or ``" (rank 0: 3, rank 1: 1)"``."""
    counts = per_rank(events, ranks)
    n = max(counts.values(), default=0)
    if len(counts) < 2:
        return n, "", counts
    if len(set(counts.values())) == 1:
        return n, f" on each of {len(counts)} ranks", counts
    return n, " (" + ", ".join(f"rank {r}: {c}" for r, c in counts.items()) + ")", counts


def why(e: CompileEvent) -> str:
    """A failed compile's reason: the recorder's, else the first line of torch's message."""
    text = cut_long(e.reasons[0] if e.reasons else str(_dynamo(e).get("fail_reason") or ""))
    return text.strip().splitlines()[0] if text.strip() else "no reason recorded"


def _dynamo(e: CompileEvent) -> dict[str, Any]:
    dynamo = e.metrics.get("dynamo") if isinstance(e.metrics, dict) else None
    return dynamo if isinstance(dynamo, dict) else {}


def is_graph_break(e: CompileEvent) -> bool:
    """A graph break: Dynamo met code it cannot trace. ``graph_break`` events, and in logs
    written before that kind a ``failed`` compile with torch's ``Unsupported`` (not a limit hit)."""
    if e.kind == "graph_break":
        return True
    dynamo = _dynamo(e)
    return (e.kind == "failed" and dynamo.get("fail_type") == "Unsupported"
            and limit_failure(dynamo.get("fail_type"), cut_long(dynamo.get("fail_reason"))) is None)


def failure_findings(function: str, events: list[CompileEvent], ranks: list[int]) -> list[Advice]:
    """Compiles of one function that failed (not graph breaks): an error, critical."""
    failed = [e for e in of_kind(events, "failed") if not is_graph_break(e)]
    if not failed:
        return []
    n, on, counts = on_ranks(failed, ranks)
    return [Advice(
        f"{function}: {count(n, 'compile')} failed{on}",
        f"First failure (event #{failed[0].seq}): {guard_text(why(failed[0]))}.",
        "read the failure above; run once without torch.compile to check the model, then "
        "retry with the compile backend's own logs (TORCH_LOGS=+dynamo)", "critical",
        {"function": function, "failed": n, "per_rank": counts, "events": [e.seq for e in failed]})]


BREAK_FIXES = {
    "fsdp": "FSDP's hooks: expected with FSDP (they are marked torch.compiler.disable and break "
            "the graph around every sharded layer); nothing to change",
    "item": "`.item()`: keep the value a tensor in the compiled code, or set "
            "torch._dynamo.config.capture_scalar_outputs = True",
    "data_dependent": "data-dependent branch: replace the Python `if` on a tensor by torch.where "
                      "or torch.cond, or take the decision outside the compiled function",
    "dynamic_output": "data-dependent output size: set torch._dynamo.config."
                      "capture_dynamic_output_shape_ops = True, or avoid such ops (nonzero, masks)",
    "builtin": "unsupported builtin: move that call out of the compiled function",
    "disabled": "a torch.compiler.disable'd function: call it outside the compiled code, or drop "
                "the marker",
    "skipped": "code Dynamo does not trace: move that call out of the compiled function",
}


def _break_cause(e: CompileEvent) -> tuple[str, str, str, bool]:
    """``(cause key, cause in words, user frame, resumed)`` of a graph-break event; old logs
    (a ``failed`` compile) are read from torch's message."""
    info = e.metrics.get("graph_break") if isinstance(e.metrics, dict) else None
    if isinstance(info, dict) and info.get("cause"):
        return (cut_long(str(info["cause"])), cut_long(str(info.get("cause_text") or info["cause"])),
                cut_long(str(info.get("where") or e.location)), bool(info.get("resumed")))
    cause, words = break_cause(why(e), cut_long(str(_dynamo(e).get("fail_reason") or "")),
                               e.location)
    return cause, words, e.location, False


def graph_break_findings(events: list[CompileEvent], labels: dict[tuple[str, str], str],
                         ranks: list[int]) -> list[Advice]:
    """One finding for every graph break of the log: what broke where, the fix per cause."""
    breaks = [e for e in of_kind(events, "graph_break", "failed") if is_graph_break(e)]
    if not breaks:
        return []
    n, on, counts = on_ranks(breaks, ranks)
    where: dict[str, list[str]] = {}  # torch's reason -> the functions it broke, in order
    what: dict[str, list[str]] = {}   # the cause in words -> the user frames (file.py:line)
    causes: list[str] = []
    found = {id(e): _break_cause(e) for e in breaks}  # once per break: it reads the stack text
    for e in breaks:
        label = labels[e.function, e.location]
        names = where.setdefault(guard_text(why(e)), [])
        if label not in names:
            names.append(label)
        cause, words, at, _ = found[id(e)]
        place = os.path.basename(at) if at else label
        if place not in what.setdefault(words, []):
            what[words].append(place)
        causes += [cause] if cause not in causes else []
    eager = max(per_rank([e for e in breaks if not found[id(e)][3]]).values(), default=0)
    split = max(per_rank([e for e in breaks if found[id(e)][3]]).values(), default=0)
    title = ", ".join(([f"{count(eager, 'function')} ran eagerly"] if eager else [])
                      + ([f"{count(split, 'graph')} split at a break"] if split else []))
    fixes = [BREAK_FIXES[c] for c in causes if c in BREAK_FIXES]
    if any(c not in BREAK_FIXES for c in causes):
        fixes.append(("otherwise " if fixes else "") + "remove the unsupported call from the "
                     "compiled code or move it out of the compiled function")
    return [Advice(
        f"graph breaks: {title or count(n, 'break')}{on}",
        "Dynamo met code it cannot trace. Where it could resume, the function compiled as several "
        "graphs with eager code between them; where it could not, the whole function ran eagerly "
        "(the code it calls still compiles, as separate graphs). What broke: "
        + "; ".join(f"{words} at {_listed(places)}" for words, places in what.items()) + ".",
        "; ".join(fixes) + " (TORCH_LOGS=graph_breaks shows each break; the events keep torch's "
        "full reason)", "warning",
        {"graph_breaks": n, "per_rank": counts, "functions": [f for v in where.values() for f in v],
         "reasons": where, "causes": causes, "events": [e.seq for e in breaks]})]
