"""One compile log per rank: the file names (``<base>.rank<N>.jsonl``), finding them in a folder,
and merging them into one log whose events all carry their rank."""
from __future__ import annotations

import dataclasses
import os
import re
from collections.abc import Iterable
from pathlib import Path

from neuronkit.log.clock import host_of, host_offsets, shifted
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.shared_cache import mark_waits
from neuronkit.setup.process import default_rank

__all__ = ["find_rank_logs", "merge_logs", "rank_log_path"]

_RANK_IN_NAME = re.compile(r"\.rank(\d+)\.jsonl$")


def rank_log_path(base: str | os.PathLike[str], rank: int | None = None) -> Path:
    """``logs/c.jsonl`` -> ``logs/c.rank1.jsonl``; a folder -> ``<folder>/compile.rank1.jsonl``.

    ``rank`` defaults to this process's rank ($RANK, else torch.distributed, else 0).
    """
    rank = default_rank() if rank is None else rank
    if isinstance(rank, bool) or not isinstance(rank, int) or rank < 0:
        raise ValueError(f"rank must be a non-negative int, got {rank!r}")
    base = Path(base)
    if base.is_dir() or str(base).endswith(("/", os.sep)) or not base.name:
        return base / f"compile.rank{rank}.jsonl"
    name = re.sub(r"\.rank\d+$", "", base.name.removesuffix(".jsonl"))
    return base.with_name(f"{name}.rank{rank}.jsonl")


def find_rank_logs(folder: str | os.PathLike[str], newer_than: float | None = None) -> list[Path]:
    """The ``*.rank<N>.jsonl`` files in ``folder``, by rank (optionally only recently written)."""
    folder = Path(folder)
    if not folder.is_dir():
        return []
    found = [p for p in folder.glob("*.rank*.jsonl") if _RANK_IN_NAME.search(p.name)
             and (newer_than is None or p.stat().st_mtime >= newer_than)]
    return sorted(found, key=_by_rank)


def _by_rank(path: Path) -> tuple[int, str]:
    """Sort key of a ``*.rank<N>.jsonl`` path: (N, name)."""
    match = _RANK_IN_NAME.search(path.name)
    assert match is not None  # find_rank_logs keeps only names that match
    return int(match.group(1)), path.name


def merge_logs(paths: Iterable[str | os.PathLike[str] | CompileLog] | str | os.PathLike[str]
               ) -> CompileLog:
    """One log from the per-rank logs (paths, loaded logs, or a folder holding ``*.rank<N>.jsonl``).

    Every event carries its rank: a file's rank comes from its header, else its name, and is
    stamped on its events. The merged header lists all ranks, including ranks with no events.
    Logs of several hosts with clock lines (``neuronkit record``) are aligned on them; the
    header then says by how much (``clock_offsets``), and names the ranks whose log was never
    closed (``unclosed_ranks``: still running, or killed). A disk hit that waited for another
    rank's build of the same NEFF (the ranks of one host share its cache lock) names that build
    in ``metrics["neff_waited_for"]`` (``shared_cache.py``).
    """
    if isinstance(paths, (str, os.PathLike)):
        folder = Path(paths)
        if not folder.is_dir():
            raise ValueError(f"merge_logs takes a list of per-rank logs or a folder of them; "
                             f"{folder} is not a folder")
        paths = find_rank_logs(folder)
        if not paths:
            raise ValueError(f"no *.rank<N>.jsonl logs in {folder}")
    logs: list[CompileLog] = []
    owner: dict[int, str] = {}
    unclosed: list[int] = []
    hosts: dict[int, str] = {}
    path: Path | None
    for item in paths:
        if isinstance(item, CompileLog):
            path, log = None, item
        else:
            path = Path(item)
            log = CompileLog.load(path)
        where = str(path or log.path or f"log #{len(logs)}")
        file_rank = _rank_of(log, path or log.path)
        if file_rank is not None:
            if file_rank in owner:
                raise ValueError(f"two logs for rank {file_rank}: {owner[file_rank]} and {where}")
            owner[file_rank] = where
            if any(e.rank != file_rank for e in log.events):
                log = _copy(log, [dataclasses.replace(e, rank=file_rank) for e in log.events])
        host = host_of(log.header, log.clock)
        if file_rank is not None and host is not None:
            hosts[file_rank] = host
        if log.closed is False:
            unclosed.append(file_rank if file_rank is not None else 0)
        logs.append(log)
    if not logs:
        raise ValueError("merge_logs got no logs")
    offsets = host_offsets([(log.header, log.clock, _rank_of(log, log.path) or 0) for log in logs])
    logs = [_copy(log, shifted(log.events, offsets.get(host_of(log.header, log.clock) or "", 0.0)))
            for log in logs]
    merged = CompileLog.merge(logs)
    mark_waits(merged.events, hosts)
    if any(offsets.values()):
        merged.header["clock_offsets"] = {h: s for h, s in offsets.items() if s}
    if unclosed:
        merged.header["unclosed_ranks"] = sorted(unclosed)
    merged.header["ranks"] = sorted(set(merged.header.get("ranks", [])) | set(owner))
    merged.header.pop("rank", None)
    merged.header["sources"] = [owner[r] for r in sorted(owner)]
    return merged


def _copy(log: CompileLog, events: list) -> CompileLog:
    """``log`` with other events (header, wall time, clock and closed state kept)."""
    if events is log.events:
        return log
    copy = CompileLog(events, header=log.header)
    copy.path, copy.wall_time_s, copy.clock, copy.closed = (log.path, log.wall_time_s, log.clock,
                                                           log.closed)
    copy.key_parts = log.key_parts
    return copy


def _rank_of(log: CompileLog, path: Path | None) -> int | None:
    value = log.header.get("rank")
    if isinstance(value, int) and not isinstance(value, bool):
        return value
    match = _RANK_IN_NAME.search(path.name) if path is not None else None
    return int(match.group(1)) if match else None
