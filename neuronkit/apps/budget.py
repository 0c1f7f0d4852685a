"""Compile budgets: fail a block (a test, a notebook cell) that compiles more than it should.

    with nk.compile_budget(max_graphs=2, max_recompiles=0) as budget:
        model(x)                      # any torch.compile work
    budget.graphs, budget.recompiles, budget.compile_s, budget.neff_builds

At exit the events recorded inside the block are counted:

- graphs: events of ``GRAPH_KINDS`` (first compiles and recompiles);
- recompiles: events of kind ``recompile``;
- compile seconds: the sum of ``total_s`` (Dynamo's time plus, on Neuron, the NEFF build);
- graph breaks and failed compiles: reported, budgeted only with ``max_graph_breaks`` /
  ``max_failures``;
- NEFF builds (``max_neff_builds``): on native Neuron, the NEFFs neuronx-cc really built, not
  loaded from the NEFF cache (``disk_hit``, ``memory_hit``): graphs' (``neff_cache ==
  "compiled"``) and eager-op kernels' (``kernels`` events), named apart in the report. A new
  serving process traces every graph again (``max_graphs=0`` fails) while every NEFF may load from
  the cache. The exit takes the recorder's safe point first; an event whose NEFF state is still
  unknown then counts as a build, and the report says so. Over a merged log a NEFF built on
  several ranks counts once, and a rank's disk hit that waited for another's build counts with
  it (``workloads/neff_builds.py``). Off Neuron: 0 (no NEFFs).

A ``limit_hit`` (torch reached its recompile limit and refused a graph, running eagerly instead)
counts as one graph and one recompile: the code asked for one more, so a budget that a clean run
meets still fails when the limit hides the recompiles. So do the shapes that ran eager after a
hit (``eager_fallback``, recorded where neuronkit drove the calls: ``nk.generate``, the Trainer
callback), once per shape: a hit and the eager calls of the shape it refused are one graph. A
code that hit the limit before the block is run-only (torch runs its new shapes eager without a
record): the block lets it check the limit again, so torch records its refusal inside the block.

Over budget, :class:`CompileBudgetExceeded` (an ``AssertionError``, so pytest reports a failure)
names each limit exceeded and shows the events counted against them. When the block itself
raised, that exception goes on unmasked (with a note saying the budget was exceeded too).
"""
from __future__ import annotations

import contextlib
import math
import os
from collections import defaultdict
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any, Callable

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import shape_key
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.file_lock import LogPathInUseError
from neuronkit.setup.decode_graphs import codes_at_limit, compile_again
from neuronkit.setup.device import loaded_neuronx
from neuronkit.workloads.generate_eager import is_uncompiled
from neuronkit.workloads.neff_builds import counted_as_build, neff_counts, neff_lines

if TYPE_CHECKING:  # pragma: no cover
    from neuronkit.recorder.recorder import CompileRecorder

__all__ = ["LIMITS", "CompileBudget", "CompileBudgetExceeded", "compile_budget"]

# the limits a budget takes, and what each one counts
LIMITS: tuple[str, ...] = ("max_graphs", "max_recompiles", "max_compile_s", "max_graph_breaks",
                           "max_failures", "max_neff_builds")
_REFUSED = ("limit_hit", "eager_fallback")  # graphs the code asked for and torch refused


def _refused(e: CompileEvent) -> bool:
    """A graph torch refused (a limit hit, calls run eager past it); a forward transformers never
    compiled asked for no graph (its advice says so: ``advice/uncompiled.py``)."""
    return e.kind in _REFUSED and not is_uncompiled(e)


_COUNTED: dict[str, Callable[[CompileEvent], bool]] = {
    "max_graphs": lambda e: e.kind in GRAPH_KINDS or _refused(e),
    "max_recompiles": lambda e: e.kind == "recompile" or _refused(e),
    "max_compile_s": lambda e: e.total_s > 0,
    "max_graph_breaks": lambda e: e.kind == "graph_break",
    "max_failures": lambda e: e.kind == "failed",
    "max_neff_builds": counted_as_build,
}
_NOUNS = {"max_graphs": "graph", "max_recompiles": "recompile", "max_graph_breaks": "graph break",
          "max_failures": "failed compile", "max_neff_builds": "NEFF build"}


def _refused_graphs(events: list[CompileEvent]) -> int:
    """Graphs torch refused at its recompile limit, per function: its limit hits, or the shapes
    that ran eager (``eager_fallback``) where those are more; a hit and the eager calls of the
    shape it refused are one graph."""
    hits: dict[tuple[str, str], int] = defaultdict(int)
    eager: dict[tuple[str, str], set[str]] = defaultdict(set)
    for e in events:
        if e.kind == "limit_hit":
            hits[e.function, e.location] += 1
        elif e.kind == "eager_fallback" and not is_uncompiled(e):
            eager[e.function, e.location].add(shape_key(e))
    return sum(max(hits[key], len(eager[key])) for key in {*hits, *eager})


def _count(n: int, noun: str) -> str:
    return f"{n} {noun}" + ("" if n == 1 else "s")


def _same_file(a: str | os.PathLike[str], b: str | os.PathLike[str]) -> bool:
    return os.path.normcase(os.path.realpath(a)) == os.path.normcase(os.path.realpath(b))


class CompileBudgetExceeded(AssertionError):
    """A block compiled more than its budget allows; the message shows the events over it."""

    def __init__(self, message: str, exceeded: list[str], events: list[CompileEvent]) -> None:
        super().__init__(message)
        self.exceeded = exceeded
        self.events = events


def _check_count(name: str, value: Any) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int):
        raise TypeError(f"{name} must be a non-negative int or None, got {value!r}")
    if value < 0:
        raise ValueError(f"{name} must be >= 0, got {value}")
    return value


def _check_seconds(name: str, value: Any) -> float | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise TypeError(f"{name} must be a non-negative number of seconds or None, got {value!r}")
    if not math.isfinite(value) or value < 0:
        raise ValueError(f"{name} must be a finite number >= 0, got {value}")
    return float(value)


class CompileBudget(contextlib.ContextDecorator):
    """The budget of one block (see the module docstring). After the block: ``events`` and
    ``log`` (the block's events), the counts, ``exceeded`` (one line per limit over) and ``ok``."""

    def __init__(self, max_graphs: int | None = None, max_recompiles: int | None = None,
                 max_compile_s: float | None = None, *, max_graph_breaks: int | None = None,
                 max_failures: int | None = None, max_neff_builds: int | None = None,
                 recorder: CompileRecorder | None = None,
                 log_path: str | os.PathLike[str] | None = None) -> None:
        self.limits: dict[str, float | None] = {
            "max_graphs": _check_count("max_graphs", max_graphs),
            "max_recompiles": _check_count("max_recompiles", max_recompiles),
            "max_compile_s": _check_seconds("max_compile_s", max_compile_s),
            "max_graph_breaks": _check_count("max_graph_breaks", max_graph_breaks),
            "max_failures": _check_count("max_failures", max_failures),
            "max_neff_builds": _check_count("max_neff_builds", max_neff_builds),
        }
        if recorder is not None and not (hasattr(recorder, "events") and hasattr(recorder, "start")):
            raise TypeError(f"recorder must be a CompileRecorder, got {type(recorder).__name__}")
        if log_path is not None and not isinstance(log_path, (str, os.PathLike)):
            raise TypeError(f"log_path must be a path, got {type(log_path).__name__}")
        own = getattr(getattr(recorder, "log", None), "path", None)
        if log_path is not None and own is not None and _same_file(own, log_path):
            raise ValueError(f"log_path {log_path} is the recorder's own log: it gets the block's "
                             "events already, and saving the block there would replace the rest. "
                             "Leave log_path out, or give another file for the block's events")
        self.recorder = recorder
        self.log_path = Path(log_path) if log_path is not None else None
        self.log = CompileLog()
        self._active: CompileRecorder | None = None
        self._start = 0
        self._started_here = False

    # -- the counts -------------------------------------------------------------------------
    @property
    def events(self) -> list[CompileEvent]:
        """The events recorded inside the block (so far, while it runs)."""
        if self._active is not None:
            return list(self._active.events[self._start:])
        return list(self.log.events)

    @property
    def graphs(self) -> int:
        return sum(1 for e in self.events if e.kind in GRAPH_KINDS)

    @property
    def recompiles(self) -> int:
        return sum(1 for e in self.events if e.kind == "recompile")

    @property
    def compile_s(self) -> float:
        return sum(e.total_s for e in self.events)

    @property
    def neff_builds(self) -> int:
        """NEFFs neuronx-cc built in the block: graphs' (those of unknown NEFF state included)
        and eager-op kernels'; 0 off Neuron (no NEFFs)."""
        return neff_counts(self.events).builds

    @property
    def neff_unknown(self) -> int:
        """Of :attr:`neff_builds`, the events whose NEFF state was still unknown at exit."""
        return neff_counts(self.events).unknown

    def _neff_summary(self) -> str:
        """NEFF builds and loads on Neuron; off Neuron, says there are none and why."""
        n = neff_counts(self.events)
        if not n.with_neff:
            why = "not on Neuron" if loaded_neuronx() is None else "no graph compiled for Neuron"
            return f"no NEFF builds: {why}"
        notes = [f"{n.unknown} of unknown state, counted as builds" if n.unknown else "",
                 f"{n.waited} waited for another rank's build, counted as builds, a NEFF once "
                 "over the ranks" if n.waited else ""]
        note = "; ".join(x for x in notes if x)
        loaded = (f"; {_count(n.loaded, 'graph NEFF')} and "
                  f"{_count(n.kernels_loaded, 'eager-op kernel')}" if n.kernel_events
                  else f", {n.loaded}")
        return (f"{n.builds_text()}{loaded} loaded from the NEFF cache"
                + (f" ({note})" if note else ""))

    def counts(self) -> dict[str, float]:
        """What each limit counts, over the block's events (graphs refused at the limit
        included: ``_refused_graphs``)."""
        events = self.events
        refused = _refused_graphs(events)
        counts: dict[str, float] = {name: sum(1 for e in events if _COUNTED[name](e)
                                              and e.kind not in _REFUSED) for name in LIMITS}
        counts["max_graphs"] += refused
        counts["max_recompiles"] += refused
        counts["max_compile_s"] = sum(e.total_s for e in events)
        counts["max_neff_builds"] = neff_counts(events).builds  # a key once over the ranks
        return counts

    @property
    def exceeded(self) -> list[str]:
        """One line per limit exceeded: ``3 graphs > max_graphs=2``."""
        lines = []
        for name, count in self.counts().items():
            limit = self.limits[name]
            if limit is None or count <= limit:
                continue
            if name == "max_compile_s":
                lines.append(f"{count:.2f} compile s > max_compile_s={limit:g}")
            elif name == "max_neff_builds":
                lines.append(self._neff_exceeded(int(limit)))
            else:
                lines.append(f"{_count(int(count), _NOUNS[name])} > {name}={int(limit)}")
        return lines

    def _neff_exceeded(self, limit: int) -> str:
        """``3 NEFF builds > max_neff_builds=0 (1 graph, 2 eager-op kernels)``."""
        n = neff_counts(self.events)
        parts = [f"{_count(n.graph_builds, 'graph')}, {_count(n.kernel_builds, 'eager-op kernel')}"
                 + (" (sync mode: at most)" if n.kernels_sync_mode and n.kernel_builds else "")
                 if n.kernel_events else "",
                 f"{n.unknown} of unknown NEFF state at the block's exit, counted as builds"
                 if n.unknown else ""]
        note = "; ".join(p for p in parts if p)
        return (f"{_count(n.builds, 'NEFF build')} > max_neff_builds={limit}"
                + (f" ({note})" if note else ""))

    @property
    def ok(self) -> bool:
        return not self.exceeded

    def over_budget_events(self) -> list[CompileEvent]:
        """The events counted against the limits exceeded, in order."""
        counts = self.counts()
        over = [name for name, limit in self.limits.items()
                if limit is not None and counts[name] > limit]
        return [e for e in self.events if any(_COUNTED[name](e) for name in over)]

    def report(self) -> str:
        """The verdict and, over budget, the table of the events counted against it."""
        from neuronkit.views.text import format_events

        exceeded = self.exceeded
        refused = _refused_graphs(self.events)
        counts = (f"{_count(self.graphs, 'graph')}, {_count(self.recompiles, 'recompile')}, "
                  + (f"{refused} refused at the recompile limit, " if refused else "")
                  + f"{self.compile_s:.2f} compile s in {_count(len(self.events), 'event')}")
        if self.limits["max_neff_builds"] is not None or neff_counts(self.events).with_neff:
            counts += f"; {self._neff_summary()}"
        if not exceeded:
            return f"compile budget met: {counts}"
        neff = self.limits["max_neff_builds"]
        builds = (f"\n\ncounted against max_neff_builds:\n{neff_lines(self.events)}"
                  if neff is not None and self.neff_builds > neff else "")
        return (f"compile budget exceeded: {'; '.join(exceeded)}\n({counts})\n\n"
                + format_events(self.over_budget_events()) + builds)

    def check(self) -> None:
        """Raise :class:`CompileBudgetExceeded` when the block's events are over budget."""
        exceeded = self.exceeded
        if exceeded:
            raise CompileBudgetExceeded(self.report(), exceeded, self.over_budget_events())

    # -- the block --------------------------------------------------------------------------
    def _recreate_cm(self) -> CompileBudget:
        """A fresh budget per decorated call (calls may nest or recurse)."""
        fresh = CompileBudget(recorder=self.recorder, log_path=self.log_path)
        fresh.limits = dict(self.limits)
        return fresh

    def __enter__(self) -> CompileBudget:
        if self._active is not None:
            raise RuntimeError("this compile budget is already in use; make one per block")
        if self.recorder is None:
            from neuronkit.recorder.recorder import CompileRecorder

            recorder = CompileRecorder(self.log_path)
        else:
            recorder = self.recorder
        self._started_here = not recorder.active
        self._start = len(recorder.events)
        recorder.start()
        self._active = recorder
        for code in codes_at_limit():  # run-only since a hit: torch records its next refusal
            compile_again(code)
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        recorder, self._active = self._active, None
        assert recorder is not None
        try:
            if self._started_here:
                recorder.stop()  # a safe point first
            elif exc is None and callable(getattr(recorder, "safe_point", None)):
                recorder.safe_point()  # NEFF build times and states resolved before they count
        finally:
            events = recorder.events[self._start:]
            self.log = (recorder.log if self.recorder is None
                        else CompileLog(events, header=recorder.log.header))
        if self.recorder is not None and self.log_path is not None:
            try:
                self.log.save(self.log_path)
                self.log.release()  # written: another writer may take the file
            except (OSError, LogPathInUseError) as error:  # never masks the block's own exception
                if exc is None:
                    raise
                exc.add_note(f"could not save the compile log to {self.log_path}: {error}")
        if exc is None:
            self.check()
        elif self.exceeded:
            exc.add_note(f"compile budget exceeded too: {'; '.join(self.exceeded)}")


def compile_budget(max_graphs: int | None = None, max_recompiles: int | None = None,
                   max_compile_s: float | None = None, *, max_graph_breaks: int | None = None,
                   max_failures: int | None = None, max_neff_builds: int | None = None,
                   recorder: CompileRecorder | None = None,
                   log_path: str | os.PathLike[str] | None = None) -> CompileBudget:
    """``with nk.compile_budget(max_graphs=2, max_recompiles=0):`` raises
    :class:`CompileBudgetExceeded` at exit when the block compiled more (also a decorator).

    A limit of None is not checked. ``max_neff_builds``: NEFFs neuronx-cc built on Neuron, of
    graphs and of eager-op kernels (loads from the NEFF cache are free; unknown states count as
    builds; 0 off Neuron). ``recorder``:
    count only the events it records inside the block (started and stopped here if it is not
    running), else a recorder of its own, writing ``log_path`` when given (with ``recorder``,
    the block's events are saved there at exit).
    """
    return CompileBudget(max_graphs, max_recompiles, max_compile_s,
                         max_graph_breaks=max_graph_breaks, max_failures=max_failures,
                         max_neff_builds=max_neff_builds, recorder=recorder, log_path=log_path)
