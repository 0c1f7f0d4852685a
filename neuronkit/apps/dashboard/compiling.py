"""The compiles in progress, as the recorder reports them, and the clock that ticks under them."""
from __future__ import annotations

import threading
import time
from typing import Any

from traitlets import HasTraits, Int, List

from neuronkit.sources.starts import CompileStart

__all__ = ["CompilesInProgress", "compiling_row", "TICK_S"]

TICK_S = 1.0      # the compiling-now clock's step


def compiling_row(start: CompileStart) -> dict[str, Any]:
    """What the dashboard shows of a compile in progress (plain values; the view escapes)."""
    shapes = ", ".join(f"{name}{list(dims)}" for name, dims in start.input_shapes.items())
    return {"function": start.function, "shapes": shapes or "shapes not traced yet",
            "started_at": start.started_at, "phase": start.phase, "id": start.id}


class CompilesInProgress(HasTraits):
    """One row per compile begun and not ended; ``tick`` counts seconds while there is one."""

    compiling: List[dict] = List(help="compiles in progress: function, shapes, started_at, phase")
    tick = Int(0, help="counts seconds while a compile is in progress (redraws its clock)")

    def __init__(self) -> None:
        super().__init__()
        self._starts: dict[int, CompileStart] = {}  # CompileStart.id -> CompileStart
        self._ticker: threading.Thread | None = None

    def update(self, start: CompileStart) -> None:
        """A compile started, learnt its shapes, or ended (runs in the compiling thread)."""
        if start.ended:
            self._starts.pop(start.id, None)
        else:
            self._starts[start.id] = start
        self.compiling = [compiling_row(s) for s in self._starts.values()]
        if self.compiling and (self._ticker is None or not self._ticker.is_alive()):
            self._ticker = threading.Thread(target=self._tick_while_compiling,
                                            name="neuronkit-clock", daemon=True)
            self._ticker.start()

    def clear(self) -> None:
        """Forget every row (a new recorder reports its own compiles)."""
        self._starts.clear()
        self.compiling = []

    def _tick_while_compiling(self) -> None:
        while self.compiling:
            time.sleep(TICK_S)
            self.tick += 1
