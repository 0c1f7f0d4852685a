"""Ranks sharing one NEFF cache: the disk hit that waited for another rank's build.

A process that misses the NEFF disk cache takes a file lock on the graph's persistent key, looks
on disk again, and builds only if the NEFF is still missing; one that found it there after the
lock shows a disk hit stored with 0 ms (``core/compilation/CompilationCache.cpp:517-553``). So of
ranks that need the same graph at once, the one that took the lock says ``compiled`` and the
others a 0 s ``disk_hit``, though they waited for the whole build. The lock lives under
``$TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR`` (default ``/tmp/local_cache``; ``CompilationCache.cpp:
41-58,617-621``): one per node, so ranks of other hosts never wait on it.

:func:`mark_waits` (called by ``merge_logs``) finds such waits in a merged log: the ``disk_hit``
of a graph (or backward graph) whose keys (``metrics["neff_keys"]``) another rank of the same host
(or of a host not named) built in a window that ends after the hit's event started. It gets
``metrics["neff_waited_for"] = {"rank", "seq", "key", "wait_s"}`` (the builder's rank, its event's
seq in the merged log, the shared key, and the seconds waited). Times: ``started_at`` is Dynamo's
compile start, wall clock (``start_time`` of torch's compile metrics, ``sources/assemble.py``);
the ``neuron`` backend submits the build inside Dynamo's call (``_C.compile_graph``,
``core/NeuronBindings.cpp:1330-1357``), so a build ends at ``started_at + total_s`` and a waiter
asked at ``started_at + duration_s``. A build queued on the worker behind earlier compiles ends
later than that: the wait is then understated, never made up. In sync mode
(``metrics["neff_in_duration"]``) the wait lies inside the waiter's Dynamo time: ``wait_s`` is
then the part of its ``duration_s`` before the build ended, and ``in_duration`` says it is
counted there already.
"""
from __future__ import annotations

import dataclasses
from typing import Any

from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.events.facts import number

__all__ = ["wait_seconds", "wait_text", "WAITED", "mark_waits", "neff_keys", "waited_for"]

WAITED = "neff_waited_for"  # the metrics key a waiting disk hit gets


def neff_keys(event: CompileEvent) -> tuple[str, ...]:
    """The cache keys of the event's graphs (``metrics["neff_keys"]``, empty ones left out)."""
    keys = event.metrics.get("neff_keys") if isinstance(event.metrics, dict) else None
    if not isinstance(keys, list):
        return ()
    return tuple(k for k in keys if isinstance(k, str) and k)


def waited_for(event: CompileEvent) -> dict[str, Any] | None:
    """The build a disk hit waited for (set by :func:`mark_waits`), or None."""
    wait = event.metrics.get(WAITED) if isinstance(event.metrics, dict) else None
    return wait if isinstance(wait, dict) else None


def wait_seconds(event: CompileEvent) -> float:
    """Seconds a disk hit waited for another rank's build, beyond its own Dynamo time (0 when
    not marked, or when the wait lies inside Dynamo's time in sync mode): the rank's own cost."""
    wait = waited_for(event)
    if not wait or wait.get("in_duration"):
        return 0.0
    return _number(wait.get("wait_s")) or 0.0


def wait_text(event: CompileEvent) -> str:
    """"waited 59.5 s for rank 0's build" for a marked disk hit, else "" (log values are
    untrusted: numbers are checked, the rank printed as a number)."""
    wait = waited_for(event)
    seconds = _number(wait.get("wait_s")) if wait else None
    rank = wait.get("rank") if wait else None
    if seconds is None or not isinstance(rank, int) or isinstance(rank, bool):
        return ""
    return f"waited {seconds:.1f} s for rank {rank}'s build"


def _number(value: Any) -> float | None:
    n = number(value)  # finite only: an infinite time or wait is no time
    return None if n is None else float(n)


def _build_end(event: CompileEvent) -> float | None:
    """When the event's NEFF build ended (wall clock): Dynamo's start, its time, the build."""
    start, took = _number(event.started_at), _number(event.duration_s)
    if start is None or took is None:
        return None
    return start + took + event.neff_s


def _wait(waiter: CompileEvent, end: float) -> tuple[float, bool] | None:
    """Seconds ``waiter`` waited for a build that ended at ``end``, and whether they lie inside its
    Dynamo time (sync mode); None when the build ended before the waiter's event started."""
    start, took = _number(waiter.started_at), _number(waiter.duration_s) or 0.0
    if start is None or end <= start:
        return None
    if waiter.neff_in_duration:
        return min(end - start, took), True
    return max(end - (start + took), 0.0), False


def mark_waits(events: list[CompileEvent], hosts: dict[int, str] | None = None) -> int:
    """Mark, in place in ``events`` (a merged log's list; a marked event is replaced by a copy),
    each disk hit that waited for another rank's build of the same key; returns how many.
    ``hosts``: rank -> host; ranks of two known, different hosts never share a lock."""
    hosts = hosts or {}
    builders: dict[str, list[tuple[CompileEvent, float]]] = {}
    for e in events:
        end = _build_end(e)
        if e.kind in BUILD_KINDS and e.neff_cache == "compiled" and end is not None:
            for key in neff_keys(e):
                builders.setdefault(key, []).append((e, end))
    marked = 0
    for i, e in enumerate(events):
        if e.kind not in BUILD_KINDS or e.neff_cache != "disk_hit" or waited_for(e) is not None:
            continue
        best: tuple[float, bool, str, CompileEvent] | None = None
        for key in neff_keys(e):
            for builder, end in builders.get(key, ()):
                there, here = hosts.get(builder.rank), hosts.get(e.rank)
                if builder.rank == e.rank or (there and here and there != here):
                    continue
                wait = _wait(e, end)
                if wait is not None and (best is None or wait[0] > best[0]):
                    best = (*wait, key, builder)
        if best is None:
            continue
        wait_s, inside, key, builder = best
        note: dict[str, Any] = {"rank": builder.rank, "seq": builder.seq, "key": key,
                                "wait_s": round(wait_s, 6)}
        if inside:
            note["in_duration"] = True
        events[i] = dataclasses.replace(e, metrics={**e.metrics, WAITED: note})
        marked += 1
    return marked
