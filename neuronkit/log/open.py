"""One way to open a compile log from a path, used by every caller (CLI, dashboard, reports):
a JSONL log file, a folder of per-rank logs (merged), or a folder of torch trace files."""
from __future__ import annotations

import os
from pathlib import Path

from neuronkit.events.schema import LogFolderError
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.rank_logs import find_rank_logs, merge_logs
from neuronkit.sources.trace_import import is_trace_folder

__all__ = ["open_log"]


def open_log(path: str | os.PathLike[str]) -> CompileLog:
    """The compile log at ``path``: a neuronkit JSONL log (``CompileLog.load``), a folder of
    per-rank logs ``*.rank<N>.jsonl`` (``merge_logs``; else ``neuronkit record``'s logs of
    unranked processes, ``*.pid<P>.jsonl``), or a folder of torch's trace files written under
    ``TORCH_TRACE`` (``CompileLog.from_torch_trace``)."""
    path = Path(path)
    if not path.is_dir():
        return CompileLog.load(path)
    if is_trace_folder(path):
        return CompileLog.from_torch_trace(path)
    rank_logs = find_rank_logs(path)
    if rank_logs:
        return merge_logs(rank_logs)
    unranked = sorted(path.glob("*.pid*.jsonl"))  # neuronkit record's processes no launcher ranked
    if unranked:
        return (CompileLog.load(unranked[0]) if len(unranked) == 1
                else CompileLog.merge(CompileLog.load(p) for p in unranked))
    others = sorted(p.name for p in path.glob("*.jsonl"))
    held = (f"; it holds {', '.join(others[:3])}{' …' if len(others) > 3 else ''}" if others
            else "; it holds no compile log")
    raise LogFolderError(f"{path} is a folder: name the compile logs in it (a folder opens as one "
                         f"log when it holds per-rank logs *.rank<N>.jsonl or torch trace files "
                         f"*.log){held}")
