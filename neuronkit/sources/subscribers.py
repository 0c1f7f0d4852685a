"""Subscriber lists: who is told of each event or compile start."""
from __future__ import annotations

from typing import Any, Callable

__all__ = ["add_subscriber"]


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
