"""The dashboard's followed run: a folder of per-rank logs (or one log) read while a job writes it.

``start(path, follower)`` polls a :class:`~neuronkit.log.follow.Follower` about once a second in
a thread of its own (the worker stays free for Load, Generate and Sweep). After a poll that
read something, ``on_poll`` gets the follower: the state refreshes what the views show from it,
as a recorder's events do in a live session, and the widget redraws from that thread the same
way. The status line says what is followed (logs, ranks, which are still open, "run finished"
once every log is closed; then polling ends); Stop ends it too. An exception in a poll ends it
and is shown in the status line, never lost.
"""
from __future__ import annotations

import os
import threading
from typing import Callable, Iterable

from traitlets import Bool, HasTraits, Unicode

from neuronkit.apps.dashboard.status import StatusLine
from neuronkit.apps.dashboard.worker import Worker
from neuronkit.log.follow import Follower
from neuronkit.safe import strip_control

__all__ = ["Following", "follow_note", "rank_text", "POLL_S", "FINISHED_POLLS", "RANK_RANGES"]

POLL_S = 1.0          # between two polls of the followed logs
FINISHED_POLLS = 3    # polls that must find every log closed before polling ends
RANK_RANGES = 8       # the most rank ranges a status names ("ranks 0-31, 40, ...")


def rank_text(ranks: Iterable[int]) -> str:
    """``rank 0``, ``ranks 0, 1``, ``ranks 0-31, 40``: consecutive ranks as ranges, and only the
    first RANK_RANGES of them (a job of hundreds of ranks keeps a one-line status)."""
    ranks = sorted(set(ranks))
    if not ranks:
        return "no rank"
    ranges: list[list[int]] = []
    for rank in ranks:
        if ranges and rank == ranges[-1][1] + 1:
            ranges[-1][1] = rank
        else:
            ranges.append([rank, rank])
    parts = [str(a) if a == b else f"{a}, {b}" if b == a + 1 else f"{a}-{b}" for a, b in ranges]
    text = ", ".join(parts[:RANK_RANGES])
    if len(parts) > RANK_RANGES:
        text += f", … ({len(ranks)} ranks)"
    return f"rank {text}" if len(ranks) == 1 else f"ranks {text}"


def _count(n: int, word: str) -> str:
    return f"{n} {word}" + ("" if n == 1 else "s")


def follow_note(path: str, follower: Follower, stopped: bool = False) -> tuple[str, str]:
    """What the status line says of a followed run, and its kind (``busy`` while it runs)."""
    name = " ".join(strip_control(path, keep_newlines=False).split()) or "."
    logs = follower.logs
    events = _count(len(follower.log.events), "compile event")
    ranks = rank_text(follower.log.header.get("ranks", []))
    if not logs:
        found = f"no log yet (polling every {POLL_S:g} s for neuronkit record's *.jsonl logs)"
    elif follower.finished:
        return (f"Followed {name}: run finished, {_count(len(logs), 'log')} ({ranks}) all "
                f"closed; {events}", "ok")
    else:
        found = (f"{_count(len(logs), 'log')}, {ranks}; still open: "
                 f"{rank_text(follower.unclosed_ranks)}; {events}")
    if stopped:
        return f"Stopped following {name}: {found} (what was read stays)", "info"
    return f"Following {name}: {found}", "busy"


class Following(HasTraits):
    """The run followed now (or last), its poll thread and Stop."""

    follow_path = Unicode("", help="the run folder (or log file) typed in the Follow box")
    followed = Unicode("", help="the folder or file followed now, or last")
    follow_active = Bool(False, help="polling now (Stop, an error, or the run's end ends it)")
    follow_finished = Bool(False, help="every log found was closed by its writer")
    follow_note = Unicode(help="what the status line said of the followed run last")

    def __init__(self, on_poll: Callable[[Follower], None], status_line: StatusLine,
                 worker: Worker) -> None:
        super().__init__()
        self.follower: Follower | None = None
        self.thread: threading.Thread | None = None
        self._on_poll, self._status, self._worker = on_poll, status_line, worker
        self._stop = threading.Event()
        self._lock = threading.RLock()  # one poll at a time: the thread's, start()'s, a test's
        self._finished_polls = 0

    def start(self, path: str | os.PathLike[str], follower: Follower) -> Follower:
        """Follow ``follower`` (of ``path``): a first poll now, then one every POLL_S."""
        self.stop()
        with self._lock:
            self.follower, self._finished_polls = follower, 0
            self._stop = stop = threading.Event()
            self.followed = self.follow_path = os.fspath(path)
            self.follow_finished, self.follow_note = False, ""
            self.follow_active = True
        try:
            self.poll()
        except BaseException:
            self.follow_active = False
            raise
        if self.follow_active:
            self.thread = threading.Thread(target=self._run, args=(follower, stop),
                                           name="neuronkit-follow", daemon=True)
            self.thread.start()
        return follower

    def poll(self) -> int:
        """Poll the followed logs once; the number of new events."""
        with self._lock:
            follower = self.follower
            if follower is None or not self.follow_active:
                return 0
            return self._poll(follower)

    def _poll(self, follower: Follower) -> int:
        new = follower.poll()
        note, kind = follow_note(self.followed, follower)
        if new or note != self.follow_note:
            self._on_poll(follower)
        self.follow_finished = follower.finished
        self._finished_polls = self._finished_polls + 1 if follower.finished else 0
        if self._finished_polls >= FINISHED_POLLS:  # closed for a while, not between two runs
            self.follow_active = False              # of a recorder: the run is over
        self._say(note, kind)
        return len(new)

    def _say(self, note: str, kind: str) -> None:
        """Say ``note`` in the status line when it changed; a live action's own status (a
        sweep's) is left alone while it runs, and an error until the next action."""
        if note != self.follow_note:
            self.follow_note = note
            if not self._worker.busy and not self._status.error:  # an error stays in sight
                self._status.say(note, kind)

    def _run(self, follower: Follower, stop: threading.Event) -> None:
        while not stop.wait(POLL_S):
            try:
                with self._lock:
                    if stop.is_set() or follower is not self.follower or not self.follow_active:
                        return
                    self._poll(follower)
            except Exception as exc:  # shown in the status line; the polls end
                self.follow_active = False
                self._status.fail(exc)
                return

    def stop(self) -> None:
        """Stop polling (what was read stays); the status says how far the run got."""
        self._stop.set()
        with self._lock:
            if not self.follow_active:
                return
            self.follow_active = False
            if self.follower is not None:
                note, kind = follow_note(self.followed, self.follower, stopped=True)
                self.follow_note = ""
                self._say(note, kind)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the poll thread (if any) to end."""
        if self.thread is not None and self.thread is not threading.current_thread():
            self.thread.join(timeout)
