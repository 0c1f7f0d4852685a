"""The recompile dashboard's state and actions, with no widget in sight.

``DashboardState`` is the one object a widget, a test or a notebook holds. It is made of parts,
each owning its traits: the ``session`` (choices, model, recorder; load / generate / sweep), the
``worker`` (thread, busy, Stop, progress), the ``status_line``, the ``runs`` (kept, uploaded,
shown, compared), the ``compiles`` in progress and the ``poller`` of a followed run; it shows
their traits as its own (read, set, observe) and adds what the views show of the log: event
count, graph counts, advice.

    state = DashboardState()            # live: the embedded tiny model by default
    state.load(); state.generate("Hello"); state.event_count
    state.start("sweep"); state.stop()  # in a worker thread; Stop ends it between batches
    state.keep_run(); state.open_uploads([("rank0.jsonl", data)]); state.show_run(name)
    state = DashboardState.replay("compile-log.jsonl")   # a saved log, no model needed
    state = DashboardState.following("logs")  # a job's logs as it writes them (neuronkit record)
    state.follow("other-logs"); state.stop_following()   # any state: the folder is a run
"""
from __future__ import annotations

import os
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator
from weakref import WeakKeyDictionary

from traitlets import All, Dict, HasTraits, Int, List

from neuronkit.advice.diagnose import FunctionMemo, diagnose
from neuronkit.advice.finding import Advice
from neuronkit.apps.dashboard.compiling import CompilesInProgress
from neuronkit.apps.dashboard.counts import GraphCounter
from neuronkit.apps.dashboard.exports import check_target, export_target
from neuronkit.apps.dashboard.following import Following
from neuronkit.apps.dashboard.inputs import REPLAY_REASON
from neuronkit.apps.dashboard.runs import Runs, read_uploads, snapshot
from neuronkit.apps.dashboard.session import Session
from neuronkit.apps.dashboard.status import StatusLine, synthetic_note
from neuronkit.apps.dashboard.worker import Worker
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.follow import Follower, follow
from neuronkit.log.open import open_log
from neuronkit.sources.starts import CompileStart
from neuronkit.views.charts import dashboard_chart, save_png
from neuronkit.views.compare import Comparison
from neuronkit.workloads.generation import GenerationResult
from neuronkit.workloads.shapes import Buckets

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["DashboardState", "PARTS"]

# the parts a state is made of (attribute -> class); each trait of a part is the state's too
PARTS: dict[str, type[HasTraits]] = {"session": Session, "worker": Worker,
                                     "status_line": StatusLine, "runs": Runs,
                                     "compiles": CompilesInProgress, "poller": Following}
_OWNER = {name: part for part, cls in PARTS.items() for name in cls.class_trait_names()}


class DashboardState(HasTraits):
    """Inputs, outputs and status of one dashboard session; actions are methods."""

    # what the views show of the log picked (``log``)
    event_count = Int(0)
    graph_counts = Dict()
    advice: List[Advice] = List()

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 device: str | None = None, dtype: str | None = None, backend: str | None = None,
                 log: CompileLog | None = None, **traits: Any) -> None:
        # traits given by name: the state's own now, the session's to it (a replay reads its
        # source), the other parts' once they exist
        own = {name: traits.pop(name) for name in list(traits) if self.has_trait(name)}
        later = {name: traits.pop(name) for name in list(traits)
                 if _OWNER.get(name, "session") != "session"}
        super().__init__(**own)
        self._counter = GraphCounter()
        self._advice_key: tuple[Any, ...] | None = None  # the log diagnose() last saw
        # per log: each function's findings, kept while its events are unchanged
        self._advice_memo: WeakKeyDictionary[CompileLog, FunctionMemo] = WeakKeyDictionary()
        self._unsubscribe: Callable[[], None] | None = None
        self.status_line = StatusLine()
        self.worker = Worker()
        self.compiles = CompilesInProgress()
        self.session = Session(model_path, worker=self.worker, status_line=self.status_line,
                               on_run=self.refresh, device=device, dtype=dtype, backend=backend,
                               log=log, **traits)
        live = self.session.mode == "live"
        self.runs = Runs(lambda: self.session.log, {"live": "this session", "replay": "the replayed "
                         "log"}.get(self.session.mode, "the followed run"))
        self.poller = Following(self._on_followed, self.status_line, self.worker)
        for name, value in later.items():
            setattr(self, name, value)
        self.session.observe(self._listen, "recorder")
        self._listen()
        if live:
            self._say("Press Load to load the model (empty path: the embedded tiny model).", "info")
            return
        self.refresh()
        if self.mode == "replay":
            self._say(f"Replaying {len(self.log.events)} compile events from "
                      f"{Path(self.source).name or 'a saved log'}; {REPLAY_REASON}.", "info")

    @classmethod
    def replay(cls, path: str | os.PathLike[str]) -> "DashboardState":
        """A read-only session over a saved log (``open_log``: a JSONL file, a folder of per-rank
        logs or of torch trace files; no model, no torch needed)."""
        return cls(log=open_log(path), source=os.fspath(path))

    @classmethod
    def following(cls, path: str | os.PathLike[str]) -> "DashboardState":
        """A session over a job's logs while it writes them: a folder of per-rank logs (as
        ``neuronkit record`` writes them) or one log, polled about once a second."""
        follower = follow(path)
        state = cls(log=follower.log, source=os.fspath(path), mode="follow")
        state.follow(path, follower)
        return state

    # -- the parts' traits, as the state's own ---------------------------------------------
    def __getattr__(self, name: str) -> Any:  # only for names the state itself lacks
        part = self.__dict__.get(_OWNER.get(name, ""))
        if part is None:
            raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
        return getattr(part, name)

    def __setattr__(self, name: str, value: Any) -> None:
        if name in _OWNER:
            setattr(self.__dict__[_OWNER[name]], name, value)
        else:
            super().__setattr__(name, value)

    def observe(self, handler: Callable[..., Any], names: Any = All, type: Any = "change") -> None:
        """Call ``handler`` when a trait of the state (or of its parts) changes."""
        for owner, owned in self._owners(names):
            if owner is self:
                super().observe(handler, owned, type=type)
            else:
                owner.observe(handler, owned, type=type)

    def unobserve(self, handler: Callable[..., Any], names: Any = All, type: Any = "change") -> None:
        for owner, owned in self._owners(names):
            if owner is self:
                super().unobserve(handler, owned, type=type)
            else:
                owner.unobserve(handler, owned, type=type)

    def _owners(self, names: Any) -> list[tuple[HasTraits, Any]]:
        """(object, names) pairs: which of the state and its parts holds each trait named."""
        if names is All:
            return [(self, All), *((getattr(self, part), All) for part in PARTS)]
        by_owner: dict[str, list[str]] = {}
        for name in [names] if isinstance(names, str) else names:
            by_owner.setdefault(_OWNER.get(name, ""), []).append(name)
        return [(getattr(self, part) if part else self, owned) for part, owned in by_owner.items()]

    # -- the model and the log ----------------------------------------------------------------
    @property
    def model(self) -> PreTrainedModel | None:
        return self.session.model

    @property
    def tokenizer(self) -> PreTrainedTokenizerBase | None:
        return self.session.tokenizer

    @property
    def session_log(self) -> CompileLog:
        """The session's own events: the recorder's log (live) or the loaded file (replay)."""
        return self.session.log

    @property
    def log(self) -> CompileLog:
        """What the views show: the run picked in ``shown_run``, else the session's log."""
        return self.runs.shown

    def run_log(self, name: str) -> CompileLog:
        """A kept or uploaded run by name ('' : the session's own log)."""
        return self.runs.log(name)

    def refresh(self, advice: bool = True) -> None:
        """Recompute the counters (and, if ``advice``, the ``diagnose()`` findings) from the log."""
        log = self.log
        self.graph_counts = self._counter.counts(log)
        key = (id(log), len(log.events), log.wall_time_s)
        if advice and key != self._advice_key:  # unchanged since the last diagnose: kept
            self.advice = list(diagnose(log, memo=self._advice_memo.setdefault(log, {})))
            self._advice_key = key
        self.event_count = len(log.events)
        self.status_line.log_note = synthetic_note(log.header)  # a synthetic log says so

    # -- listening to the session's recorder ----------------------------------------------------
    def _listen(self, change: Any = None) -> None:
        """Follow the session's recorder: its events refresh the views, its starts the rows of
        compiles in progress (those of an earlier recorder are forgotten)."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        recorder = self.session.recorder
        if recorder is not None:
            unsubscribe_events = recorder.subscribe(self._on_event)
            unsubscribe_starts = recorder.subscribe_starts(self._on_start)

            def unsubscribe() -> None:
                unsubscribe_events()
                unsubscribe_starts()
            self._unsubscribe = unsubscribe
        self.compiles.clear()

    def _on_event(self, event: CompileEvent) -> None:
        # runs in the thread that compiles: keep it cheap. The widget redraws on the event_count
        # change and refreshes the advice with the chart, at most every CHART_EVERY_S.
        try:
            self.refresh(advice=False)
        except Exception as exc:  # a view must never break the workload that feeds it
            self.fail(exc)

    def _on_start(self, start: CompileStart) -> None:
        try:
            self.compiles.update(start)
        except Exception as exc:  # a view must never break the workload that feeds it
            self.fail(exc)

    # -- status and the action around each piece of work ----------------------------------------
    def _say(self, text: str, kind: str = "info") -> None:
        self.status_line.say(text, kind)

    def fail(self, exc: BaseException) -> None:
        """Show ``exc`` in the status area (type and message, traceback kept in error_detail)."""
        self.status_line.fail(exc)

    def show_error(self, exc: BaseException) -> None:
        """Show ``exc`` unless the action it ended has shown its own error already."""
        if not self.error:
            self.fail(exc)

    @contextmanager
    def _action(self, what: str, steps: int = 0) -> Iterator[None]:
        """Busy while running ``what``; any error lands in the status area and is re-raised."""
        self.worker.begin(what, steps)
        self.status_line.clear_error()
        self._say(f"{what} …", "busy")
        try:
            yield
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            self._advice_key = None  # events may have been updated in place (NEFF times)
            self.worker.end()

    # -- actions -----------------------------------------------------------------------------
    def load(self) -> None:
        """Load ``model_path`` (empty: the tiny model) on ``device``, then check placement."""
        with self._action("Loading the model"):
            self.session.load()

    def generate(self, prompt: str | None = None) -> GenerationResult:
        """Generate from ``prompt`` (default: the prompt trait); returns the GenerationResult."""
        prompt = self.prompt if prompt is None else prompt
        with self._action("Generating (a new shape compiles first)"):
            return self.session.generate(prompt)

    def sweep(self) -> list[GenerationResult]:
        """Send ``sweep_count`` prompts of growing (or random) lengths, one request at a time."""
        with self._action(f"Sweep of {self.sweep_count} prompts", steps=max(self.sweep_count, 0)):
            return self.session.sweep()

    def plan(self) -> str:
        """Plan bucket boundaries from the prompt lengths seen so far (``plan_buckets``)."""
        with self._action("Planning buckets"):
            self.session.plan_buckets()
        return self.boundaries

    def reset(self) -> None:
        """Forget every compiled graph in this process (torch.compiler.reset); a new log."""
        with self._action("Resetting compiled graphs"):
            self.session.reset()
            self.refresh()
            self._say("Compiled graphs cleared (torch.compiler.reset()); a new log started", "ok")

    def buckets(self) -> Buckets | None:
        """The Buckets the padding strategy asks for (None: each prompt keeps its length)."""
        return self.session.buckets()

    def prompt_of_length(self, n: int) -> str:
        """A prompt of about ``n`` tokens for the loaded tokenizer."""
        return self.session.prompt_of_length(n)

    # -- runs ----------------------------------------------------------------------------------
    def keep_run(self, name: str | None = None) -> str:
        """Keep a copy of the session's log as a run (to show or compare later); its name."""
        kept = self.runs.keep(name or f"run {len(self.run_names) + 1}: padding {self.padding}")
        self._say(f"Kept {len(self.run_log(kept).events)} events as {kept!r}: compare it with "
                  "a later run", "ok")
        return kept

    def open_uploads(self, files: Iterable[tuple[str, bytes]]) -> list[str]:
        """Read uploaded JSONL logs into runs (several: also merged, as for per-rank logs) and
        show the last one read; returns the names added. Bad lines are said in the status."""
        logs, notes = read_uploads(files)
        if not logs:
            raise ValueError("no log could be read: " + ("; ".join(notes) or "no file given"))
        added = self.runs.add(logs)
        self.refresh()
        said = f"Showing {added[-1]!r}: {len(self.log.events)} compile events"
        self._say(said + ("; " + "; ".join(notes) if notes else ""), "info" if notes else "ok")
        return added

    def show_run(self, name: str) -> None:
        """Show a kept or uploaded run ('' : the session's own log)."""
        log = self.runs.show(name)
        self.refresh()
        self._say(f"Showing {name or self.runs.own_name!r}: {len(log.events)} compile events", "ok")

    def compare(self, a: str, b: str) -> Comparison:
        """Two runs side by side (names from ``run_names``; '' : the session's own log)."""
        return self.runs.compare(a, b)

    # -- a followed run ---------------------------------------------------------------------------
    def follow(self, path: str | os.PathLike[str] | None = None,
               follower: Follower | None = None) -> Follower:
        """Follow a run folder (default: ``follow_path``) while its job writes it, ending what
        was followed before; its log is a run of its own, shown (that of a ``following`` state:
        the session's). Returns the Follower."""
        path = os.fspath(path if path is not None else self.follow_path.strip())
        if not path:
            raise ValueError("type the run folder to follow (neuronkit record's --log-dir) first")
        follower = follower or follow(path)
        self.status_line.clear_error()
        if follower.log is not self.session.log:
            self.runs.add([(f"following {Path(path).name or path}", follower.log)])
        return self.poller.start(path, follower)

    def stop_following(self) -> None:
        """Stop polling the followed run (what was read stays)."""
        self.poller.stop()

    def _on_followed(self, follower: Follower) -> None:
        # runs in the poll thread, as _on_event runs in the compiling one
        if self.log is follower.log:
            self.refresh()

    # -- background work -------------------------------------------------------------------------
    def start(self, action: str) -> threading.Thread:
        """Run ``action`` ('load', 'generate' or 'sweep') in a worker thread and return it; the
        state's traits tell how it goes, and an error lands in the status area."""
        if action not in ("load", "generate", "sweep"):
            raise ValueError(f"start() runs 'load', 'generate' or 'sweep', not {action!r}")
        return self.worker.start(action, getattr(self, action), self.show_error)

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background action (if any) to end."""
        self.worker.wait(timeout)

    def stop(self) -> None:
        """End the running action after its current batch (what was recorded stays)."""
        self.worker.stop()

    # -- exports ---------------------------------------------------------------------------------
    def export_log(self, path: str | os.PathLike[str] | None = None, *,
                   overwrite: bool = False) -> Path:
        """Write the session log as JSONL (the suffix becomes .jsonl). Never over the replayed
        log; over another existing file only with ``overwrite`` (else FileExistsError)."""
        with self._action("Saving the log"):
            target = self._export_target(path, ".jsonl", "compile-log", overwrite)
            copy = snapshot(self.log)  # the wall time too: the share needs it
            written = copy.save(target)
            copy.release()
            self._say(f"Saved {len(self.log.events)} events to {written.resolve()}", "ok")
        return written

    def export_png(self, path: str | os.PathLike[str] | None = None, *,
                   overwrite: bool = False) -> Path:
        """Write the chart as PNG (the suffix becomes .png); the same rule as ``export_log``."""
        with self._action("Saving the chart"):
            target = self._export_target(path, ".png", "compile-chart", overwrite)
            target.parent.mkdir(parents=True, exist_ok=True)
            written = Path(save_png(dashboard_chart(self.log), target))
            self._say(f"Saved the chart to {written.resolve()}", "ok")
        return written

    def _export_target(self, path: str | os.PathLike[str] | None, suffix: str, name: str,
                       overwrite: bool) -> Path:
        target = export_target(path or self.export_path, suffix, name)
        for kept in (self.source if self.mode != "live" else "", self.followed):
            check_target(target, kept, overwrite)  # never into a log read (or followed) here
        return target

    def close(self) -> None:
        """Stop following, stop listening to the recorder and drop the model."""
        self.poller.stop()
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        self.session.close()
