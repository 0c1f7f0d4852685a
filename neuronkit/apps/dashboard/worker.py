"""The dashboard's worker: one action at a time in a background thread, its progress, and Stop.

The notebook stays usable while a model loads or a sweep runs; Stop ends the run between
batches (what was recorded stays).
"""
from __future__ import annotations

import threading
from typing import Callable

from traitlets import Bool, HasTraits, Int, Unicode

from neuronkit.workloads.progress import BatchProgress

__all__ = ["Worker"]


class Worker(HasTraits):
    """Busy while an action runs (in the worker thread or the caller's); progress and Stop."""

    busy = Bool(False)
    stopping = Bool(False, help="Stop was pressed: the run ends after the current batch")
    progress = Int(0)
    progress_max = Int(0)
    eta = Unicode(help="batches done / planned and the time left, while a run goes on")

    def __init__(self) -> None:
        super().__init__()
        self._thread: threading.Thread | None = None
        self._lock = threading.Lock()
        self._stop = threading.Event()

    @property
    def stop_event(self) -> threading.Event:
        """Set by Stop; ``generate()`` checks it before each batch."""
        return self._stop

    @property
    def alive(self) -> bool:
        return self._thread is not None and self._thread.is_alive()

    def start(self, name: str, work: Callable[[], object],
              on_error: Callable[[Exception], None]) -> threading.Thread:
        """Run ``work`` in a new thread and return it; an exception goes to ``on_error``."""
        with self._lock:
            if self.busy or self.alive:
                raise RuntimeError(f"cannot start {name!r}: the dashboard is still busy")

            def run() -> None:
                try:
                    work()
                except Exception as exc:  # shown by on_error (the widget draws the status)
                    on_error(exc)

            self._stop.clear()
            self.stopping = False
            self._thread = threading.Thread(target=run, name=f"neuronkit-{name}", daemon=True)
            self._thread.start()
        return self._thread

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background action (if any) to end."""
        thread = self._thread
        if thread is not None:
            thread.join(timeout)

    def stop(self) -> None:
        """End the running action after its current batch."""
        if self.busy or self.alive:
            self.stopping = True
            self._stop.set()

    def begin(self, what: str, steps: int = 0) -> None:
        """Busy from now on, with ``steps`` to count; an error if an action already runs."""
        if self.busy:
            raise RuntimeError(f"cannot start {what!r}: the dashboard is still busy")
        self.busy = True
        if threading.current_thread() is not self._thread:  # start() cleared it for its thread
            self._stop.clear()                               # (a Stop pressed since then holds)
            self.stopping = False
        self.eta = ""
        self.progress, self.progress_max = 0, steps

    def end(self) -> None:
        self.busy = self.stopping = False

    def on_batch(self, progress: BatchProgress) -> None:
        """Progress of one generate() call, batch by batch."""
        self.progress_max, self.progress = progress.total, progress.done
        self.eta = str(progress)

    def count(self, done: int, total: int, left_s: float | None) -> None:
        """Progress of a sweep: ``done`` of ``total`` prompts, about ``left_s`` seconds left."""
        self.progress = done
        self.eta = (f"{done} of {total} batches"
                    + (f", about {left_s:.0f} s left" if left_s is not None and done < total
                       else ""))
