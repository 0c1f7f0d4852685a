"""The ``neuronkit`` command line: doctor | demo | report LOG | cache [DIR]."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Sequence

__all__ = ["main"]


def cmd_doctor(args: argparse.Namespace) -> int:
    from ..doctor import doctor_report

    print(doctor_report(cache_dir=args.cache_dir))
    return 0


def cmd_cache(args: argparse.Namespace) -> int:
    from ..cache import inspect_cache, prune_cache

    if args.yes and not args.prune:
        raise ValueError("--yes confirms --prune; add --prune to remove leftovers")
    if not args.prune:
        report = inspect_cache(args.dir, layout=args.layout)
        print(report)
        return 0 if report.exists else 2  # a missing folder: nothing to inspect
    result = prune_cache(args.dir, layout=args.layout, dry_run=not args.yes)
    print(result)
    return 1 if result.failed else 0


def cmd_report(args: argparse.Namespace) -> int:
    from ..events import CompileLog
    from .text import format_report

    log = CompileLog.load(args.log)
    print(format_report(log))
    if args.png:
        from .charts import save_png, timeline

        print(f"chart written to {save_png(timeline(log), args.png)}")
    if args.chrome_trace:
        from .chrome_trace import write_chrome_trace

        print(f"Chrome trace written to {write_chrome_trace(log, args.chrome_trace)} "
              "(open it in https://ui.perfetto.dev or chrome://tracing)")
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from ..examples.demo import run_demo

    return run_demo(model=args.model, requests=args.requests, max_new_tokens=args.max_new_tokens,
                    backend=args.backend, log_dir=args.log_dir)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronkit",
        description="See, explain and stop recompiles of Hugging Face models on AWS Trainium.")
    from .._version import __version__

    parser.add_argument("--version", action="version", version=f"neuronkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("doctor", help="versions, devices, compile backend, cache, known traps")
    p.add_argument("--cache-dir", default=None, help="Neuron compile cache folder to summarise")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("demo", help="generate naive vs bucketed on a model and report the compiles")
    p.add_argument("--model", default=None,
                   help="model name or folder (default: the embedded tiny Qwen3)")
    p.add_argument("--requests", type=int, default=12, help="number of prompts of mixed lengths")
    p.add_argument("--max-new-tokens", type=int, default=8)
    p.add_argument("--backend", default=None,
                   help="compile backend off Neuron (default: $NEURONKIT_CPU_BACKEND or eager)")
    p.add_argument("--log-dir", default=None, help="where to write the compile logs (JSONL)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser("report", help="print the events, summary and advice of a compile log")
    p.add_argument("log", type=Path, help="a compile log (JSONL) written by neuronkit")
    p.add_argument("--png", type=Path, default=None, help="also save the timeline chart here")
    p.add_argument("--chrome-trace", type=Path, default=None,
                   help="also write a Chrome/Perfetto trace here")
    p.set_defaults(func=cmd_report)

    p = sub.add_parser("cache", help="summarise a Neuron compile cache folder; --prune cleans it")
    p.add_argument("dir", nargs="?", default=None,
                   help="cache folder (default: native $TORCH_NEURONX_NEFF_CACHE_DIR or "
                        "/tmp/neff_cache; legacy from NEURON_CC_FLAGS or "
                        "/var/tmp/neuron-compile-cache)")
    p.add_argument("--layout", choices=("native", "legacy"), default=None,
                   help="read the folder as this layout (default: detected from the folder "
                        "and the installed torch-neuronx)")
    p.add_argument("--prune", action="store_true",
                   help="native layout: list the temp leftovers, zero-size NEFFs and stale "
                        "locks to remove (a dry run; nothing is removed without --yes)")
    p.add_argument("--yes", action="store_true", help="with --prune: really remove them")
    p.set_defaults(func=cmd_cache)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.func(args) or 0)
    except (FileNotFoundError, ValueError, RuntimeError) as exc:
        print(f"neuronkit {args.command}: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
