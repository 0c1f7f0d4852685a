"""Compiling for tests: a backend that counts the graphs it really compiled."""
from __future__ import annotations

from typing import Any, Callable


def counting_backend() -> Callable[..., Any]:
    """An eager backend that counts the graphs really compiled (``.graphs``); a plain function,
    because transformers deep-copies the CompileConfig and with it any backend object."""
    def counting_eager(gm, example_inputs):
        counting_eager.graphs += 1
        return gm.forward

    counting_eager.graphs = 0  # type: ignore[attr-defined]
    return counting_eager
