"""What a path given to read holds, by one rule that ``open_log``, ``nk.follow`` and every command
(``report``, ``watch``) share, and which run a command reads when given no path.

A folder is ONE run when it holds per-rank logs ``*.rank<N>.jsonl`` (``neuronkit record``'s
ranked processes, ``rank_log_path``), else ``neuronkit record``'s unranked process logs
``*.pid<P>.jsonl``, else torch's trace files ``*.log`` (``TORCH_TRACE=DIR``), else exactly one
``*.jsonl``. Several other ``*.jsonl`` (``neuronkit demo --log-dir``'s ``naive.jsonl`` and
``bucketed.jsonl``; ``pytest --neuronkit-log-dir``'s one log per test) are separate runs: never
merged as if they were ranks; the reader names one. A folder with no log of its own whose
subfolders are runs (``neuronkit-logs``, where ``neuronkit record`` puts ``<date>-<time>``) is a
folder of runs, newest first.
"""
from __future__ import annotations

import dataclasses
import os
import re
from pathlib import Path

from neuronkit.events.schema import LogFolderError
from neuronkit.sources.trace_import import trace_files

__all__ = ["DEFAULT_LOG", "RECORD_HINT", "RUNS_DIR", "Choice", "Found", "NoRunError", "choose",
           "classify", "describe", "folder_error"]

RUNS_DIR = "neuronkit-logs"          # neuronkit record's default: RUNS_DIR/<date>-<time>
DEFAULT_LOG = "compile-log.jsonl"    # README's CompileRecorder("compile-log.jsonl")
RECORD_HINT = "neuronkit record -- python your_script.py"
ONE_RUN = ("file", "ranks", "processes", "trace", "single")
_RANK = re.compile(r"\.rank\d+\.jsonl$")
_PID = re.compile(r"\.pid\d+\.jsonl$")
_RECORD_NAME = re.compile(r"^\d{8}-\d{6}(-\d+)?$")  # record.default_log_dir's <date>-<time>[-n]
_LISTED = 5                          # runs or logs named in a message; the rest are counted


class NoRunError(FileNotFoundError):
    """No path was given and there is no run here to take."""


@dataclasses.dataclass(frozen=True)
class Found:
    """What ``path`` holds. ``kind``: ``missing``; one run: ``file``, ``ranks``, ``processes``,
    ``trace``, ``single`` (``files`` are its logs); ``empty`` (a folder with no log yet);
    ``separate`` (several logs that are separate runs: ``files``); ``runs`` (a folder of runs:
    ``runs``, newest first)."""

    path: Path
    kind: str
    files: tuple[Path, ...] = ()
    runs: tuple[Path, ...] = ()

    @property
    def is_run(self) -> bool:
        return self.kind in ONE_RUN


def _logs(folder: Path) -> list[Path]:
    """The ``*.jsonl`` files of ``folder`` (not hidden ones), by name."""
    with os.scandir(folder) as entries:
        return sorted(Path(e.path) for e in entries if e.name.endswith(".jsonl")
                      and not e.name.startswith(".") and e.is_file())


def classify(path: str | os.PathLike[str], *, runs: bool = True) -> Found:
    """What ``path`` holds, by the rule above (``runs``: look for a folder of runs)."""
    path = Path(path)
    if not path.exists():
        return Found(path, "missing")
    if not path.is_dir():
        return Found(path, "file", (path,))
    logs = _logs(path)
    for kind, pattern in (("ranks", _RANK), ("processes", _PID)):
        mine = tuple(p for p in logs if pattern.search(p.name))
        if mine:
            return Found(path, kind, mine)
    if len(logs) > 1:
        return Found(path, "separate", tuple(logs))
    if logs:
        return Found(path, "single", tuple(logs))
    traces = trace_files(path)
    if traces:
        return Found(path, "trace", tuple(traces))
    inside = _runs_in(path) if runs else []
    return Found(path, "runs", runs=tuple(inside)) if inside else Found(path, "empty")


def _runs_in(folder: Path) -> list[Path]:
    """The subfolders of ``folder`` that are runs (or record's run folders with no log yet),
    newest first: by the last change of the folder or its logs."""
    found = []
    with os.scandir(folder) as entries:
        subs = [Path(e.path) for e in entries if e.is_dir() and not e.name.startswith(".")]
    for sub in subs:
        try:
            inner = classify(sub, runs=False)
        except OSError:
            continue
        if inner.is_run or (inner.kind == "empty" and _RECORD_NAME.match(sub.name)):
            found.append((_changed(sub, inner.files), sub.name, sub))
    return [sub for *_, sub in sorted(found, reverse=True)]


def _changed(path: Path, files: tuple[Path, ...] = ()) -> float:
    """When ``path`` or one of ``files`` last changed (0 when it cannot be read)."""
    times = []
    for p in (path, *files):
        try:
            times.append(p.stat().st_mtime)
        except OSError:
            pass
    return max(times, default=0.0)


def describe(path: Path) -> str:
    """A few words on what a run holds: ``2 rank logs``, ``no log yet`` ..."""
    found = classify(path, runs=False)
    n = len(found.files)
    what = {"ranks": "rank log", "processes": "process log", "trace": "trace file",
            "single": "log", "separate": "separate log", "file": "log"}.get(found.kind)
    return f"{n} {what}{'' if n == 1 else 's'}" if what else "no log yet"


def _listed(paths: tuple[Path, ...] | list[Path], *, detail: bool = False) -> str:
    shown = [f"{p}{f' ({describe(p)})' if detail else ''}" for p in paths[:_LISTED]]
    more = len(paths) - len(shown)
    return ", ".join(shown) + (f" and {more} more" if more > 0 else "")


def folder_error(found: Found) -> LogFolderError:
    """Why ``found`` (a folder) does not open as one run, and what to name instead."""
    path = found.path
    if found.kind == "separate":
        names = [p.name for p in found.files]
        shown = ", ".join(names[:_LISTED]) + (f" and {len(names) - _LISTED} more"
                                               if len(names) > _LISTED else "")
        return LogFolderError(
            f"{path} is a folder: name the compile logs in it. Its {len(names)} logs are separate "
            f"runs, not the logs of one run (per-rank *.rank<N>.jsonl, neuronkit record's "
            f"*.pid<P>.jsonl, torch trace files *.log), so they are not merged: {shown}. Name one, "
            f"e.g. {path / names[0]}")
    if found.kind == "runs":
        return LogFolderError(f"{path} is a folder of {len(found.runs)} runs, newest first: "
                              f"{_listed(found.runs, detail=True)}. Name one, e.g. "
                              f"{found.runs[0]}")
    return LogFolderError(f"{path} is a folder and it holds no compile log (no *.jsonl, no torch "
                          f"trace files *.log, no run folders): nothing compiled there yet, or "
                          f"no run writes there (record one: {RECORD_HINT})")


@dataclasses.dataclass(frozen=True)
class Choice:
    """The path a command reads, and a one-line note saying which one it took (or None)."""

    path: Path
    note: str | None = None


def choose(arg: str | os.PathLike[str] | None, *, cwd: str | os.PathLike[str] = ".",
           command: str = "report") -> Choice:
    """What ``neuronkit COMMAND [PATH]`` reads: PATH; the latest run when PATH is a folder of
    runs; with no PATH, the newest of the runs under ``./neuronkit-logs`` and
    ``./compile-log.jsonl``. Raises :class:`NoRunError` when there is none, saying what to run."""
    if arg is not None:
        found = classify(arg)
        if found.kind != "runs":
            return Choice(Path(arg))
        latest, others = found.runs[0], found.runs[1:]
        rest = f"; the others, newest first: {_listed(others, detail=True)}" if others else ""
        return Choice(latest, f"{arg} is a folder of {len(found.runs)} run(s): reading the latest, "
                              f"{latest} ({describe(latest)}){rest}")
    where = Path(cwd)
    runs = classify(where / RUNS_DIR).runs
    log = where / DEFAULT_LOG
    if not runs and not log.is_file():
        raise NoRunError(f"no run to read here: no runs in {where / RUNS_DIR} and no "
                         f"{log}. Record one first: {RECORD_HINT} (then neuronkit {command}), or "
                         f"name a log: neuronkit {command} LOG.jsonl")
    if log.is_file() and (not runs or _changed(log) >= _changed(runs[0], classify(runs[0]).files)):
        why = f"newer than the runs in {where / RUNS_DIR}" if runs else f"no runs in {RUNS_DIR}"
        return Choice(log, f"no path given: reading {log} ({why})")
    earlier = f"; {len(runs) - 1} earlier run(s) in {where / RUNS_DIR}" if len(runs) > 1 else ""
    return Choice(runs[0], f"no path given: reading the latest run, {runs[0]} "
                           f"({describe(runs[0])}){earlier}")
