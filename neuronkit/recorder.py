"""CompileRecorder: every torch.compile (Dynamo) compile, as it happens, as a CompileEvent.

    with nk.CompileRecorder("compile-log.jsonl") as rec:
        model(x)                      # any torch.compile work
    rec.events                        # [CompileEvent(function="forward", kind="first", ...), ...]

Events come from the sources (``sources/``: torch's structured trace, read in process), which
hand each recorder a typed CompileEvent; the recorder adds rank, context and device and owns the
log. Several recorders may be active at once: each sees every compile. A recorder may be started again after
``stop()``: it continues the same log. ``log_path`` is (re)written with a header line, then each
event is appended and flushed as it happens.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import itertools
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterator

from .events import FORMAT, FORMAT_VERSION, CompileEvent, CompileLog
from .sources import say
from .sources.dynamo import TAP
from .sources.neuron import NEURON

__all__ = ["CompileRecorder", "default_header", "default_rank"]


_IDS = itertools.count()  # names each recorder's ContextVar


def default_header(device: str = "", backend: str = "", **extra: Any) -> dict[str, Any]:
    """The header line: format, versions, device and backend."""
    from ._version import __version__
    from .device import package_version

    versions: dict[str, Any] = {"neuronkit": __version__}
    for name in ("torch", "transformers", "torch_neuronx"):
        versions[name] = package_version(name.replace("_", "-"))
    return {"format": FORMAT, "version": FORMAT_VERSION, **versions,
            "device": device, "backend": backend, **extra}


def default_rank() -> int:
    """$RANK, else the torch.distributed rank when initialised, else 0."""
    if os.environ.get("RANK", "").isdigit():
        return int(os.environ["RANK"])
    try:
        import torch.distributed as dist

        if dist.is_available() and dist.is_initialized():
            return int(dist.get_rank())
    except Exception:
        pass
    return 0


def _detected() -> tuple[str, str]:
    from .device import detect

    report = detect()
    return report.device, report.compile_backend


class CompileRecorder:
    """Records every Dynamo compile while active; a context manager, or ``start()`` / ``stop()``.

    ``log_path``: JSONL file to mirror the log to (None: memory only). ``device`` / ``backend``:
    stored in the header, and on events where torch does not say better (default: ``nk.detect()``;
    an event's device is that of the compiled function's first input tensor, its backend the one
    the compile really used, when torch's trace names them). ``rank``: default $RANK, else the
    torch.distributed rank, else 0. ``context``: the label of events from threads
    that set none (see ``context()``; labels are per thread / ``contextvars`` context).
    ``quiet``: hide torch's own recompile-limit warning (neuronkit warns instead); the recorder
    never turns on any torch logging itself.
    """

    def __init__(self, log_path: str | os.PathLike[str] | None = None, *, device: str | None = None,
                 backend: str | None = None, rank: int | None = None, context: str = "",
                 quiet: bool = True) -> None:
        if rank is not None and (not isinstance(rank, int) or rank < 0):
            raise ValueError(f"rank must be a non-negative int, got {rank!r}")
        if not (device and backend):
            detected = _detected()
            device, backend = device or detected[0], backend or detected[1]
        self.device, self.backend = str(device), str(backend)
        self.rank = default_rank() if rank is None else rank
        self.quiet = quiet
        self.log = CompileLog(header=default_header(device=self.device, backend=self.backend,
                                                    rank=self.rank),
                              path=Path(log_path) if log_path is not None else None)
        self.subscriber_errors: list[BaseException] = []
        self._default_context = str(context)
        self._context = contextvars.ContextVar(f"neuronkit_context_{next(_IDS)}",
                                               default=self._default_context)
        self._notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
            f"neuronkit_notes_{next(_IDS)}", default=None)
        self._subscribers: list[Callable[[CompileEvent], Any]] = []
        self._started: float | None = None
        self._wall_s = 0.0

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
            from .device import import_neuronx

            import_neuronx()  # on Neuron: NEFF build times and eager kernels (sources/neuron.py)
            NEURON.baseline(self)
            TAP.attach(self)
            self._started = time.perf_counter()
        return self

    def stop(self) -> CompileRecorder:
        """Stop recording (a safe point first, see :meth:`safe_point`); torch's logging is left as
        it was found once no recorder is active."""
        if self._started is not None:
            try:
                self.safe_point()
            finally:
                TAP.detach(self)
                NEURON.forget(self)
            self._wall_s += time.perf_counter() - self._started
            self._started = None
            try:
                self.log.set_wall_time(self._wall_s)
            except OSError as exc:  # the file went away: keep it in memory, do not mask the body
                say(f"could not write the wall time to {self.log.path}: {exc}")
        return self

    def __enter__(self) -> CompileRecorder:
        return self.start()

    def __exit__(self, *exc_info: Any) -> None:
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
        import torch._dynamo

        hook = lambda: self._context.get()  # noqa: E731
        torch._dynamo.register_hook_for_recompile_user_context(hook)

        def unregister() -> None:
            from torch._dynamo import utils

            hooks = getattr(utils, "_recompile_user_contexts", None) or []
            if hook in hooks:
                hooks.remove(hook)
        return unregister

    # -- subscribers --------------------------------------------------------------------
    def subscribe(self, fn: Callable[[CompileEvent], Any]) -> Callable[[], None]:
        """Call ``fn(event)`` for each event as it is recorded; returns the unsubscribe function."""
        if not callable(fn):
            raise TypeError(f"subscribe() needs a callable taking a CompileEvent, got {fn!r}")
        self._subscribers.append(fn)

        def unsubscribe() -> None:
            if fn in self._subscribers:
                self._subscribers.remove(fn)
        return unsubscribe

    def safe_point(self) -> None:
        """Resolve what is known only after a compile returns: on native Neuron, the NEFF build
        time and cache state of each pending event (written as update lines) and the eager-op
        kernels compiled since the last safe point (one ``kernels`` event). At most one
        ``torch_neuronx.synchronize()``; call it where waiting for the device costs nothing
        (nk.generate, the Trainer callback and the dashboard already do). A pending async error
        of the user's own work is raised here, as the user's next synchronize would. Off Neuron
        it does nothing."""
        NEURON.settle(self)

    def update(self, seq: int, **fields: Any) -> CompileEvent:
        """Set fields resolved after the event was recorded (``CompileLog.update``)."""
        return self.log.update(seq, **fields)

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
        event = dataclasses.replace(
            event, device=event.device or self.device, backend=event.backend or self.backend,
            rank=self.rank, context=self._context.get(),
            metrics={**event.metrics, **notes} if notes else dict(event.metrics))
        self.log.append(event)
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception as exc:
                self.subscriber_errors.append(exc)
                if len(self.subscriber_errors) == 1:
                    say(f"a CompileRecorder subscriber raised {exc!r}; recording goes on "
                         f"(all errors: rec.subscriber_errors)")
        return event
