"""Compile logs built in memory for tests."""
from __future__ import annotations

from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog


def make_log(events: list[CompileEvent], wall: float | None = None) -> CompileLog:
    """A log of ``events`` (each numbered as it is appended) with ``wall`` seconds of wall time."""
    log = CompileLog()
    for e in events:
        log.append(e)  # sets seq
    log.wall_time_s = wall
    return log
