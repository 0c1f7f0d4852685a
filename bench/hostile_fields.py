"""Every view of a hostile log: one field of 20 MB (a reason, a function name, a place, what
changed, a context, an input name, an op name, the header's description and device).

Goal: each view of such a log in under 5 s (the issue: a 20 MB reason kept ``neuronkit report``
busy for more than 5 minutes). Per field, one small log with that field hostile (each event a
recompile, as in a real log), and the same log with the field short: each view's CPU seconds
on both, and their ratio. Views are timed as a user meets them, the log loaded each time:

  load       ``CompileLog.load(LOG)`` alone: what every view below pays first
  report     ``neuronkit report LOG`` (load, diagnose, summary, text)
  json       ``neuronkit report LOG --json``
  summary    ``format_summary(LOG)``
  png        ``timeline(log)`` as PNG (``--png``)
  trace      ``write_chrome_trace(log)`` (``--chrome-trace``)
  html       the event table, graph counts, advice and replay note as HTML
  exports    the event table as CSV and Markdown
  dashboard  ``RecompileDashboard.from_log(LOG)`` (the replay)
  watch      ``neuronkit watch LOG`` (one frame, then the final report)

A view still running after ``--timeout`` seconds is stopped where Python code runs (a regex
in C runs to its end) and shown as ``>N``. CPU time is what a busy machine does not inflate.

    python bench/hostile_fields.py [--size 20000000] [--fields reasons,function] [--timeout 120]
"""
from __future__ import annotations

import argparse
import contextlib
import io
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Callable

from rich.console import Console

from neuronkit.advice.diagnose import diagnose
from neuronkit.apps.cli import main as cli
from neuronkit.apps.watch import final_report, watch
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.follow import follow
from neuronkit.views.charts import save_png, timeline
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.html import advice_html, events_table_html, graph_counts_html, replay_note
from neuronkit.views.table import EventTable
from neuronkit.views.table_export import table_csv, table_markdown
from neuronkit.views.text import format_summary
from neuronkit.widget import RecompileDashboard

GOAL_S = 5.0
FIELDS = ("reasons", "function", "location", "changed", "context", "input", "ops", "header")
UNIT = "L['self'].layers[0].size()[0]==8;"  # guard-like text without a space: the worst wrap


def filler(size: int) -> str:
    return (UNIT * (size // len(UNIT) + 1))[:size]


def build(path: Path, field: str, value: str) -> Path:
    """A first compile and five recompiles of ``forward``; the first recompile holds ``value``
    in ``field`` (a reason as a recompile without shapes states it, so a finding quotes it)."""
    normal: dict[str, Any] = {
        "function": "forward", "location": "/m.py:10", "backend": "eager", "device": "cpu",
        "duration_s": 0.5, "kind": "recompile", "context": "generate", "changed": "",
        "input_shapes": {}, "reasons": ["L['self'].step == 1"]}
    hostile = {"reasons": {"reasons": [value]}, "function": {"function": value},
               "location": {"location": value}, "changed": {"changed": value},
               "context": {"context": value}, "input": {"input_shapes": {value: [1, 9]}},
               "ops": {"kind": "kernels", "kernels": 1, "ops": {value: 1}}, "header": {}}[field]
    header = {"description": value, "device": value} if field == "header" else {}
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 3, **header})
    for i in range(6):
        log.append(CompileEvent(**{**normal, "kind": "first" if i == 0 else "recompile",
                                   "started_at": 100.0 + i, **(hostile if i == 1 else {})}))
    return log.save(path)


def views(out: Path) -> dict[str, Callable[[Path], object]]:
    def quiet(*args: str) -> Callable[[Path], object]:
        def run(path: Path) -> object:
            with contextlib.redirect_stdout(io.StringIO()):
                return cli(["report", str(path), *args])
        return run

    def html(path: Path) -> str:
        log = CompileLog.load(path)
        return (events_table_html(log) + graph_counts_html(log) + advice_html(diagnose(log))
                + replay_note(str(path), log.header))

    def exports(path: Path) -> str:
        rows = EventTable(CompileLog.load(path)).all_rows()
        return table_csv(rows) + table_markdown(rows)

    def watched(path: Path) -> str:
        watch(path, console=Console(file=io.StringIO(), width=120), once=True)
        follower = follow(path)
        follower.poll()
        return final_report(follower)

    return {"load": CompileLog.load, "report": quiet(), "json": quiet("--json"),
            "summary": format_summary,
            "png": lambda p: save_png(timeline(CompileLog.load(p)), out / "timeline.png"),
            "trace": lambda p: write_chrome_trace(CompileLog.load(p), out / "trace.json"),
            "html": html, "exports": exports,
            "dashboard": lambda p: RecompileDashboard.from_log(p).close(), "watch": watched}


class _Late(Exception):
    pass


def timed(view: Callable[[Path], object], path: Path, timeout: float) -> float | None:
    """CPU seconds of one call; None when it ran past ``timeout`` (stopped)."""
    def late(signum: int, frame: Any) -> None:
        raise _Late

    previous = signal.signal(signal.SIGALRM, late)
    signal.setitimer(signal.ITIMER_REAL, timeout)
    start = time.process_time()
    try:
        view(path)
        return time.process_time() - start
    except _Late:
        return None
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=20_000_000, help="the hostile field's chars")
    parser.add_argument("--fields", default=",".join(FIELDS))
    parser.add_argument("--timeout", type=float, default=120.0, help="seconds a view may run")
    args = parser.parse_args(argv)
    fields = [f for f in args.fields.split(",") if f]
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f}; a {args.size:,}-character field; CPU s hostile "
          f"(x normal); goal < {GOAL_S:g} s a view")
    worst = 0.0
    with tempfile.TemporaryDirectory(prefix="neuronkit-hostile-bench-") as folder:
        out = Path(folder)
        shown = views(out)
        normal = build(out / "normal.jsonl", "reasons", "L['self'].step == 2")
        for view in shown.values():  # imports, fonts: paid once, before any timing
            view(normal)
        print(f"{'field':<9}" + "".join(f"{name:>16}" for name in shown))
        for field in fields:
            base = build(out / "normal.jsonl", field, "short_value")
            hostile = build(out / "hostile.jsonl", field, filler(args.size))
            cells = []
            for view in shown.values():
                short, long = timed(view, base, args.timeout), timed(view, hostile, args.timeout)
                worst = max(worst, args.timeout if long is None else long)
                cells.append(f">{args.timeout:g}" if long is None else
                             f"{long:.2f} (x{long / max(short or 0.0, 1e-3):.0f})")
            print(f"{field:<9}" + "".join(f"{cell:>16}" for cell in cells), flush=True)
    print(f"slowest view: {worst:.2f} s CPU, goal < {GOAL_S:g} s: "
          f"{'ok' if worst < GOAL_S else 'OVER'}")
    return 0 if worst < GOAL_S else 1


if __name__ == "__main__":
    sys.exit(main())
