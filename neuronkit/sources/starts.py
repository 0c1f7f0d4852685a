"""Compiles in progress: a :class:`CompileStart` when a compile begins, again (same ``id``) when
more is known, and once more with ``ended_at`` set when it ends, so that a view can show
"compiling f for x [2, 8] - 0:42" while it runs.

A Dynamo compile starts at torch's ``dynamo_start`` trace record (function named, shapes not yet
known), is updated when its first input is traced (``describe_source``) and when tracing is done
(``dynamo_output_graph``: every input shape and the backend known, ``traced``; the backend's
compile runs next), and ends when its finished event is recorded (``seq`` then names it).
On native Neuron the NEFF build that the first call waits for after Dynamo returns is a second
start, ``phase="device"``, ended at the safe point that resolves its ``neff_compile_s``.
"""
from __future__ import annotations

import dataclasses
import itertools
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterable, Literal

from neuronkit.events.event import CompileEvent
from neuronkit.sources.subscribers import add_subscriber

__all__ = ["CompileStart", "InProgress", "Phase", "device_start"]

Phase = Literal["dynamo", "device"]
_IDS = itertools.count(1)


@dataclass(frozen=True)
class CompileStart:
    """One compile in progress (``ended_at`` None) or ended.

    ``id``: its key in ``rec.compiling``, kept by its updates and its end. ``compile_id`` (torch's
    ``"0/1"``) and ``rank`` are those of the finished event (:meth:`matches`); ``seq`` is that
    event's once known (at the end of a ``dynamo`` phase; always for ``device``). ``function`` and
    ``location`` are named as events are. ``phase``: ``dynamo`` while Dynamo traces and compiles,
    ``device`` while Neuron builds the NEFF after Dynamo returned. ``input_shapes``: the inputs
    traced so far, all of them once ``traced``.
    """

    compile_id: str
    function: str
    location: str = ""
    input_shapes: dict[str, list[int | str]] = field(default_factory=dict)
    started_at: float = field(default_factory=time.time)
    phase: Phase = "dynamo"
    rank: int = 0
    backend: str = ""
    traced: bool = False
    context: str = ""
    seq: int | None = None
    ended_at: float | None = None
    id: int = field(default_factory=lambda: next(_IDS))

    @property
    def ended(self) -> bool:
        return self.ended_at is not None

    @property
    def elapsed_s(self) -> float:
        """Seconds since it started (until it ended, once ended)."""
        return (self.ended_at if self.ended_at is not None else time.time()) - self.started_at

    def matches(self, event: CompileEvent) -> bool:
        """Whether ``event`` is this compile's finished event (``device``: the event whose NEFF
        build this is)."""
        return (bool(self.compile_id) and event.compile_id == self.compile_id
                and event.rank == self.rank and (self.seq is None or event.seq == self.seq))


def device_start(event: CompileEvent) -> CompileStart:
    """The NEFF build that follows ``event``'s Dynamo compile on native Neuron, starting now."""
    return CompileStart(compile_id=event.compile_id, function=event.function,
                        location=event.location, input_shapes=dict(event.input_shapes),
                        phase="device", rank=event.rank, backend=event.backend, traced=True,
                        context=event.context, seq=event.seq)


StartSubscriber = Callable[[CompileStart], Any]


class InProgress:
    """One recorder's compiles in progress, and the subscribers told of each start, update and
    end. A subscriber that raises is handed to ``report`` and the others are still told."""

    def __init__(self, report: Callable[[Exception], None]) -> None:
        self._report = report
        self._lock = threading.Lock()
        self._open: dict[int, CompileStart] = {}
        self._subscribers: list[StartSubscriber] = []

    def snapshot(self) -> dict[int, CompileStart]:
        with self._lock:
            return dict(self._open)

    def open_ids(self, phase: Phase) -> set[int]:
        with self._lock:
            return {i for i, s in self._open.items() if s.phase == phase}

    def subscribe(self, fn: StartSubscriber) -> Callable[[], None]:
        return add_subscriber(self._subscribers, fn,
                              "subscribe_starts() needs a callable taking a CompileStart")

    def update(self, start: CompileStart) -> None:
        """A start, or news of an open one (same ``id``), or its end (``ended_at`` set; told
        only while it is open, so each start ends once)."""
        with self._lock:
            if start.ended_at is None:
                self._open[start.id] = start
            else:
                opened = self._open.pop(start.id, None)
                if opened is None:
                    return
                start = dataclasses.replace(opened, ended_at=start.ended_at,
                                            seq=opened.seq if start.seq is None else start.seq)
        self._tell([start])

    def end_compile(self, event: CompileEvent) -> None:
        """``event`` finished a Dynamo compile: end its start, naming the event's ``seq``."""
        if not event.compile_id:
            return
        now = time.time()
        with self._lock:
            ids = [i for i, s in self._open.items() if s.phase == "dynamo" and s.matches(event)]
            ended = [dataclasses.replace(self._open.pop(i), ended_at=now, seq=event.seq)
                     for i in ids]
        self._tell(ended)

    def end(self, ids: Iterable[int] | None = None) -> None:
        """End the given starts (default: every open one)."""
        now = time.time()
        with self._lock:
            chosen = list(self._open) if ids is None else [i for i in ids if i in self._open]
            ended = [dataclasses.replace(self._open.pop(i), ended_at=now) for i in chosen]
        self._tell(ended)

    def _tell(self, starts: list[CompileStart]) -> None:
        for start in starts:
            for fn in list(self._subscribers):
                try:
                    fn(start)
                except Exception as exc:
                    self._report(exc)
