"""The command line's run commands: ``neuronkit diff [A] [B]`` (two runs compared graph by graph,
with gates for CI)."""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from neuronkit.apps.cli_common import EXIT_ERROR, EXIT_OK, output_path, print_out, write_output
from neuronkit.safe import terminal_safe

__all__ = ["EXIT_GATE", "add_run_commands", "diff_paths"]

EXIT_GATE = 1  # diff --fail-on: a gate failed
GATES = ("new-graphs", "builds", "slower=PCT")
DIFF_EPILOG = f"""\
A and B are compile logs or run folders, read as `neuronkit report` reads one. With no path: the
two latest runs under ./neuronkit-logs (A the older); with one: that run (A) vs the latest (B).

--fail-on GATE (may repeat):
  new-graphs   B built a graph that A did not
  builds       B built (did not load from a cache) a graph that A also had; needs logs that
               record cache lookups (not backend eager or aot_eager, not an older log)
  slower=PCT   B's compile seconds (Dynamo + NEFF) are more than PCT% above A's

--json prints one object: format ("neuronkit-diff"), version, names, headline, graphs,
per_function, seconds, records_lookups, same, new, gone, built_in_b_loaded_in_a,
loaded_in_b_built_in_a, moved, rebuilt [{{b, a, how, differs}}], new_reasons, new_breaks, notes.

exit codes:
  {EXIT_OK}  done, every gate passed
  {EXIT_GATE}  a --fail-on gate failed (a line on stderr names it; the diff is printed)
  {EXIT_ERROR}  bad input: a missing or unreadable log, a bad --fail-on, builds asked of logs that
     record no cache lookups, an output that cannot be written
"""


def _gate(text: str) -> tuple[str, float]:
    """``--fail-on``: new-graphs, builds or slower=PCT (a number >= 0)."""
    name, _, pct = text.strip().partition("=")
    if name in ("new-graphs", "builds") and not pct:
        return name, 0.0
    if name == "slower" and pct:
        try:
            value = float(pct.rstrip("%"))
        except ValueError:
            value = -1.0
        if 0 <= value < float("inf"):
            return name, value
        raise argparse.ArgumentTypeError(f"slower=PCT needs a percentage >= 0, got {text!r}")
    raise argparse.ArgumentTypeError(f"expected one of {', '.join(GATES)}, got {text!r}")


def diff_paths(args: Sequence[str]) -> tuple[Path, Path]:
    """The two runs to compare: A and B as named; one: it vs the latest run; none: the two latest
    runs under ./neuronkit-logs. Each argument is one log or run (``log_paths``' rules)."""
    from neuronkit.apps.cli_jobs import log_paths
    from neuronkit.log.runs import RECORD_HINT, RUNS_DIR, NoRunError, classify

    if not args:
        runs = classify(Path(RUNS_DIR)).runs
        if len(runs) < 2:
            raise NoRunError(f"no path given and {len(runs)} run(s) in {RUNS_DIR}: need two to "
                             f"compare. Record them ({RECORD_HINT}), or name two: neuronkit diff A B")
        print(terminal_safe(f"neuronkit diff: no path given: comparing the two latest runs, "
                            f"{runs[1]} (A) and {runs[0]} (B)"), file=sys.stderr)
        return runs[1], runs[0]
    chosen = []
    for arg in [*args, None] if len(args) == 1 else args:
        paths = log_paths([arg] if arg is not None else [], "diff")
        if len(paths) != 1:
            raise ValueError(f"{arg} names {len(paths)} logs: name one log or run folder for each "
                             "of A and B")
        chosen.append(paths[0])
    if chosen[0].resolve() == chosen[1].resolve():
        raise ValueError(f"A and B are the same run ({chosen[0]}): name two runs to compare")
    return chosen[0], chosen[1]


def _failed_gates(d: Any, gates: list[tuple[str, float]]) -> list[str]:
    """What each failing gate says."""
    failed = []
    for name, pct in dict.fromkeys(gates):
        if name == "new-graphs" and d.new:
            failed.append(f"new-graphs: {len(d.new)} graph(s) new in {d.names[1]}")
        elif name == "builds" and d.built_again:
            failed.append(f"builds: {d.names[1]} built {len(d.built_again)} graph(s) that "
                          f"{d.names[0]} also had")
        elif name == "slower":
            (a, b) = d.total_s
            if b > a * (1 + pct / 100) and b > 0:
                grew = f"{(b - a) / a * 100:.0f}% more" if a else "none before"
                failed.append(f"slower={pct:g}: compile s {a:.2f} -> {b:.2f} ({grew})")
    return failed


def cmd_diff(args: argparse.Namespace) -> int:
    from neuronkit.advice.run_diff import diff_logs, run_name
    from neuronkit.log.open import open_log
    from neuronkit.views.diff_text import diff_data, diff_html, diff_text
    from neuronkit.views.text_layout import terminal_width

    if len(args.runs) > 2:
        raise ValueError(f"diff compares two runs, got {len(args.runs)} paths")
    pa, pb = diff_paths(args.runs)
    page = output_path(args.html, [pb], ".diff.html")
    if page is not None and page.resolve() == pa.resolve():
        raise ValueError(f"{page} is a compile log given to read: name another file to write")
    gates = list(args.fail_on or [])
    la, lb = open_log(pa), open_log(pb)
    names = (run_name(pa, pb), run_name(pb, pa))
    d = diff_logs(la, lb, names=names if names[0] != names[1] else ("A", "B"))
    if any(name == "builds" for name, _ in gates) and not d.lookups[1]:
        from neuronkit.advice.key_diff import no_lookups_why

        raise ValueError(f"--fail-on builds: {pb} records no cache lookups "
                         f"({no_lookups_why(lb, list(lb.events))}): cannot tell built from loaded")
    if args.json:
        data = diff_data(d)
        data["logs"] = [str(pa), str(pb)]
        print_out(json.dumps(data, indent=2, ensure_ascii=True, default=str))
    else:
        print_out(diff_text(d, width=min(terminal_width(), 100)))  # one screen: 100 columns
    if page is not None:
        from neuronkit.views.report_page import write_report_page

        write_output("HTML report", page, lambda: write_report_page(
            lb, page, extra_sections=[(f"{d.names[0]} vs {d.names[1]}", diff_html(d))]),
            sys.stderr if args.json else sys.stdout)
    failed = _failed_gates(d, gates)
    for line in failed:
        print(terminal_safe(f"neuronkit diff: --fail-on {line}: exit {EXIT_GATE}"), file=sys.stderr)
    return EXIT_GATE if failed else EXIT_OK


def add_run_commands(sub: Any) -> None:
    """Add ``diff`` to the ``neuronkit`` parser's subcommands."""
    p = sub.add_parser(
        "diff", help="compare two runs graph by graph: new, gone, rebuilt and why, seconds moved",
        formatter_class=argparse.RawDescriptionHelpFormatter, epilog=DIFF_EPILOG,
        usage="%(prog)s [A] [B] [--json] [--fail-on new-graphs|builds|slower=PCT ...] "
              "[--html FILE]",
        description="Compare run B with run A: which graphs are new in B, gone, or the same;\n"
                    "which B built where A loaded them from a cache, and the parts of the cache\n"
                    "key that differ; compile and NEFF seconds that moved; new recompile reasons\n"
                    "and graph breaks.")
    p.add_argument("runs", nargs="*", metavar="RUN", help="run A then run B (logs or run folders)")
    p.add_argument("--json", action="store_true", help="print the diff as JSON (keys below)")
    p.add_argument("--fail-on", action="append", type=_gate, metavar="GATE",
                   help="exit 1 when B fails this gate: new-graphs, builds or slower=PCT (repeat "
                        "for several)")
    p.add_argument("--html", default=None, metavar="FILE",
                   help="also write B's report as one self-contained HTML page with the diff in "
                        "it (a folder: <B stem>.diff.html in it)")
    p.set_defaults(func=cmd_diff)
