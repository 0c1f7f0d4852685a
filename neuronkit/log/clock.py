"""Aligning the clocks of several hosts: each recording process notes its wall time at a point
every rank passes together (``{"clock": {"barrier_at": t, "host": h}}``, written right after the
first barrier of ``torch.distributed``); logs of hosts whose clocks disagree are shifted so that
those points coincide. Ranks of one host share its clock: their barrier times are averaged."""
from __future__ import annotations

import dataclasses
from statistics import median
from typing import Any

from neuronkit.events.event import CompileEvent

__all__ = ["host_of", "host_offsets", "shifted"]


def host_of(header: dict[str, Any], clock: dict[str, Any] | None) -> str | None:
    """The host a log was written on: its clock line's, else its header's; None if unnamed."""
    host = (clock or {}).get("host") or header.get("host")
    return str(host) if isinstance(host, (str, int)) and str(host) else None


def host_offsets(logs: list[tuple[dict[str, Any], dict[str, Any] | None, int]]) -> dict[str, float]:
    """Seconds each host's clock runs ahead of the reference host's (the host of the lowest rank),
    from ``(header, clock, rank)`` per log; hosts without a clock are left out (not aligned)."""
    barriers: dict[str, list[float]] = {}
    first: dict[str, int] = {}
    for header, clock, rank in logs:
        host = host_of(header, clock)
        if host is None or not clock or not isinstance(clock.get("barrier_at"), (int, float)):
            continue
        barriers.setdefault(host, []).append(float(clock["barrier_at"]))
        first[host] = min(first.get(host, rank), rank)
    if len(barriers) < 2:
        return {}
    reference = min(first, key=lambda h: (first[h], h))
    at = median(barriers[reference])
    return {host: round(median(times) - at, 6) for host, times in barriers.items()}


def shifted(events: list[CompileEvent], offset: float) -> list[CompileEvent]:
    """The events with ``offset`` seconds taken off their start times (copies)."""
    if not offset:
        return events
    return [dataclasses.replace(e, started_at=e.started_at - offset)
            if isinstance(e.started_at, (int, float)) else e for e in events]
