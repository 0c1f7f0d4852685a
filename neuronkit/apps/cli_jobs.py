"""The command line's job commands: ``neuronkit record`` (record any command's Python processes,
unchanged) and ``neuronkit watch`` (follow a run folder live in the terminal); and which logs a
command reads (``log_paths``: no path is the latest run, ``log.runs.choose``)."""
from __future__ import annotations

import argparse
import glob
import sys
from pathlib import Path
from typing import Any, Sequence

from neuronkit.safe import terminal_safe

__all__ = ["add_job_commands", "log_paths"]


def cmd_record(args: argparse.Namespace) -> int:
    from neuronkit.apps.record import hook_path, install_hook, record, remove_hook

    if args.install_hook:
        path = install_hook()
        print(terminal_safe(f"neuronkit record: hook written to {path}: any Python process of this "
                            "environment started with NEURONKIT_RECORD=DIR now records into DIR "
                            "(neuronkit record --remove-hook takes it out)"))
        return 0
    if args.remove_hook:
        gone = remove_hook()
        print(terminal_safe(f"neuronkit record: {'removed' if gone else 'no hook at'} {hook_path()}"))
        return 0
    command = list(args.cmd)
    if command[:1] == ["--"]:
        command = command[1:]
    if not command:
        print("neuronkit record: error: give the command to run after --, e.g. "
              "neuronkit record -- torchrun --nproc_per_node=2 train.py", file=sys.stderr)
        return 2
    return record(command, args.log_dir, as_neuron=args.as_neuron)


def log_paths(args: Sequence[str], command: str = "report") -> list[Path]:
    """The logs named (a pattern the shell left unexpanded is expanded here), each once; a
    folder that is one run counts as one log (``open_log``), a folder of runs as its latest run,
    no path as the latest run here (``log.runs.choose``: it says which, on stderr)."""
    from neuronkit.log.runs import choose

    paths: list[Path] = []
    named: Sequence[str | None] = args or [None]
    for arg in named:
        if arg is None or Path(arg).is_dir():
            chosen = choose(arg, command=command)
            if chosen.note:
                print(terminal_safe(f"neuronkit {command}: {chosen.note}"), file=sys.stderr)
            paths.append(chosen.path)
            continue
        path = Path(arg)
        if not path.exists() and glob.has_magic(arg):
            matched = sorted(glob.glob(arg))
            if not matched:
                raise FileNotFoundError(f"no compile log matches {arg!r}")
            paths += map(Path, matched)
        else:
            paths.append(path)
    unique: dict[Path, Path] = {}
    for path in paths:
        unique.setdefault(path.resolve(), path)
    return list(unique.values())


def _seconds(text: str) -> float:
    """``--interval``: seconds > 0."""
    try:
        value = float(text)
    except ValueError:
        value = 0.0
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"expected a number of seconds > 0, got {text!r}")
    return value


def _count(text: str) -> int:
    """``--events``: a number >= 0."""
    if not text.strip().isdigit():
        raise argparse.ArgumentTypeError(f"expected a number of events >= 0, got {text!r}")
    return int(text)


def cmd_watch(args: argparse.Namespace) -> int:
    try:
        import rich.console  # noqa: F401
    except ImportError as exc:
        raise RuntimeError("neuronkit watch draws with rich, which is not installed here: "
                           "pip install rich") from exc
    from neuronkit.apps.watch import watch

    [path] = log_paths([args.dir] if args.dir is not None else [], "watch")
    return watch(path, interval=args.interval, once=args.once, events=args.events)


def add_job_commands(sub: Any) -> None:
    """Add ``record`` (and ``watch``) to the ``neuronkit`` parser's subcommands."""
    p = sub.add_parser(
        "record", help="run a command unchanged, recording the compiles of its Python processes",
        description="Run COMMAND unchanged; every Python process it starts (torchrun's and srun's "
                    "workers included) records its compiles into one log per process in "
                    "--log-dir, named by host and rank. The exit code is COMMAND's.")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="folder for the logs (default: neuronkit-logs/<date>-<time>)")
    p.add_argument("--install-hook", action="store_true",
                   help="write a .pth hook into this environment instead: then NEURONKIT_RECORD=DIR "
                        "alone records (for scripts you cannot wrap, e.g. under SLURM)")
    p.add_argument("--remove-hook", action="store_true", help="remove that .pth hook")
    p.add_argument("--as-neuron", action="store_true",
                   help="record with Neuron's compile rules on any device: static shapes, graphs "
                        "with symbolic shapes flagged, backward graphs traced, eager ops forecast "
                        "as Neuron kernels (a rehearsal: the counts are forecasts)")
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser(
        "watch", help="follow a run's compile logs live in the terminal",
        description="Show a run folder's compile logs live (neuronkit record --log-dir DIR): per "
                    "rank graphs, recompiles, compile seconds, time since its last event and "
                    "whether its log is open; the latest events with their reasons; the top "
                    "advice. Ends with the report of `neuronkit report DIR` once every log is "
                    "closed, or at Ctrl-C (exit 0). A log holds finished compiles only: what a "
                    "rank compiles now is not in it. With no DIR: the latest run under "
                    "./neuronkit-logs (or ./compile-log.jsonl, whichever is newer).")
    p.add_argument("dir", nargs="?", default=None, metavar="DIR",
                   help="the run's log folder, or one log file; a folder of runs "
                        "(neuronkit-logs) means its latest run; a folder of separate logs is "
                        "listed: name one (default: the latest run here)")
    p.add_argument("--interval", type=_seconds, default=1.0, metavar="S",
                   help="seconds between refreshes (default 1)")
    p.add_argument("--events", type=_count, default=10, metavar="N",
                   help="latest events shown (default 10)")
    p.add_argument("--once", action="store_true",
                   help="draw one frame and exit (for scripts and tests)")
    p.set_defaults(func=cmd_watch)
