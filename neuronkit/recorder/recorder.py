"""CompileRecorder: every torch.compile (Dynamo) compile, as it happens, as a CompileEvent.

    with nk.CompileRecorder("compile-log.jsonl") as rec:
        model(x)                      # any torch.compile work
    rec.events                        # [CompileEvent(function="forward", kind="first", ...), ...]

Events come from the sources (``sources/``: torch's structured trace, read in process), which
hand each recorder a typed CompileEvent; the recorder adds rank, context and device and owns the
log. Several recorders may be active at once: each sees every compile. A recorder may be started
again after ``stop()``: it continues the same log. ``with rec:`` blocks may nest: only the
outermost exit stops it. ``log_path`` is (re)written with a header line (``header.py``), then
each event is appended and flushed as it happens.

One file, one writer (``log_file.py``, ``log/file_lock.py``): another recorder or log given the
same path is refused (``LogPathInUseError``) instead of truncating it. A failed write costs no
event: the event stays in ``rec.events`` and reaches the subscribers (dashboard, Trainer
callback); the failure is said once (all of them: ``rec.write_errors``).

Compiles in progress: ``rec.compiling`` and ``rec.subscribe_starts(fn)`` (``CompileStart``, see
``sources/starts.py``): when a compile begins, when its input shapes are known, when it ends.

``as_neuron=True``: Neuron's compile rules apply while it records, whatever the device
(``sources/neuron_rules.py``): static shapes, graphs with symbolic shapes flagged
(``metrics["refused_on_neuron"]``), backward graphs traced (``aot_eager`` for ``eager``), and the
eager ops of the thread that started it forecast as Neuron kernels (``kernels`` events,
``forecast=True``, one per safe point). A rehearsal: its counts are forecasts, not measurements.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import itertools
import os
import threading
import time
from typing import TYPE_CHECKING, Any, Callable, Iterator

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.recorder.header import default_header, detected
from neuronkit.recorder.log_file import LogFile
from neuronkit.setup import device as setup_device
from neuronkit.setup.process import default_rank
from neuronkit.sources import neuron_rules
from neuronkit.sources.cache_keys import parts_of
from neuronkit.sources.dynamo import TAP, add_recompile_context
from neuronkit.sources.neuron import NEURON
from neuronkit.sources.sink import say
from neuronkit.sources.starts import CompileStart, InProgress
from neuronkit.sources.subscribers import add_subscriber

if TYPE_CHECKING:  # pragma: no cover  (imports torch: only when an as_neuron recorder starts)
    from neuronkit.sources.kernel_forecast import KernelForecast

__all__ = ["CompileRecorder"]


_IDS = itertools.count()  # names each recorder's ContextVar


class CompileRecorder:
    """Records every Dynamo compile while active; a context manager, or ``start()`` / ``stop()``.

    ``log_path``: JSONL file to mirror the log to (None: memory only). ``device`` / ``backend``:
    stored in the header, and on events where torch does not say better (default: ``nk.detect()``;
    an event's device is that of the compiled function's first input tensor, its backend the one
    the compile really used, when torch's trace names them). A device detected, not given, goes
    in the header only when it is the CPU: on a Neuron host the run may still use the CPU, and the
    events say which. ``rank``: default $RANK, else the torch.distributed rank, else 0.
    ``context``: the label of events from threads that set none (see ``context()``; labels are
    per thread / ``contextvars`` context).
    ``quiet``: hide torch's own recompile-limit warning (neuronkit warns instead); the recorder
    never turns on any torch logging itself.
    ``as_neuron``: apply Neuron's compile rules while recording (module docstring); the header
    says so (``"as_neuron": {"rules": [...], "device": ...}``).
    """

    def __init__(self, log_path: str | os.PathLike[str] | None = None, *, device: str | None = None,
                 backend: str | None = None, rank: int | None = None, context: str = "",
                 quiet: bool = True, header: dict[str, Any] | None = None,
                 as_neuron: bool = False) -> None:
        if rank is not None and (not isinstance(rank, int) or rank < 0):
            raise ValueError(f"rank must be a non-negative int, got {rank!r}")
        told, told_backend = bool(device), bool(backend)
        if not (device and backend):
            found = detected()
            device, backend = device or found[0], backend or found[1]
        self.device, self.backend = str(device), str(backend)
        self.rank = default_rank() if rank is None else rank
        self.quiet = quiet
        self.subscriber_errors: list[BaseException] = []
        self._started: float | None = None
        self._wall_s = 0.0
        self._depth = 0  # nested ``with rec:`` blocks: only the outermost exit stops it
        self._depth_lock = threading.Lock()
        # the header claims no device the run may not use: on an accelerator host a default
        # recorder cannot tell (a CPU run on a Neuron host), so the events say theirs
        claimed = self.device if told or self.device == "cpu" else ""
        # nor a backend it was not told: code may compile with any (the events say which)
        claimed_backend = self.backend if told_backend else ""
        extra = {k: v for k, v in (header or {}).items()
                 if k not in ("format", "version", "device", "backend", "rank")}
        self.as_neuron = bool(as_neuron)
        if self.as_neuron:  # the device it really ran on: the counts are a rehearsal
            extra["as_neuron"] = {"rules": list(neuron_rules.RULES), "device": self.device}
        # one file, one writer: refused if another recorder writes log_path
        self._file = LogFile(self, default_header(device=claimed, backend=claimed_backend,
                                                  rank=self.rank, **extra), log_path)
        self.log = self._file.log
        self.write_errors = self._file.errors  # failed writes to log_path (events are kept)
        self._default_context = str(context)
        self._context = contextvars.ContextVar(f"neuronkit_context_{next(_IDS)}",
                                               default=self._default_context)
        self._notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
            f"neuronkit_notes_{next(_IDS)}", default=None)
        self._subscribers: list[Callable[[CompileEvent], Any]] = []
        self._in_progress = InProgress(self._subscriber_failed)
        self._variants: set[tuple[str, str]] = set()  # function variants graphed here
        self._forecast: KernelForecast | None = None    # as_neuron: eager kernels, see start()
        self._counting: Any = None
        self._counting_thread = 0
        self._rules_scope = 0

    # -- lifecycle ----------------------------------------------------------------------
    @property
    def active(self) -> bool:
        return self._started is not None

    @property
    def events(self) -> list[CompileEvent]:
        return self.log.events

    def start(self) -> CompileRecorder:
        """Begin recording (again: a restarted recorder continues the same log)."""
        if self._started is None:
            setup_device.import_neuronx()  # on Neuron: NEFF build times, eager kernels (neuron.py)
            self._file.take()
            try:
                NEURON.baseline(self)
                TAP.attach(self)
            except BaseException:
                self._file.leave()
                raise
            if self.as_neuron:
                self._start_rules()
            self._started = time.perf_counter()
        return self

    def _start_rules(self) -> None:
        """as_neuron: enter Neuron's compile rules, and forecast the eager kernels of this
        thread until stop() (a ``kernels`` event at each safe point)."""
        from neuronkit.sources.kernel_forecast import KernelForecast

        self._rules_scope = neuron_rules.enter()
        self._forecast = KernelForecast(self)
        self._counting = self._forecast.counting()
        try:
            self._counting.__enter__()
        except Exception as exc:  # a torch without ignore_compile_internals: rules, no forecast
            self._forecast = self._counting = None
            say(f"neuronkit as_neuron: no eager-kernel forecast ({exc})")
        self._counting_thread = threading.get_ident()

    def _stop_rules(self) -> None:
        """Leave what :meth:`_start_rules` entered (the forecast's mode only in its thread:
        dispatch modes are per thread)."""
        counting, self._counting, self._forecast = self._counting, None, None
        try:
            if counting is not None and threading.get_ident() == self._counting_thread:
                counting.__exit__(None, None, None)
            elif counting is not None:
                say("neuronkit as_neuron: stopped from another thread than the one that "
                    "started it: that thread's eager ops are no longer forecast")
        finally:
            neuron_rules.leave(self._rules_scope)

    def stop(self) -> CompileRecorder:
        """Stop recording (a safe point first, see :meth:`safe_point`); torch's logging is left as
        it was found once no recorder is active."""
        if self._started is not None:
            try:
                self.safe_point()
            finally:
                if self.as_neuron:
                    self._stop_rules()
                TAP.detach(self)
                NEURON.forget(self)
                self._in_progress.end()  # no end will reach a stopped recorder
            self._wall_s += time.perf_counter() - self._started
            self._started = None
            try:
                self.log.set_wall_time(self._wall_s)
            except OSError as exc:  # kept in memory; never masks the body's own exception
                self._file.failed(exc, "the wall time")
            finally:
                self._file.leave()
        return self

    def __enter__(self) -> CompileRecorder:
        with self._depth_lock:
            self.start()
            self._depth += 1
        return self

    def __exit__(self, *exc_info: Any) -> None:
        """Stop at the outermost ``with`` block's exit (an inner one leaves it recording)."""
        with self._depth_lock:
            self._depth = max(self._depth - 1, 0)
            if self._depth == 0:
                self.stop()

    def __repr__(self) -> str:
        state = "active" if self.active else "stopped"
        return f"CompileRecorder({state}, {len(self.log)} events, context={self.current_context!r})"

    # -- context label ------------------------------------------------------------------
    # Labels live in a ContextVar: each thread (and asyncio task) has its own, so concurrent
    # ``with rec.context(...)`` blocks neither see nor restore each other's labels. A new thread
    # starts with the ``context`` given to the constructor.
    @property
    def current_context(self) -> str:
        """The label the next event compiled in this thread / context will carry."""
        return self._context.get()

    def set_context(self, label: Any) -> None:
        """The label stored on the following events of this thread (a step, a prompt, a cell)."""
        self._context.set(str(label))

    @contextlib.contextmanager
    def context(self, label: Any) -> Iterator[CompileRecorder]:
        """``with rec.context("step 3"):`` labels the compiles inside, then restores the label."""
        token = self._context.set(str(label))
        try:
            yield self
        finally:
            self._context.reset(token)

    @contextlib.contextmanager
    def annotate(self, **notes: Any) -> Iterator[CompileRecorder]:
        """``with rec.annotate(recompile_limit={...}):`` adds the notes to the ``metrics`` of
        every event recorded inside (this thread / context only), e.g. what a workload did."""
        token = self._notes.set({**(self._notes.get() or {}), **notes})
        try:
            yield self
        finally:
            self._notes.reset(token)

    def register_recompile_context(self) -> Callable[[], None]:
        """Also hand the current label to torch's own ``recompile_user_contexts`` metric."""
        return add_recompile_context(self._context.get)

    # -- subscribers --------------------------------------------------------------------
    def subscribe(self, fn: Callable[[CompileEvent], Any]) -> Callable[[], None]:
        """Call ``fn(event)`` for each event as it is recorded; returns the unsubscribe function."""
        return add_subscriber(self._subscribers, fn,
                              "subscribe() needs a callable taking a CompileEvent")

    def subscribe_starts(self, fn: Callable[[CompileStart], Any]) -> Callable[[], None]:
        """Call ``fn(start)`` when a compile begins, again (same ``start.id``) when its input
        shapes are known, and once more with ``ended_at`` set when it ends (a Dynamo phase just
        before its event reaches ``subscribe``'s functions); returns the unsubscribe function."""
        return self._in_progress.subscribe(fn)

    @property
    def compiling(self) -> dict[int, CompileStart]:
        """The compiles in progress now, by ``CompileStart.id`` (a copy): Dynamo compiles, and on
        Neuron the NEFF builds not yet resolved by a safe point (``phase="device"``)."""
        return self._in_progress.snapshot()

    def receive_start(self, start: CompileStart) -> None:
        """Take a source's compile start (new, updated, or ended: ``ended_at`` set); this
        recorder's copy gets its rank and the thread's context label."""
        if start.ended_at is None:
            start = dataclasses.replace(start, rank=self.rank,
                                        context=start.context or self._context.get())
        self._in_progress.update(start)

    def safe_point(self, wait: bool = True) -> None:
        """Resolve what is known only after a compile returns: on native Neuron, the NEFF build
        time and cache state of each pending event (written as update lines) and the eager-op
        kernels compiled since the last safe point (one ``kernels`` event). At most one
        ``torch_neuronx.synchronize()``: call it where the program waits for the device anyway
        (nk.generate after its tokens are read, the Trainer callback at logging steps and epoch
        ends, ``stop()``). ``wait=False`` synchronizes only when a NEFF build is pending, so a
        steady step costs none (the Trainer callback's step end). A pending async error of the
        user's own work is raised here, as the user's next synchronize would. Off Neuron it
        does nothing (as_neuron: the eager kernels forecast since the last safe point, one
        ``kernels`` event). The NEFF builds in ``compiling`` then end."""
        building = self._in_progress.open_ids("device")
        NEURON.settle(self, wait)
        self._in_progress.end(building)  # resolved, or unknowable: no later safe point knows more
        forecast = self._forecast
        if forecast is not None:  # as_neuron: the eager kernels forecast since the last one
            forecast.checkpoint()

    def update(self, seq: int, **fields: Any) -> CompileEvent:
        """Set fields resolved after the event was recorded (``CompileLog.update``); set in
        memory even when the file cannot be written."""
        event: CompileEvent | None = None
        with self._file.writing("an update", self.active):
            self.write_key_parts(fields.get("cache_key") or [])
            event = self.log.update(seq, **fields)
        if event is None:  # the write failed after the fields were set
            event = next(e for e in self.log.events if e.seq == seq)
        return event

    def record(self, **fields: Any) -> CompileEvent:
        """Add an event that a workload observed itself (e.g. ``kind="eager_fallback"``: calls
        torch ran uncompiled after a limit hit, which leave no trace record). The recorder adds
        rank, context, device and backend, as for a compile, and the time when not given;
        returns the event."""
        fields.setdefault("started_at", time.time())
        return self.receive(CompileEvent(**fields))

    def receive(self, event: CompileEvent) -> CompileEvent:
        """Take a source's event: this recorder's copy gets its rank, context, device (torch's
        word first, else the setting), backend and notes, is logged and handed to subscribers."""
        notes = self._notes.get()
        if self.as_neuron and event.kind in GRAPH_KINDS and event.compile_id:
            notes = {**neuron_rules.notes_for(event.compile_id), **(notes or {})}
        event = dataclasses.replace(
            event, device=event.device or self.device, backend=event.backend or self.backend,
            rank=self.rank, context=self._context_of(event),
            metrics={**event.metrics, **notes} if notes else dict(event.metrics),
            cache_key=[dict(lookup) for lookup in event.cache_key])
        if event.kind in GRAPH_KINDS and (event.function, event.location) not in self._variants:
            # this recorder's first graph of the variant: a graph of a code object compiled
            # before it started (an earlier recording's) is said so, not called a recompile
            self._variants.add((event.function, event.location))
            if event.kind == "recompile":
                event.kind, event.changed = "first", ""
                event.metrics["code_graphs_before"] = max(event.graph_count - 1, 1)
        with self._file.writing("a compile event", self.active):
            self.write_key_parts(event.cache_key)  # what its keys are made of, once per key
            self.log.append(event)  # in memory first: a failed write does not lose it
        self._in_progress.end_compile(event)
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception as exc:
                self._subscriber_failed(exc)
        return event

    def write_key_parts(self, lookups: list[dict[str, Any]]) -> None:
        """Keep in the log what each looked-up key is made of (the sources hold the parts of
        the last keys; a key this log has already is not written again)."""
        for lookup in lookups:
            found = parts_of(lookup.get("key"))
            if found is not None and lookup["key"] not in self.log.key_parts:
                self.log.add_key_parts(found[0], lookup["key"], found[1])

    def _context_of(self, event: CompileEvent) -> str:
        """The label an event gets: the thread's, but a backward graph's is its forward
        compile's (autograd may run it on a thread of its own, where no step is set)."""
        if event.kind == "backward":
            for e in reversed(self.log.events):
                if e.compile_id == event.compile_id and e.kind in GRAPH_KINDS:
                    return e.context
        return self._context.get()

    def _subscriber_failed(self, exc: Exception) -> None:
        self.subscriber_errors.append(exc)
        if len(self.subscriber_errors) == 1:
            say(f"a CompileRecorder subscriber raised {exc!r}; recording goes on "
                f"(all errors: rec.subscriber_errors)")
