"""Where compile events come from. A source turns something torch (or torch-neuronx) reports into
typed :class:`~neuronkit.events.event.CompileEvent` s and hands each to every attached sink (a
``CompileRecorder``); the recorder adds rank, context and device and owns the log.

Sources: ``dynamo`` (torch's structured trace: every Dynamo compile, refused compile and failure);
``neuron`` (native torch-neuronx: NEFF build times and eager-op kernels, read at safe points).
Compiles in progress reach sinks as :class:`~neuronkit.sources.starts.CompileStart` s
(``starts.py``): when one begins, when its shapes are known, when it ends.
A new source implements :class:`EventSource`; the assembly of an event from what torch said is
pure (``assemble.py``), so it is tested without torch.
"""
from __future__ import annotations

import contextlib
import warnings
from typing import TYPE_CHECKING, Any, Callable, Protocol

from neuronkit.events.event import CompileEvent

if TYPE_CHECKING:
    from neuronkit.sources.starts import CompileStart

__all__ = ["EventSink", "EventSource", "add_subscriber", "say"]


def add_subscriber(subscribers: list[Any], fn: Any, what: str) -> Callable[[], None]:
    """Add ``fn`` to ``subscribers`` (a clear error if it is not callable: ``what`` names the
    method and its argument); returns the function that removes it again."""
    if not callable(fn):
        raise TypeError(f"{what}, got {fn!r}")
    subscribers.append(fn)

    def unsubscribe() -> None:
        if fn in subscribers:
            subscribers.remove(fn)
    return unsubscribe


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
    """A RuntimeWarning (at ``file:line`` if given) that never raises into torch's compile."""
    filename, _, line = location.rpartition(":")
    with contextlib.suppress(Warning):  # warnings turned into errors must not break the compile
        if filename and line.isdigit():
            warnings.warn_explicit(message, RuntimeWarning, filename, int(line))
        else:
            warnings.warn(message, RuntimeWarning, stacklevel=3)
