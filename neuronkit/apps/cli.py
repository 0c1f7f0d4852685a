"""The ``neuronkit`` command line: doctor | demo | report LOG... | cache [DIR] | warmup MODEL."""
from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Sequence, TextIO

from neuronkit.apps.cli_buckets import add_buckets_command
from neuronkit.apps.cli_cache import add_cache_command, cache_check_argv
from neuronkit.apps.cli_common import (
    EXIT_ERROR,
    EXIT_FINDINGS,
    EXIT_OK,
    output_path,
    print_out,
    stdout_gone,
    write_output,
)
from neuronkit.apps.cli_jobs import add_job_commands, log_paths
from neuronkit.apps.cli_runs import add_run_commands
from neuronkit.apps.cli_warmup import add_warmup_command
from neuronkit.safe import terminal_safe

if TYPE_CHECKING:
    from neuronkit.advice.bill import Bill
    from neuronkit.log.compile_log import CompileLog

__all__ = ["EXIT_ERROR", "EXIT_FINDINGS", "EXIT_OK", "main"]

EXIT_CODES = f"""\
exit codes:
  {EXIT_OK}  done (report: printed, no finding at or above --fail-on; output cut short by its
     reader, as in `neuronkit report LOG | head -1`, is not an error)
  1  cache --prune: some leftovers could not be removed; diff --fail-on: a gate failed;
     cache check: a graph would build
  {EXIT_ERROR}  error: a missing or unreadable log or folder, an output that cannot be written,
     a bad argument, a report --calibrate log with fewer than 5 NEFF builds
  {EXIT_FINDINGS}  report --fail-on SEVERITY: a finding at or above SEVERITY (the report is printed)
"""


DEFAULT_LIMIT = 50  # = neuronkit.views.text.DEFAULT_LIMIT (not imported: keeps --help light)
REPORT_EPILOG = """\
--json prints one object: format ("neuronkit-report"), version, logs, device, backend, ranks,
wall_time_s, compile_s, neff_s, share_of_wall, counts {events, shown, not_shown, graphs, kinds,
advice}, worst_severity, summary [per-function rows], advice [{severity, title, detail, fix,
numbers}], events [the shown events: CompileEvent fields plus t_s and label]; and, where there is
a compile bill (below), bill {basis, model, counts, priced seconds, rows, refusals,
calibration}. Text from the log is printed without control characters or escape
sequences; JSON escapes it (ASCII only).

The compile bill opens the report of a log recorded with --as-neuron, or of any log given
--calibrate NEURON_LOG: the graphs and eager kernels Neuron would build, priced at an assumed
60 s a graph and 2 s a kernel, or by a model fitted on NEURON_LOG's own NEFF builds (at least 5;
its leave-one-out error is printed). Counts and seconds are a rehearsal, never a measurement.

"""


def cmd_doctor(args: argparse.Namespace) -> int:
    from neuronkit.setup.doctor import doctor_report

    print(doctor_report(cache_dir=args.cache_dir))
    return 0


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
                                    f"rank {rank}: their events count as one rank (two separate "
                                    f"runs? compare them: neuronkit diff {seen[rank]} {path})"),
                      file=sys.stderr)
            seen.setdefault(rank, path)
    return CompileLog.merge(logs)


def _bill(log: "CompileLog", calibrate_path: str | None) -> "Bill | None":
    """The compile bill: of a log recorded as_neuron, or any log when a calibration log is
    named (a bad or short one: ValueError, exit 2)."""
    from neuronkit.advice.bill import as_neuron_of, compile_bill
    from neuronkit.advice.calibrate import calibrate
    from neuronkit.log.open import open_log

    if calibrate_path is None:
        return compile_bill(log) if as_neuron_of(log) is not None else None
    try:
        neuron_log = open_log(calibrate_path)
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ValueError(f"--calibrate {calibrate_path}: {why}") from exc
    return compile_bill(log, calibrate(neuron_log, source=calibrate_path))


def cmd_report(args: argparse.Namespace) -> int:
    from neuronkit.advice.diagnose import diagnose
    from neuronkit.advice.finding import SEVERITIES
    from neuronkit.views.report_json import report_data
    from neuronkit.views.text import format_report
    from neuronkit.views.text_layout import terminal_width

    paths = log_paths(args.logs)
    png = output_path(args.png, paths, ".timeline.png")
    trace = output_path(args.chrome_trace, paths, ".trace.json")
    page = output_path(args.html, paths, ".html")
    log = _load(paths)
    bill = _bill(log, args.calibrate)  # before any output: a bad calibration log prints nothing
    advice, summary = diagnose(log), log.summary()
    if args.json:
        from neuronkit.views.bill_text import bill_data

        data = report_data(log, limit=args.limit, advice=advice, summary=summary)
        data["logs"] = [str(p) for p in paths]
        if bill is not None:  # a key only where there is a bill: other logs keep their shape
            data["bill"] = bill_data(bill)
        print_out(json.dumps(data, indent=2, ensure_ascii=True, default=str))
    else:
        if bill is not None:
            from neuronkit.views.bill_text import bill_text

            print_out(bill_text(bill, width=terminal_width()) + "\n")
        print_out(format_report(log, limit=args.limit, advice=advice, summary=summary,
                             width=terminal_width()))
    notes = sys.stderr if args.json else sys.stdout  # JSON on stdout stays parseable
    if png is not None:
        from neuronkit.views.charts import save_png, timeline

        write_output("chart", png, lambda: save_png(timeline(log), png), notes)
    if trace is not None:
        from neuronkit.views.chrome_trace import write_chrome_trace

        write_output("Chrome trace", trace, lambda: write_chrome_trace(log, trace), notes,
               " (open it in https://ui.perfetto.dev or chrome://tracing)")
    if page is not None:
        from neuronkit.views.report_page import write_report_page

        write_output("HTML report", page, lambda: write_report_page(
            log, page, advice=advice, summary=summary, limit=args.limit, bill=bill), notes)
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
              "                        [--png PATH] [--chrome-trace PATH] [--html PATH]\n"
              "                        [--calibrate NEURON_LOG]",
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
    p.add_argument("--html", default=None, metavar="PATH",
                   help="also write the report as one self-contained HTML page here, charts "
                        "inline, nothing fetched (a folder: <log stem>.html in it)")
    p.add_argument("--calibrate", default=None, metavar="NEURON_LOG",
                   help="price the compile bill by a model fitted on this Neuron log's own NEFF "
                        "builds (at least 5 with their seconds), and print the bill first")
    p.set_defaults(func=cmd_report)

    add_cache_command(sub)
    add_warmup_command(sub)
    add_job_commands(sub)
    add_run_commands(sub)
    add_buckets_command(sub)
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
    args = build_parser().parse_args(cache_check_argv(sys.argv[1:] if argv is None else argv))
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _warning_printer(args.command)
            code = int(args.func(args) or 0)
        sys.stdout.flush()  # here, not at exit: a reader gone is seen below
        return code
    except BrokenPipeError:  # `neuronkit ... | head -1`: the reader has what it wanted
        stdout_gone()
        return EXIT_OK
    except (OSError, ValueError, RuntimeError) as exc:  # a file unreadable or unwritable, bad input
        print(f"neuronkit {args.command}: error: {terminal_safe(exc)}", file=sys.stderr)
        return EXIT_ERROR


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
