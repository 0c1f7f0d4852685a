"""The compile worker on a thread of its own, as the source runs it: one FIFO thread per process
(``csrc/core/OperationExecutionEngine.cpp:61-62,111-134,158-177``) that takes each submitted op
as soon as it can, whether or not anyone synchronizes. ``make_fake(threaded=True)`` starts it;
``synchronize()`` still drains what is left (under the runtime's lock, so FIFO order holds).
"""
from __future__ import annotations

import threading
from typing import Any


class WorkerThread:
    """Runs ``rt.advance_worker(1)`` on its own thread whenever work was submitted."""

    def __init__(self, rt: Any) -> None:
        self.rt = rt
        self.work = threading.Event()
        self.stopped = False
        self.thread = threading.Thread(target=self._run, name="neuron-fake-worker", daemon=True)
        self.ran = 0                      # ops this thread ran (not a synchronize)
        self.thread.start()

    def kick(self) -> None:
        self.work.set()

    def _run(self) -> None:
        while not self.stopped:
            self.work.wait(0.05)
            self.work.clear()
            while not self.stopped and self.rt.queue:
                self.ran += self.rt.advance_worker(1)

    def idle(self, timeout: float = 5.0) -> bool:
        """Wait until the queue is empty (tests use it in place of time passing)."""
        done = threading.Event()
        for _ in range(int(timeout / 0.01)):
            if not self.rt.queue:
                done.set()
                break
            done.wait(0.01)
        return not self.rt.queue

    def stop(self) -> None:
        self.stopped = True
        self.work.set()
        self.thread.join(timeout=5)
