"""One way to open a compile log from a path, used by every caller (CLI, dashboard, reports):
a JSONL log file, or a folder that is one run by the rule of ``runs.py`` (per-rank logs merged,
``neuronkit record``'s process logs, torch trace files, a folder holding one log)."""
from __future__ import annotations

import os
from pathlib import Path

from neuronkit.log.compile_log import CompileLog
from neuronkit.log.rank_logs import merge_logs
from neuronkit.log.runs import classify, folder_error

__all__ = ["open_log"]


def open_log(path: str | os.PathLike[str]) -> CompileLog:
    """The compile log at ``path``: a neuronkit JSONL log (``CompileLog.load``), a folder of
    per-rank logs ``*.rank<N>.jsonl`` (``merge_logs``; else ``neuronkit record``'s logs of
    unranked processes, ``*.pid<P>.jsonl``), a folder of torch's trace files written under
    ``TORCH_TRACE`` (``CompileLog.from_torch_trace``), or a folder holding one ``*.jsonl``. A folder
    of separate logs or of runs raises ``LogFolderError`` naming them (``runs.folder_error``)."""
    found = classify(path)
    if found.kind in ("missing", "file"):
        return CompileLog.load(Path(path))
    if found.kind == "trace":
        return CompileLog.from_torch_trace(found.path)
    if found.kind == "ranks":
        return merge_logs(found.files)
    if found.kind in ("processes", "single"):
        return (CompileLog.load(found.files[0]) if len(found.files) == 1
                else CompileLog.merge(CompileLog.load(p) for p in found.files))
    raise folder_error(found)
