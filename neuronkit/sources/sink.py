"""What a source hands events to (a sink: the recorder), what a source is, and how a source warns
without ever raising into torch's compile."""
from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Protocol

from neuronkit.events.event import CompileEvent
from neuronkit.safe import strip_control, terminal_safe

if TYPE_CHECKING:
    from neuronkit.sources.starts import CompileStart

__all__ = ["EventSink", "EventSource", "say"]


class EventSink(Protocol):
    """What a source hands events to (a ``CompileRecorder``)."""

    @property
    def quiet(self) -> bool: ...  # hide torch's own warnings that the event already says

    def receive(self, event: CompileEvent) -> CompileEvent | None: ...

    def receive_start(self, start: CompileStart) -> None: ...  # begun, updated or ended


class EventSource(Protocol):
    """Something that reports compile events while at least one sink is attached."""

    def attach(self, sink: EventSink) -> None: ...

    def detach(self, sink: EventSink) -> None: ...


def say(message: str, location: str = "") -> None:
    """A RuntimeWarning (at ``file:line`` if given) that never raises into torch's compile; the
    message and the file name are shown without control characters."""
    filename, _, line = location.rpartition(":")
    message = terminal_safe(message)
    with contextlib.suppress(Warning):  # warnings turned into errors must not break the compile
        if filename and line.isdigit():
            warnings.warn_explicit(message, RuntimeWarning, strip_control(filename, keep_newlines=False),
                                   int(line))
        else:
            warnings.warn(message, RuntimeWarning, stacklevel=3)
