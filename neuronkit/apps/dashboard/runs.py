"""The dashboard's runs: logs kept to look at and compare, uploaded logs, and their names.

A run is a named, finished :class:`~neuronkit.log.compile_log.CompileLog`: a snapshot of the session
("Keep run"), or a JSONL log uploaded in the browser (one per rank is fine: several uploads are
also offered merged). Uploads are untrusted input: read with the same schema checks as
``CompileLog.load``; what was skipped is said, never hidden.
"""
from __future__ import annotations

import dataclasses
import tempfile
import warnings
from pathlib import Path
from typing import Callable, Iterable

from traitlets import HasTraits, List, Unicode

from neuronkit.events.schema import LogFormatError
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log
from neuronkit.safe import strip_control
from neuronkit.views.compare import Comparison, compare_logs

__all__ = ["Runs", "run_name", "snapshot", "read_uploads", "NAME_WIDTH", "MAX_UPLOAD_BYTES"]

NAME_WIDTH = 60   # a run's name as shown (an upload's file name may be anything)
MAX_UPLOAD_BYTES = 512 << 20


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


class Runs(HasTraits):
    """The runs kept or uploaded, and which log the views show: a run, or (``''``) the
    session's own log, which ``own_log()`` gives and ``own_name`` names."""

    run_names: List[str] = List(help="runs kept or uploaded, to show or compare")
    shown_run = Unicode("", help="the run the views show; '' is this session's own log")

    def __init__(self, own_log: Callable[[], CompileLog], own_name: str) -> None:
        super().__init__()
        self.own_log = own_log
        self.own_name = own_name
        self._saved: dict[str, CompileLog] = {}

    @property
    def shown(self) -> CompileLog:
        """What the views show: the run picked in ``shown_run``, else the session's log."""
        return self._saved.get(self.shown_run) or self.own_log()

    def log(self, name: str) -> CompileLog:
        """A kept or uploaded run by name ('' : the session's own log)."""
        if not name:
            return self.own_log()
        if name not in self._saved:
            raise KeyError(f"no run named {name!r}; runs: {', '.join(self.run_names) or 'none'}")
        return self._saved[name]

    def keep(self, label: str) -> str:
        """Keep a copy of the session's log as a run named after ``label``; its name."""
        log = self.own_log()
        if not log.events:
            raise ValueError("nothing to keep yet: Generate or Sweep first, then keep the run")
        kept = run_name(label, self._saved)
        self._saved[kept] = snapshot(log)
        self.run_names = [*self.run_names, kept]
        return kept

    def add(self, logs: list[tuple[str, CompileLog]]) -> list[str]:
        """Add named logs as runs (several: also merged, as for per-rank logs) and show the last
        one; returns the names added."""
        added: list[str] = []
        for name, log in logs:
            added.append(run_name(name, [*self._saved, *added]))
            self._saved[added[-1]] = log
        if len(logs) > 1:
            added.append(run_name(f"{len(logs)} logs merged", [*self._saved, *added]))
            self._saved[added[-1]] = CompileLog.merge(log for _, log in logs)
        self.run_names = [*self.run_names, *added]
        self.shown_run = added[-1]
        return added

    def show(self, name: str) -> CompileLog:
        """Show a kept or uploaded run ('' : the session's own log); its log."""
        log = self.log(name)  # an unknown name: a clear error
        self.shown_run = name
        return log

    def compare(self, a: str, b: str) -> Comparison:
        """Two runs side by side (names from ``run_names``; '' : the session's own log)."""
        label = {"": self.own_name}
        return compare_logs(self.log(a), self.log(b), names=(label.get(a, a), label.get(b, b)))
