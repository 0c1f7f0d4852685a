"""The command line's job commands: ``neuronkit record`` (record any command's Python processes,
unchanged) and ``neuronkit watch`` (follow a run folder live in the terminal)."""
from __future__ import annotations

import argparse
import sys
from typing import Any

from neuronkit.safe import terminal_safe

__all__ = ["add_job_commands"]


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
    return record(command, args.log_dir)


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

    return watch(args.dir, interval=args.interval, once=args.once, events=args.events)


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
    p.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- COMMAND ...")
    p.set_defaults(func=cmd_record)

    p = sub.add_parser(
        "watch", help="follow a run's compile logs live in the terminal",
        description="Show a run folder's compile logs live (neuronkit record --log-dir DIR): per "
                    "rank graphs, recompiles, compile seconds, time since its last event and "
                    "whether its log is open; the latest events with their reasons; the top "
                    "advice. Ends with the report of `neuronkit report DIR` once every log is "
                    "closed, or at Ctrl-C (exit 0). A log holds finished compiles only: what a "
                    "rank compiles now is not in it.")
    p.add_argument("dir", metavar="DIR", help="the run's log folder (or one log file)")
    p.add_argument("--interval", type=_seconds, default=1.0, metavar="S",
                   help="seconds between refreshes (default 1)")
    p.add_argument("--events", type=_count, default=10, metavar="N",
                   help="latest events shown (default 10)")
    p.add_argument("--once", action="store_true",
                   help="draw one frame and exit (for scripts and tests)")
    p.set_defaults(func=cmd_watch)
