"""The lines torch writes that neuronkit reads: its structured-trace files (``TORCH_TRACE``) and
torchrun's output (which rank failed, with what). Messages inside them: ``torch_text.py``."""
from __future__ import annotations

import re

__all__ = ["failed_ranks", "rank_output", "ranks_that_printed", "trace_file_rank", "trace_record",
           "worker_lines"]


# -- torch's trace files (TORCH_TRACE) -----------------------------------------------------------
# glog's prefix: level + MMDD, time, thread id, source file:line] then the record's JSON
_GLOG = re.compile(r"^(?:\[rank\d+\]:)?[VIWEF]\d{4} \d\d:\d\d:\d\d\.\d+\s+\d+ [^\]]*\] (?P<record>\{.*)$")
_TRACE_RANK = re.compile(r"rank_(\d+)")


def trace_record(line: str) -> str | None:
    """The JSON of a trace file's record line (its glog prefix removed); None for another line."""
    match = _GLOG.match(line)
    return match["record"] if match else None


def trace_file_rank(name: str) -> int | None:
    """The rank a trace file's name gives (``dedicated_log_torch_trace_rank_1_x.log`` -> 1)."""
    match = _TRACE_RANK.search(name)
    return int(match[1]) if match else None


# -- torchrun's output -----------------------------------------------------------------------------
_AGENT_LOG = re.compile(r"^[IWE]\d{4} [\d:.]+ \d+ \S*torch/distributed/")
_FAILED_RANK = re.compile(r"rank\s*:\s*(\d+)\s*\(local_rank:\s*\d+\)\s*\n?"
                          r"\s*exitcode\s*:\s*(-?\d+)")
_RANK_PREFIX = re.compile(r"^\[rank(\d+)\]:")


def failed_ranks(text: str) -> tuple[list[tuple[int, int]], tuple[int, int] | None]:
    """From torchrun's failure summary: every ``(rank, exit code)`` it names, and the one under
    "Root Cause" (None when it names none)."""
    failed = sorted({(int(r), int(c)) for r, c in _FAILED_RANK.findall(text)})
    cut = text.rfind("Root Cause")
    match = _FAILED_RANK.search(text, cut) if cut >= 0 else None
    return failed, ((int(match.group(1)), int(match.group(2))) if match else None)


def ranks_that_printed(lines: list[str]) -> list[int]:
    """The ranks whose lines torchrun prefixed with ``[rankN]:``."""
    return sorted({int(m[1]) for ln in lines if (m := _RANK_PREFIX.match(ln))})


def rank_output(lines: list[str], rank: int) -> list[str]:
    """A rank's own lines, torchrun's ``[rankN]:`` prefix removed."""
    prefix = f"[rank{rank}]:"
    return [ln[len(prefix):].removeprefix(" ") for ln in lines if ln.startswith(prefix)]


def worker_lines(lines: list[str]) -> list[str]:
    """The ranks' own output: torchrun's log lines and its closing traceback and summary removed."""
    end = next((i for i, ln in enumerate(lines) if "ChildFailedError" in ln), len(lines))
    if end < len(lines):
        end = max((k for k in range(end) if lines[k].startswith("Traceback (most recent")),
                  default=end)
    return [ln for ln in lines[:end] if not _AGENT_LOG.match(ln)]
