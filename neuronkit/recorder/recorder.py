"""CompileRecorder: every torch.compile (Dynamo) compile, as it happens, as a CompileEvent.

    with nk.CompileRecorder("compile-log.jsonl") as rec:
        model(x)                      # any torch.compile work
    rec.events                        # [CompileEvent(function="forward", kind="first", ...), ...]

Events come from the sources (``sources/``: torch's structured trace, read in process), which
hand each recorder a typed CompileEvent; the recorder adds rank, context and device and owns the
log. Several recorders may be active at once: each sees every compile. A recorder may be started again after
``stop()``: it continues the same log. ``log_path`` is (re)written with a header line, then each
event is appended and flushed as it happens.

One log file, one recorder: a recorder holds its ``log_path`` from ``start()`` to ``stop()`` (and
for each write while stopped), and another recorder given that path, in this process or another,
is refused (``LogPathInUseError``) instead of truncating it. Across processes the hold is an
exclusive ``flock`` on the file, which the OS drops when a process dies; on Windows, and on
network filesystems without locks, only recorders of the same process are told apart. A stopped
recorder lets its path go: a new recorder there starts the file afresh, and the stopped one is
then refused a restart (it keeps its events in memory) rather than mix two logs in one file. A
failed write costs no event: the event stays in ``rec.events`` and reaches the subscribers
(dashboard, Trainer callback); the failure is said once (all of them: ``rec.write_errors``).

Compiles in progress: ``rec.compiling`` and ``rec.subscribe_starts(fn)`` (``CompileStart``, see
``sources/starts.py``): when a compile begins, when its input shapes are known, when it ends.
"""
from __future__ import annotations

import contextlib
import contextvars
import dataclasses
import itertools
import os
import threading
import time
import weakref
from pathlib import Path
from typing import Any, Callable, Iterator

try:
    import fcntl
except ImportError:  # Windows: recorders of this process are told apart, not other processes
    fcntl = None  # type: ignore[assignment]

from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.sink import say
from neuronkit.sources.subscribers import add_subscriber
from neuronkit.sources.dynamo import TAP
from neuronkit.sources.neuron import NEURON
from neuronkit.sources.starts import CompileStart, InProgress
from neuronkit.setup.process import default_rank

__all__ = ["CompileRecorder", "CompileStart", "LogPathInUseError", "default_header"]


_IDS = itertools.count()  # names each recorder's ContextVar


class LogPathInUseError(RuntimeError):
    """Another recorder writes the log file this one was given: two would mix or lose events."""


# -- one recorder per log file ------------------------------------------------------------------
_HOLDERS: dict[str, weakref.ReferenceType[CompileRecorder]] = {}  # real path -> its recorder
_HOLDERS_LOCK = threading.Lock()


def _in_use(path: Path, who: str) -> str:
    return (f"{path} is already the log of {who}: two recorders on one file would interleave "
            f"their events and the second would truncate the first's. Give each recorder its own "
            f"log_path (one per rank: nk.rank_log_path({str(path)!r})), or stop the other one "
            "first; to see the same events twice, use one recorder and rec.subscribe(...)")


_Signature = tuple[int, int, int, int] | None


def _signature(path: Path) -> _Signature:
    """What tells whether a file changed: device, inode, size, mtime (None: no file)."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns


class _Hold:
    """A recorder's hold on its log file: its entry in this process's table, and an exclusive
    ``flock`` on the file (other processes); released by :meth:`release` or with the recorder."""

    def __init__(self, path: Path, owner: CompileRecorder) -> None:
        self.path = path
        self.key = os.path.normcase(os.path.realpath(path))
        self.ref = weakref.ref(owner)
        with _HOLDERS_LOCK:
            other = _HOLDERS.get(self.key)
            holder = other() if other is not None else None
            if holder is not None and holder is not owner:
                state = "recording" if holder.active else "writing"
                raise LogPathInUseError(_in_use(path, f"another CompileRecorder of this process "
                                                      f"(rank {holder.rank}, {state})"))
            _HOLDERS[self.key] = self.ref
        self.fd: int | None = None
        try:
            self.fd = self._lock()
        except BaseException:
            self._forget()
            raise
        self._finalizer = weakref.finalize(owner, self.release)

    def _lock(self) -> int | None:
        if fcntl is None:
            return None
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            raise LogPathInUseError(_in_use(self.path, "a recorder in another process")) from None
        except OSError:  # a filesystem without locks (some network mounts): this process only
            os.close(fd)
            return None
        return fd

    def _forget(self) -> None:
        with _HOLDERS_LOCK:
            if _HOLDERS.get(self.key) is self.ref:
                del _HOLDERS[self.key]

    def release(self) -> _Signature:
        """Let the file go; returns its signature as left (to see, later, if it changed)."""
        left = _signature(self.path)
        if self.fd is not None:
            os.close(self.fd)  # drops the flock
            self.fd = None
        self._forget()
        self._finalizer.detach()
        return left


def default_header(device: str = "", backend: str = "", **extra: Any) -> dict[str, Any]:
    """The header line: format, versions, device and backend."""
    from neuronkit._version import __version__
    from neuronkit.setup.device import package_version

    versions: dict[str, Any] = {"neuronkit": __version__}
    for name in ("torch", "transformers", "torch_neuronx"):
        versions[name] = package_version(name.replace("_", "-"))
    return {"format": FORMAT, "version": FORMAT_VERSION, **versions,
            "device": device, "backend": backend, **extra}


def _detected() -> tuple[str, str]:
    from neuronkit.setup.device import detect

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
        self.subscriber_errors: list[BaseException] = []
        self.write_errors: list[Exception] = []  # failed writes to log_path (events are kept)
        self._started: float | None = None
        self._wall_s = 0.0
        self._hold: _Hold | None = None
        self._left: tuple[Path, _Signature] | None = None  # the file as this recorder left it
        self._path_lock = threading.Lock()
        header = default_header(device=self.device, backend=self.backend, rank=self.rank)
        if log_path is None:
            self.log = CompileLog(header=header)
        else:
            path = Path(log_path)
            if path.is_dir():
                raise IsADirectoryError(f"log_path {path} is a folder: pass a .jsonl file, e.g. "
                                        f"{path / 'compile.jsonl'} (one per rank: "
                                        f"nk.rank_log_path({str(path)!r}))")
            hold = _Hold(path, self)  # refused if another recorder writes it: nothing truncated
            try:
                self.log = CompileLog(header=header, path=path)
            finally:
                self._left = (path, hold.release())
        self._default_context = str(context)
        self._context = contextvars.ContextVar(f"neuronkit_context_{next(_IDS)}",
                                               default=self._default_context)
        self._notes: contextvars.ContextVar[dict[str, Any] | None] = contextvars.ContextVar(
            f"neuronkit_notes_{next(_IDS)}", default=None)
        self._subscribers: list[Callable[[CompileEvent], Any]] = []
        self._in_progress = InProgress(self._subscriber_failed)

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
            from neuronkit.setup.device import import_neuronx

            import_neuronx()  # on Neuron: NEFF build times and eager kernels (sources/neuron.py)
            self._take_path()
            try:
                NEURON.baseline(self)
                TAP.attach(self)
            except BaseException:
                self._leave_path()
                raise
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
                self._in_progress.end()  # no end will reach a stopped recorder
            self._wall_s += time.perf_counter() - self._started
            self._started = None
            try:
                self.log.set_wall_time(self._wall_s)
            except OSError as exc:  # kept in memory; never masks the body's own exception
                self._write_failed(exc, "the wall time")
            finally:
                self._leave_path()
        return self

    # -- the log file -------------------------------------------------------------------
    def _take_path(self) -> None:
        """Hold ``log_path`` while recording. Refused (LogPathInUseError) when another recorder
        holds it, or when the file changed since this recorder last wrote it (another recorder
        wrote it meanwhile: appending would mix two logs). A file gone is written again whole."""
        path = self.log.path
        if path is None or self._hold is not None:
            return
        found = _signature(path)
        try:
            hold = _Hold(path, self)
        except OSError as exc:  # not LogPathInUseError: record in memory, say so once
            self._write_failed(exc, "the log")
            return
        if found is not None and self._left is not None and self._left[0] == path and (
                found != self._left[1]):  # (a path of rec.log.save() is the user's to choose)
            hold.release()
            raise LogPathInUseError(
                f"{path} changed since this recorder stopped (another recorder or program wrote "
                f"it); restarting would mix two logs in one file. This recorder's "
                f"{len(self.log)} events are in rec.log: save them with rec.log.save(other_path), "
                "or give each recorder its own log_path")
        self._hold = hold
        if found is None:
            try:
                self.log.save(path)
            except OSError as exc:
                self._write_failed(exc, "the log")

    def _leave_path(self) -> None:
        if self._hold is not None:
            self._left = (self._hold.path, self._hold.release())
            self._hold = None

    @contextlib.contextmanager
    def _writing(self, what: str) -> Iterator[None]:
        """Around one write to the log: a stopped recorder holds its file for the write (one
        that another recorder took keeps its events in memory from then on); a failed write
        is said once and costs no event (it is in memory before the write)."""
        if self._started is not None or self.log.path is None:
            try:
                yield
            except OSError as exc:
                self._write_failed(exc, what)
            return
        with self._path_lock:
            try:
                self._take_path()
            except LogPathInUseError as exc:
                self.log.path = None  # the file is another recorder's now
                self._write_failed(exc, what)
            try:
                yield
            except OSError as exc:
                self._write_failed(exc, what)
            finally:
                self._leave_path()

    def _write_failed(self, exc: Exception, what: str) -> None:
        self.write_errors.append(exc)
        if len(self.write_errors) == 1:
            say(f"could not write {what} to {self.log.path or 'the log file'}: {exc}; recording "
                f"goes on in memory (rec.events; the dashboard and subscribers get every event). "
                "Save them with rec.log.save(path) (all errors: rec.write_errors)")

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

    def safe_point(self) -> None:
        """Resolve what is known only after a compile returns: on native Neuron, the NEFF build
        time and cache state of each pending event (written as update lines) and the eager-op
        kernels compiled since the last safe point (one ``kernels`` event). At most one
        ``torch_neuronx.synchronize()``; call it where waiting for the device costs nothing
        (nk.generate, the Trainer callback and the dashboard already do). A pending async error
        of the user's own work is raised here, as the user's next synchronize would. Off Neuron
        it does nothing. The NEFF builds in ``compiling`` then end."""
        building = self._in_progress.open_ids("device")
        NEURON.settle(self)
        self._in_progress.end(building)  # resolved, or unknowable: no later safe point knows more

    def update(self, seq: int, **fields: Any) -> CompileEvent:
        """Set fields resolved after the event was recorded (``CompileLog.update``); set in
        memory even when the file cannot be written."""
        event: CompileEvent | None = None
        with self._writing("an update"):
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
        event = dataclasses.replace(
            event, device=event.device or self.device, backend=event.backend or self.backend,
            rank=self.rank, context=self._context.get(),
            metrics={**event.metrics, **notes} if notes else dict(event.metrics))
        with self._writing("a compile event"):
            self.log.append(event)  # in memory first: a failed write does not lose it
        self._in_progress.end_compile(event)
        for fn in list(self._subscribers):
            try:
                fn(event)
            except Exception as exc:
                self._subscriber_failed(exc)
        return event

    def _subscriber_failed(self, exc: Exception) -> None:
        self.subscriber_errors.append(exc)
        if len(self.subscriber_errors) == 1:
            say(f"a CompileRecorder subscriber raised {exc!r}; recording goes on "
                f"(all errors: rec.subscriber_errors)")
