"""The dashboard's runs: logs kept to look at and compare, uploaded logs, and file names.

A run is a named, finished :class:`~neuronkit.log.compile_log.CompileLog`: a snapshot of the session
("Keep run"), or a JSONL log uploaded in the browser (one per rank is fine: several uploads are
also offered merged). Uploads are untrusted input: read with the same schema checks as
``CompileLog.load``; what was skipped is said, never hidden.
"""
from __future__ import annotations

import base64
import dataclasses
import os
import tempfile
import threading
import time
import warnings
from pathlib import Path
from typing import Any, ContextManager, Iterable

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.events.schema import LogFormatError
from neuronkit.events.facts import function_labels
from neuronkit.sources.starts import CompileStart
from neuronkit.views.charts import dashboard_chart, save_png
from neuronkit.views.compare import Comparison, compare_logs
from neuronkit.views.safe import html_attr, html_text, strip_control
from neuronkit.log.open import open_log

__all__ = ["SessionRuns", "compiling_row", "export_target", "snapshot", "read_uploads",
           "download_link", "run_name"]

NAME_WIDTH = 60   # a run's name as shown (an upload's file name may be anything)
MAX_UPLOAD_BYTES = 512 << 20
TICK_S = 1.0      # the compiling-now clock's step


def export_target(path: str | os.PathLike[str], suffix: str, default_name: str) -> Path:
    """Where an export named ``path`` goes: ``suffix`` added unless the name already ends with
    it (``run.2024.01`` -> ``run.2024.01.jsonl``, never ``run.2024.jsonl``); a folder (an
    existing one, or a name ending in ``/``) gets ``default_name`` + ``suffix`` inside it."""
    text = os.fspath(path)
    target = Path(text).expanduser()
    if not text.strip():
        raise ValueError(f"an export needs a file name, such as {default_name}{suffix}")
    if text.endswith(("/", os.sep)) or target.is_dir():
        return target / f"{default_name}{suffix}"
    return target if target.name.endswith(suffix) else target.with_name(target.name + suffix)


def run_name(text: str, taken: Iterable[str]) -> str:
    """A clean one-line run name, unique among ``taken`` (``name (2)``, ``name (3)`` ...)."""
    name = " ".join(strip_control(text, keep_newlines=False).split()) or "run"
    if len(name) > NAME_WIDTH:
        name = name[:NAME_WIDTH - 1] + "…"
    taken = set(taken)
    unique, n = name, 2
    while unique in taken:
        unique, n = f"{name} ({n})", n + 1
    return unique


def snapshot(log: CompileLog) -> CompileLog:
    """A copy of ``log`` that later events and updates leave as it is."""
    copy = CompileLog([dataclasses.replace(e) for e in log.events], header=log.header)
    copy.wall_time_s = log.wall_time_s
    return copy


def read_uploads(files: Iterable[tuple[str, bytes]]) -> tuple[list[tuple[str, CompileLog]], list[str]]:
    """``(file name, content)`` pairs -> the logs read (in order) and one note per file that had
    bad lines or could not be read at all (the others are still read)."""
    logs: list[tuple[str, CompileLog]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="neuronkit-upload-") as folder:
        for i, (name, content) in enumerate(files):
            shown = run_name(Path(str(name)).name or f"upload {i + 1}", [])
            if len(content) > MAX_UPLOAD_BYTES:
                notes.append(f"{shown}: {len(content) >> 20} MB, more than the "
                             f"{MAX_UPLOAD_BYTES >> 20} MB an upload may hold; load it with "
                             "RecompileDashboard.from_log(path) instead")
                continue
            path = Path(folder) / f"upload-{i}.jsonl"
            path.write_bytes(bytes(content))
            with warnings.catch_warnings(record=True) as caught:
                warnings.simplefilter("always")
                try:
                    log = open_log(path)
                except (LogFormatError, OSError) as exc:
                    notes.append(f"{shown}: {str(exc).replace(str(path), 'the file')}")
                    continue
            notes += [f"{shown}: " + str(w.message).replace(f"{path}: ", "") for w in caught]
            log.path = None  # the temporary copy is gone: nothing to write back to
            logs.append((shown, log))
    return logs, notes


def compiling_row(start: CompileStart) -> dict[str, Any]:
    """What the dashboard shows of a compile in progress (plain values; the view escapes)."""
    shapes = ", ".join(f"{name}{list(dims)}" for name, dims in start.input_shapes.items())
    return {"function": start.function, "shapes": shapes or "shapes not traced yet",
            "started_at": start.started_at, "phase": start.phase, "id": start.id}


def download_link(label: str, file_name: str, data: bytes, mime: str) -> str:
    """An HTML link that saves ``data`` as ``file_name`` in the browser (works on Binder and in
    Voilà, where the server's disk is not the user's)."""
    href = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return (f'<a class="nk-download" download="{html_attr(file_name)}" href="{html_attr(href)}">'
            f"{html_text(label)}</a>")


class SessionRuns:
    """The dashboard state's runs and background work (mixed into ``DashboardState``, whose
    traits these methods set): keep, upload, show and compare runs; run an action in a worker
    thread so the notebook stays usable; stop it between batches."""

    _saved: dict[str, CompileLog]
    _stop: threading.Event
    _worker: threading.Thread | None
    _worker_lock: threading.Lock
    _compiling: dict[int, CompileStart]
    _ticker: threading.Thread | None
    _counted_log: CompileLog | None
    _counted: int
    _pairs: dict[tuple[str, str], int]
    export_path: str
    compiling: list[dict[str, Any]]
    tick: int
    run_names: list[str]
    shown_run: str
    stopping: bool
    busy: bool
    mode: str
    padding: str
    error: str

    # what DashboardState provides
    @property
    def session_log(self) -> CompileLog:
        raise NotImplementedError

    def run_log(self, name: str) -> CompileLog:
        raise NotImplementedError

    def refresh(self, advice: bool = True) -> None:
        raise NotImplementedError

    def fail(self, exc: BaseException) -> None:
        raise NotImplementedError

    def _say(self, text: str, kind: str = "info") -> None:
        raise NotImplementedError

    @property
    def log(self) -> CompileLog:
        raise NotImplementedError

    def _action(self, what: str, steps: int = 0) -> ContextManager[None]:
        raise NotImplementedError

    # -- runs --------------------------------------------------------------------------
    def keep_run(self, name: str | None = None) -> str:
        """Keep a copy of the session's log as a run (to show or compare later); its name."""
        log = self.session_log
        if not log.events:
            raise ValueError("nothing to keep yet: Generate or Sweep first, then keep the run")
        label = name or f"run {len(self._saved) + 1}: padding {self.padding}"
        kept = run_name(label, self._saved)
        self._saved[kept] = snapshot(log)
        self.run_names = [*self.run_names, kept]
        self._say(f"Kept {len(log.events)} events as {kept!r}: compare it with a later run",
                  "ok")
        return kept

    def open_uploads(self, files: Iterable[tuple[str, bytes]]) -> list[str]:
        """Read uploaded JSONL logs into runs (several: also merged, as for per-rank logs) and
        show the last one read; returns the names added. Bad lines are said in the status."""
        logs, notes = read_uploads(files)
        if not logs:
            raise ValueError("no log could be read: " + ("; ".join(notes) or "no file given"))
        added: list[str] = []
        for name, log in logs:
            added.append(run_name(name, [*self._saved, *added]))
            self._saved[added[-1]] = log
        if len(logs) > 1:
            added.append(run_name(f"{len(logs)} logs merged", [*self._saved, *added]))
            self._saved[added[-1]] = CompileLog.merge(log for _, log in logs)
        self.run_names = [*self.run_names, *added]
        self.shown_run = added[-1]
        self.refresh()
        events = len(self._saved[added[-1]].events)
        said = f"Showing {added[-1]!r}: {events} compile events"
        self._say(said + ("; " + "; ".join(notes) if notes else ""),
                  "info" if notes else "ok")
        return added

    def compare(self, a: str, b: str) -> Comparison:
        """Two runs side by side (names from ``run_names``; '' : the session's own log)."""
        label = {"": "this session" if self.mode == "live" else "the replayed log"}
        return compare_logs(self.run_log(a), self.run_log(b),
                            names=(label.get(a, a), label.get(b, b)))

    def show_run(self, name: str) -> None:
        """Show a kept or uploaded run ('' : the session's own log)."""
        log = self.run_log(name)  # an unknown name: a clear error
        self.shown_run = name
        self.refresh()
        own = "this session" if self.mode == "live" else "the replayed log"
        self._say(f"Showing {name or own!r}: {len(log.events)} compile events", "ok")

    # -- background work ---------------------------------------------------------------
    def start(self, action: str) -> threading.Thread:
        """Run ``action`` ('load', 'generate' or 'sweep') in a worker thread and return it; the
        state's traits tell how it goes, and an error lands in the status area."""
        if action not in ("load", "generate", "sweep"):
            raise ValueError(f"start() runs 'load', 'generate' or 'sweep', not {action!r}")
        method = getattr(self, action)
        with self._worker_lock:
            if self.busy or (self._worker is not None and self._worker.is_alive()):
                raise RuntimeError(f"cannot start {action!r}: the dashboard is still busy")

            def work() -> None:
                try:
                    method()
                except Exception as exc:  # shown in the status area (the widget draws it)
                    if not self.error:  # _action has shown its own error
                        self.fail(exc)

            self._stop.clear()
            self.stopping = False
            self._worker = threading.Thread(target=work, name=f"neuronkit-{action}", daemon=True)
            self._worker.start()
        return self._worker

    def wait(self, timeout: float | None = None) -> None:
        """Wait for the background action (if any) to end."""
        worker = self._worker
        if worker is not None:
            worker.join(timeout)

    # -- counts and exports ---------------------------------------------------------------
    def _graph_counts(self, log: CompileLog) -> dict[str, int]:
        """``log.graph_counts()``, counting only the events new since the last call (a live
        event costs one event's work, not the whole log's)."""
        if log is not self._counted_log or len(log.events) < self._counted:
            self._counted_log, self._counted, self._pairs = log, 0, {}
        pairs = self._pairs  # (function, location) -> graphs
        for e in log.events[self._counted:]:
            key = (e.function, e.location)
            pairs[key] = pairs.get(key, 0) + (e.kind in GRAPH_KINDS)
        self._counted = len(log.events)
        labels = function_labels(CompileEvent(function=f, location=loc) for f, loc in pairs)
        counts: dict[str, int] = {}
        for key, n in pairs.items():
            if n:
                counts[labels[key]] = counts.get(labels[key], 0) + n
        return counts

    def export_log(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the session log as JSONL (the suffix becomes .jsonl)."""
        with self._action("Saving the log"):
            target = export_target(path or self.export_path, ".jsonl", "compile-log")
            written = snapshot(self.log).save(target)  # the wall time too: the share needs it
            self._say(f"Saved {len(self.log.events)} events to {written.resolve()}", "ok")
        return written

    def export_png(self, path: str | os.PathLike[str] | None = None) -> Path:
        """Write the chart as PNG (the suffix becomes .png)."""
        with self._action("Saving the chart"):
            target = export_target(path or self.export_path, ".png", "compile-chart")
            target.parent.mkdir(parents=True, exist_ok=True)
            written = Path(save_png(dashboard_chart(self.log), target))
            self._say(f"Saved the chart to {written.resolve()}", "ok")
        return written

    # -- compiles in progress ------------------------------------------------------------
    def _on_start(self, start: CompileStart) -> None:
        """A compile started, learnt its shapes, or ended (runs in the compiling thread)."""
        try:
            if start.ended:
                self._compiling.pop(start.id, None)
            else:
                self._compiling[start.id] = start
            self.compiling = [compiling_row(s) for s in self._compiling.values()]
            if self.compiling and (self._ticker is None or not self._ticker.is_alive()):
                self._ticker = threading.Thread(target=self._tick_while_compiling,
                                                name="neuronkit-clock", daemon=True)
                self._ticker.start()
        except Exception as exc:  # a view must never break the workload that feeds it
            self.fail(exc)

    def _tick_while_compiling(self) -> None:
        while self.compiling:
            time.sleep(TICK_S)
            self.tick += 1

    def stop(self) -> None:
        """End the running action after its current batch (what was recorded stays)."""
        if self.busy or (self._worker is not None and self._worker.is_alive()):
            self.stopping = True
            self._stop.set()
