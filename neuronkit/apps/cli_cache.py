"""``neuronkit cache [DIR]``: summarise a Neuron compile cache folder; ``--prune`` cleans it.
``neuronkit cache check [RUN] [--cache DIR]``: will a recorded run's graphs load from a cache."""
from __future__ import annotations

import argparse
import json
import sys
from typing import Any, Sequence

from neuronkit.apps.cli_common import EXIT_ERROR, print_out
from neuronkit.safe import terminal_safe

__all__ = ["add_cache_command", "cache_check_argv", "cmd_cache", "cmd_cache_check"]

CHECK_EPILOG = """\
exit codes:
  0  every graph the run compiled will load from the cache (graphs that cannot be told aside)
  1  some graph will build: its key is not in the cache, or inductor never caches it
  2  nothing to judge (no cache lookup recorded: record with backend inductor, or on Neuron,
     with this neuronkit), a missing or unreadable log, or a --cache folder that does not exist

Graphs count once per distinct cache key: ranks that share a key count once. The deciding key is
the FX graph cache's (an AOTAutograd hit needs that entry too) or the NEFF's persistent key.
--json prints one object: format ("neuronkit-cache-check"), version, logs, caches [{family, dir,
source, exists}], ranks, compiles, counts {graphs, judged, load, build, never, unknown},
exit_code, notes, graphs [{verdict, function, location, kind, backend, input_shapes, ranks,
events, cache, key, path, reason}].
"""


def cache_check_argv(argv: Sequence[str]) -> list[str]:
    """``neuronkit cache check RUN ...`` is the ``cache-check`` command (``cache`` itself takes an
    optional folder: a folder named ``check`` is ``./check``)."""
    argv = list(argv)
    if argv[:2] == ["cache", "check"]:
        return ["cache-check", *argv[2:]]
    return argv


def cmd_cache(args: argparse.Namespace) -> int:
    from neuronkit.setup.cache import inspect_cache, prune_cache

    if args.yes and not args.prune:
        raise ValueError("--yes confirms --prune; add --prune to remove leftovers")
    report = inspect_cache(args.dir, layout=args.layout)
    if not args.prune or (not report.exists and args.dir is None):
        print(terminal_safe(report))  # no default folder yet: no error; a named one: a typo
        return 0 if report.exists or args.dir is None else EXIT_ERROR
    result = prune_cache(args.dir, layout=args.layout, dry_run=not args.yes)
    print(terminal_safe(result))
    return 1 if result.failed else 0


def cmd_cache_check(args: argparse.Namespace) -> int:
    from neuronkit.advice.cache_check import check_cache
    from neuronkit.apps.cli_jobs import log_paths
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.log.open import open_log

    paths = log_paths([args.run] if args.run else [], command="cache check")
    logs = [open_log(p) for p in paths]
    log = logs[0] if len(logs) == 1 else CompileLog.merge(logs)
    try:
        check = check_cache(log, cache_dir=args.cache)
    except OSError as exc:  # --cache DIR missing or not a folder: a plain message
        print(terminal_safe(f"neuronkit cache check: error: {exc}"), file=sys.stderr)
        return EXIT_ERROR
    if args.json:
        data = check.to_dict()
        data["logs"] = [str(p) for p in paths]
        print_out(json.dumps(data, indent=2, ensure_ascii=True, default=str))
    else:
        print_out(check.text())
    return check.exit_code


def add_cache_command(sub: Any) -> None:
    p = sub.add_parser("cache", help="summarise a Neuron compile cache folder; --prune cleans it",
                       epilog="A default folder not made yet (nothing compiled for Neuron here) is "
                              "said, exit 0; a DIR named that does not exist is exit 2.")
    p.add_argument("dir", nargs="?", default=None,
                   help="cache folder (default: native $TORCH_NEURONX_NEFF_CACHE_DIR or "
                        "/tmp/neff_cache; legacy from NEURON_CC_FLAGS or "
                        "/var/tmp/neuron-compile-cache)")
    p.add_argument("--layout", choices=("native", "legacy"), default=None,
                   help="read the folder as this layout (default: detected from the folder "
                        "and the installed torch-neuronx)")
    p.add_argument("--prune", action="store_true",
                   help="native layout: list the temp leftovers, zero-size NEFFs and old "
                        "lock files no process holds, to remove (a dry run; nothing is removed "
                        "without --yes)")
    p.add_argument("--yes", action="store_true", help="with --prune: really remove them")
    p.set_defaults(func=cmd_cache)

    c = sub.add_parser("cache-check", prog="neuronkit cache check",
                       formatter_class=argparse.RawDescriptionHelpFormatter,
                       help="will a recorded run start warm: is each graph's cache key in this "
                            "cache now (also: neuronkit cache check)",
                       epilog=CHECK_EPILOG)
    c.add_argument("run", nargs="?", default=None,
                   help="a compile log or run folder (default: the latest run here)")
    c.add_argument("--cache", default=None, metavar="DIR",
                   help="the cache folder the new run will use (default: inductor's "
                        "$TORCHINDUCTOR_CACHE_DIR or <tmp>/torchinductor_<user>; the NEFF cache's "
                        "$TORCH_NEURONX_NEFF_CACHE_DIR or /tmp/neff_cache)")
    c.add_argument("--json", action="store_true", help="print one JSON object (see below)")
    c.set_defaults(func=cmd_cache_check)
