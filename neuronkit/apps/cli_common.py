"""What the command line's commands share: printing to a reader that may go away, writing an
output file with a plain error, output paths beside the logs read, and argument types."""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Callable, TextIO

from neuronkit.safe import terminal_safe

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "cannot_write", "int_list", "output_path",
           "positive_int", "print_out", "stdout_gone", "write_output"]

EXIT_OK = 0
EXIT_ERROR = 2  # a missing or unreadable log, a file that cannot be written, a bad argument
EXIT_FINDINGS = 3  # report --fail-on: a finding at or above that severity


def stdout_gone() -> None:
    """The reader of stdout went away (``neuronkit report LOG | head -1``): what is left to print
    goes to devnull, as Python's docs recommend (``signal``: "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def print_out(text: str) -> None:
    """Print to stdout; a reader gone ends the printing, not the command."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        stdout_gone()


def cannot_write(what: str, path: object, exc: BaseException) -> ValueError:
    why = getattr(exc, "strerror", None) or exc
    return ValueError(f"cannot write the {what} to {path}: {why}; name a file (or a folder) you "
                      "can write to")


def output_path(arg: str | None, logs: list[Path], suffix: str) -> Path | None:
    """Where to write: ``arg``, or inside it when it is a folder (or ends with a slash):
    ``<log stem><suffix>`` (``<first log stem>-merged<suffix>`` for several logs)."""
    if arg is None:
        return None
    path = Path(arg)
    if arg.endswith(("/", os.sep)) or path.is_dir():
        path = path / (logs[0].stem + ("-merged" if len(logs) > 1 else "") + suffix)
    if path.resolve() in {p.resolve() for p in logs}:
        raise ValueError(f"{path} is a compile log given to read: name another file to write")
    return path


def write_output(what: str, path: Path, write: Callable[[], Path], to: TextIO, note: str = "") -> None:
    try:
        written = write()
    except OSError as exc:
        raise cannot_write(what, path, exc) from exc
    print(terminal_safe(f"{what} written to {written}{note}"), file=to)


def int_list(text: str) -> list[int]:
    """``--buckets`` / ``--batch-sizes``: comma-separated positive ints, e.g. 64,128,256."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive ints such as "
                                         f"64,128,256, got {text!r}")
    return values


def positive_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return value
