"""The ``neuronkit`` command line: doctor | demo | report LOG... | cache [DIR] | warmup MODEL."""
from __future__ import annotations

import argparse
import json
import os
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from neuronkit.apps.cli_jobs import add_job_commands, log_paths
from neuronkit.safe import terminal_safe

if TYPE_CHECKING:
    from neuronkit.log.compile_log import CompileLog

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "main"]

EXIT_OK = 0
EXIT_ERROR = 2  # a missing or unreadable log, a file that cannot be written, a bad argument
EXIT_FINDINGS = 3  # report --fail-on: a finding at or above that severity
EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  done (report: printed, no finding at or above --fail-on; output cut short by its
     reader, as in `neuronkit report LOG | head -1`, is not an error)
  1  cache --prune: some leftovers could not be removed
  {EXIT_ERROR}  error: a missing or unreadable log or folder, an output that cannot be written,
     a bad argument
  {EXIT_FINDINGS}  report --fail-on SEVERITY: a finding at or above SEVERITY (the report is printed)
"""


DEFAULT_LIMIT = 50  # = neuronkit.views.text.DEFAULT_LIMIT (not imported: keeps --help light)
REPORT_EPILOG = """\
--json prints one object: format ("neuronkit-report"), version, logs, device, backend, ranks,
wall_time_s, compile_s, neff_s, share_of_wall, counts {events, shown, not_shown, graphs, kinds,
advice}, worst_severity, summary [per-function rows], advice [{severity, title, detail, fix,
numbers}], events [the shown events: CompileEvent fields plus t_s and label]. Text from the log
is printed without control characters or escape sequences; JSON escapes it (ASCII only).

"""


def _stdout_gone() -> None:
    """The reader of stdout went away (``neuronkit report LOG | head -1``): what is left to print
    goes to devnull, as Python's docs recommend (``signal``: "Note on SIGPIPE")."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, sys.stdout.fileno())
    os.close(devnull)


def _print(text: str) -> None:
    """Print to stdout; a reader gone ends the printing, not the command."""
    try:
        print(text)
        sys.stdout.flush()
    except BrokenPipeError:
        _stdout_gone()


def _cannot_write(what: str, path: object, exc: BaseException) -> ValueError:
    why = getattr(exc, "strerror", None) or exc
    return ValueError(f"cannot write the {what} to {path}: {why}; name a file (or a folder) you "
                      "can write to")


def cmd_doctor(args: argparse.Namespace) -> int:
    from neuronkit.setup.doctor import doctor_report

    print(doctor_report(cache_dir=args.cache_dir))
    return 0


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


def _limit(text: str) -> int | None:
    """``--limit``: an int >= 0, or "all"."""
    if text.strip().lower() == "all":
        return None
    try:
        value = int(text)
    except ValueError:
        value = -1
    if value < 0:
        raise argparse.ArgumentTypeError(f"expected a number of events >= 0 or 'all', got {text!r}")
    return value


def _load(paths: list[Path]) -> "CompileLog":
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.log.open import open_log

    logs = [open_log(p) for p in paths]
    if len(logs) == 1:
        return logs[0]
    seen: dict[Any, Path] = {}
    for path, log in zip(paths, logs, strict=True):
        for rank in sorted({e.rank for e in log.events}, key=str):
            if rank in seen:
                print(terminal_safe(f"neuronkit report: note: {seen[rank]} and {path} both hold "
                                    f"rank {rank}: their events count as one rank"),
                      file=sys.stderr)
            seen.setdefault(rank, path)
    return CompileLog.merge(logs)


def _output(arg: str | None, logs: list[Path], suffix: str) -> Path | None:
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


def _write(what: str, path: Path, write: Callable[[], Path], to: TextIO, note: str = "") -> None:
    try:
        written = write()
    except OSError as exc:
        raise _cannot_write(what, path, exc) from exc
    print(terminal_safe(f"{what} written to {written}{note}"), file=to)


def cmd_report(args: argparse.Namespace) -> int:
    from neuronkit.advice.diagnose import diagnose
    from neuronkit.advice.finding import SEVERITIES
    from neuronkit.views.report_json import report_data
    from neuronkit.views.text import format_report
    from neuronkit.views.text_layout import terminal_width

    paths = log_paths(args.logs)
    png = _output(args.png, paths, ".timeline.png")
    trace = _output(args.chrome_trace, paths, ".trace.json")
    log = _load(paths)
    advice, summary = diagnose(log), log.summary()
    if args.json:
        data = report_data(log, limit=args.limit, advice=advice, summary=summary)
        data["logs"] = [str(p) for p in paths]
        _print(json.dumps(data, indent=2, ensure_ascii=True, default=str))
    else:
        _print(format_report(log, limit=args.limit, advice=advice, summary=summary,
                             width=terminal_width()))
    notes = sys.stderr if args.json else sys.stdout  # JSON on stdout stays parseable
    if png is not None:
        from neuronkit.views.charts import save_png, timeline

        _write("chart", png, lambda: save_png(timeline(log), png), notes)
    if trace is not None:
        from neuronkit.views.chrome_trace import write_chrome_trace

        _write("Chrome trace", trace, lambda: write_chrome_trace(log, trace), notes,
               " (open it in https://ui.perfetto.dev or chrome://tracing)")
    if args.fail_on:
        worst = SEVERITIES[: SEVERITIES.index(args.fail_on) + 1]
        failing = [a for a in advice if a.severity in worst]
        if failing:
            print(f"neuronkit report: {len(failing)} finding(s) at or above {args.fail_on} "
                  f"(--fail-on {args.fail_on}): exit {EXIT_FINDINGS}", file=sys.stderr)
            return EXIT_FINDINGS
    return 0


def cmd_demo(args: argparse.Namespace) -> int:
    from neuronkit.examples.demo import run_demo

    return run_demo(model=args.model, requests=args.requests, max_new_tokens=args.max_new_tokens,
                    backend=args.backend, log_dir=args.log_dir)


def _int_list(text: str) -> list[int]:
    """``--buckets`` / ``--batch-sizes``: comma-separated positive ints, e.g. 64,128,256."""
    try:
        values = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        values = []
    if not values or any(v <= 0 for v in values):
        raise argparse.ArgumentTypeError(f"expected comma-separated positive ints such as "
                                         f"64,128,256, got {text!r}")
    return values


def _positive(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value <= 0:
        raise argparse.ArgumentTypeError(f"expected a positive int, got {text!r}")
    return value


def cmd_warmup(args: argparse.Namespace) -> int:
    from statistics import fmean

    from tqdm import tqdm

    from neuronkit.recorder.recorder import CompileRecorder
    from neuronkit.setup.models import load_model, load_tokenizer
    from neuronkit.workloads.warm_up import WarmupStep, warmup

    for option, path in (("--manifest", args.manifest), ("--log", args.log)):
        if path is not None and Path(path).is_dir():
            raise ValueError(f"{option} {path} is a folder: name a file in it")
        if path is not None and Path(path).exists() and not Path(path).is_file():
            raise ValueError(f"{option} {path} is not a file (a device or a pipe): name a file")
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    tokenizer = load_tokenizer(args.model)
    try:
        rec = CompileRecorder(log_path=args.log, device=str(model.device), context="warmup")
    except OSError as exc:
        raise _cannot_write("compile log", args.log, exc) from exc
    if rec.write_errors:  # the header: said before compiling anything
        raise _cannot_write("compile log", args.log, rec.write_errors[0])
    total = len(set(args.buckets)) * len(set(args.batch_sizes))
    bar = tqdm(total=total, unit="graph", desc="warm-up", file=sys.stderr)
    costs: list[float] = []

    def step(progress: WarmupStep) -> None:
        graph = progress.graph
        costs.append(float(graph["wall_s"]))
        left = fmean(costs) * (progress.total - progress.done)
        bar.set_postfix_str(f"batch {graph['batch_size']}, bucket {graph['bucket']}: "
                            f"{graph['compile_s']:.1f} s compile, ETA {left:.0f} s")
        bar.update(1)

    with rec:
        try:
            manifest = warmup(model, tokenizer, args.buckets, batch_sizes=args.batch_sizes,
                              max_new_tokens=args.max_new_tokens, recorder=rec,
                              backend=args.backend, on_step=step)
        finally:
            bar.close()
    print(terminal_safe(str(manifest)))
    for graph in manifest.graphs:
        neff = "" if graph["neff_compile_s"] is None else (
            f", NEFF {graph['neff_compile_s']:.1f} s ({graph['neff_cache']})")
        print(f"  batch {graph['batch_size']:>3}, bucket {graph['bucket']:>5}, cache "
              f"{graph['cache_len']:>5}: {graph['graphs']} compile(s), {graph['compile_s']:.2f} s"
              f"{neff}")
    if args.manifest is not None:
        _write("manifest", Path(args.manifest), lambda: manifest.save(args.manifest), sys.stdout)
    if rec.write_errors:  # after the manifest: what can be kept is kept
        raise _cannot_write("compile log", args.log, rec.write_errors[0])
    if args.log is not None:
        print(terminal_safe(f"compile log written to {args.log}"))
    return 0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="neuronkit", formatter_class=argparse.RawDescriptionHelpFormatter,
        description="See, explain and stop recompiles of Hugging Face models on AWS Trainium.",
        epilog=EXIT_CODES)
    from neuronkit._version import __version__

    parser.add_argument("--version", action="version", version=f"neuronkit {__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    p = sub.add_parser("doctor", help="versions, devices, compile backend, cache, known traps")
    p.add_argument("--cache-dir", default=None, help="Neuron compile cache folder to summarise")
    p.set_defaults(func=cmd_doctor)

    p = sub.add_parser("demo", help="generate naive vs bucketed on a model and report the compiles")
    p.add_argument("--model", default=None,
                   help="model name or folder (default: the embedded tiny Qwen3)")
    p.add_argument("--requests", type=int, default=12, help="number of prompts of mixed lengths")
    p.add_argument("--max-new-tokens", type=int, default=8, metavar="N",
                   help="new tokens generated per prompt (default 8)")
    p.add_argument("--backend", default=None,
                   help="compile backend off Neuron (default: $NEURONKIT_CPU_BACKEND or eager)")
    p.add_argument("--log-dir", default=None, metavar="DIR",
                   help="where to write the compile logs: DIR/naive.jsonl and DIR/bucketed.jsonl, "
                        "two separate runs (default: a temporary folder)")
    p.set_defaults(func=cmd_demo)

    p = sub.add_parser(
        "report", help="print the events, summary and advice of compile logs",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=REPORT_EPILOG + EXIT_CODES,
        usage="%(prog)s [LOG [LOG ...]] [--limit N|all] [--json] [--fail-on warning|critical]\n"
              "                        [--png PATH] [--chrome-trace PATH]",
        description="Print the compile report of one log, or of several merged in start-time\n"
                    "order (one per rank: neuronkit report logs/*.jsonl). With no LOG: the latest\n"
                    "run under ./neuronkit-logs (neuronkit record's) or ./compile-log.jsonl,\n"
                    "whichever is newer; a line on stderr says which.")
    p.add_argument("logs", nargs="*", metavar="LOG",
                   help="compile logs (JSONL) written by neuronkit, several merged; or a folder: "
                        "one run (per-rank *.rank<N>.jsonl, neuronkit record's *.pid<P>.jsonl, "
                        "torch trace files, or a single *.jsonl); a folder of runs "
                        "(neuronkit-logs) means its latest run. A folder of separate logs "
                        "(neuronkit demo --log-dir's) is listed: name one")
    p.add_argument("--limit", type=_limit, default=DEFAULT_LIMIT, metavar="N",
                   help=f"show the N most recent events, or 'all' (default {DEFAULT_LIMIT}); "
                        "the summary and advice always cover every event")
    p.add_argument("--json", action="store_true",
                   help="print the report as JSON (keys below) instead of text")
    p.add_argument("--fail-on", choices=("warning", "critical"), default=None,
                   help=f"exit {EXIT_FINDINGS} when a finding is at or above this severity "
                        "(for CI: fail on recompiles)")
    p.add_argument("--png", default=None, metavar="PATH",
                   help="also save the timeline chart here (a folder: <log stem>.timeline.png in "
                        "it)")
    p.add_argument("--chrome-trace", default=None, metavar="PATH",
                   help="also write a Chrome/Perfetto trace here (a folder: <log stem>.trace.json "
                        "in it)")
    p.set_defaults(func=cmd_report)

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

    p = sub.add_parser("warmup", help="compile every graph of a serving plan before serving",
                       description="Compile the decode graphs (and on Neuron the prefill kernels) "
                                   "of buckets x batch sizes at one max_new_tokens, then write a "
                                   "manifest of what was compiled.")
    p.add_argument("model", metavar="MODEL", help="model name or folder")
    p.add_argument("--buckets", type=_int_list, default=[64, 128, 256], metavar="N,N,...",
                   help="prompt-length buckets (default 64,128,256)")
    p.add_argument("--batch-sizes", type=_int_list, default=[1, 4], metavar="N,N,...",
                   help="batch sizes to serve (default 1,4)")
    p.add_argument("--max-new-tokens", type=_positive, default=128, metavar="N",
                   help="new tokens per request (default 128; requests in its power-of-two "
                        "band share the graphs)")
    p.add_argument("--device", default=None, help="neuron, cuda or cpu (default: detected)")
    p.add_argument("--dtype", default="bfloat16", help="model dtype (default bfloat16)")
    p.add_argument("--backend", default=None,
                   help="compile backend off Neuron (default: $NEURONKIT_CPU_BACKEND or eager)")
    p.add_argument("--manifest", default=None, metavar="PATH",
                   help="write the warm-up manifest (JSON) here")
    p.add_argument("--log", default=None, metavar="PATH", help="write the compile log (JSONL) here")
    p.set_defaults(func=cmd_warmup)
    add_job_commands(sub)
    return parser


def _warning_printer(command: str) -> Callable[..., None]:
    """``warnings.showwarning`` for a command: neuronkit's log warnings (``LogWarning``, whose
    message names its file) print as ``neuronkit COMMAND: warning: ...``, without Python's
    ``file:line: Category:`` and source line; other warnings as Python prints them."""
    from neuronkit.events.schema import LogWarning

    shown = warnings.showwarning

    def show(message: Warning | str, category: type[Warning], filename: str, lineno: int,
             file: TextIO | None = None, line: str | None = None) -> None:
        if issubclass(category, LogWarning):
            print(terminal_safe(f"neuronkit {command}: warning: {message}"), file=sys.stderr)
        else:
            shown(message, category, filename, lineno, file, line)
    return show


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_printer(args.command)
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader gone is seen below
        return code
    except BrokenPipeError:  # `neuronkit ... | head -1`: the reader has what it wanted
        _stdout_gone()
        return EXIT_OK
    except (OSError, ValueError, RuntimeError) as exc:  # a file unreadable or unwritable, bad input
        print(f"neuronkit {args.command}: error: {terminal_safe(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
