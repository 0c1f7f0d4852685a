"""The recompile dashboard at scale: replay a 100k-event log, redraw 10k events, take a live event.

Goals (ratios printed against them, measured side by side in one run):
  replay      ``RecompileDashboard.from_log(path)`` of a 100k-event log: load, advice, table, chart
              under 3 s (median of 3, after a small replay has paid the imports);
  redraw      a full redraw of a 10k-event session (counts, ``diagnose()`` advice, the event table
              page, the chart PNG) under 300 ms;
  live event  one event arriving in a 10k-event session while a run goes on (the recorder hands it
              to the dashboard: counts, the event appended to the table's index, the page drawn)
              under 50 ms. The chart follows at most every CHART_EVERY_S while a run goes on.

    python bench/widget_redraw.py [--events 10000] [--replay-events 100000] [--repeats 5]

Logs are synthetic (``bench/log_scale.py``'s: 8 ranks, a dozen functions, every kind of event).
Wall and CPU time (this process) are printed; CPU time is what a busy machine does not inflate.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Callable

sys.path.insert(0, str(Path(__file__).resolve().parent))
from log_scale import build  # noqa: E402  (the same synthetic log as the log bench)

from neuronkit.events.event import CompileEvent  # noqa: E402
from neuronkit.views.charts import dashboard_chart, png_bytes  # noqa: E402
from neuronkit.views.html import chart_key_html, graph_counts_html  # noqa: E402
from neuronkit.widget import RecompileDashboard  # noqa: E402

GOAL_REPLAY_S = 3.0
GOAL_REDRAW_MS = 300.0
GOAL_EVENT_MS = 50.0


def timed(fn: Callable[[], object], repeats: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``repeats`` calls (after one warm-up call)."""
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def verdict(wall: float, cpu: float, goal: float, unit: str) -> str:
    return (f"goal < {goal:g} {unit}: wall {'OK' if wall < goal else 'OVER'} ({wall / goal:.2f}x), "
            f"CPU {'OK' if cpu < goal else 'OVER'} ({cpu / goal:.2f}x)")


def replay(path: Path, warm_up: Path, repeats: int) -> None:
    """Median of ``repeats`` replays, after one of a small log: the first dashboard of a process
    pays one-time costs (imports, fonts) whatever the log's size; the goal is about its size."""
    RecompileDashboard.from_log(warm_up).close()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        dash = RecompileDashboard.from_log(path)
        wall.append(time.perf_counter() - start)
        cpu.append(time.process_time() - start_cpu)
        events = len(dash.log.events)
        dash.close()
    w, c = statistics.median(wall), statistics.median(cpu)
    print(f"replay of {events} events ({path.stat().st_size / 1e6:.1f} MB), median of {repeats}: "
          f"{w:.2f} s wall, {c:.2f} s CPU   {verdict(w, c, GOAL_REPLAY_S, 's')}")


def session(path: Path, repeats: int) -> None:
    dash = RecompileDashboard.from_log(path)
    state = dash.state
    n = len(state.log.events)
    state.log.path = None  # the events added below stay in memory, as a live session's do

    def new_event_then_redraw() -> None:  # a redraw follows new events: advice and all redone
        state.log.append(CompileEvent(function="forward", kind="recompile", started_at=time.time(),
                                      duration_s=1.0, input_shapes={"input_ids": [8, n]}))
        dash.redraw()

    wall, cpu = timed(new_event_then_redraw, repeats)
    print(f"full redraw of {n} events, median of {repeats}: {wall:.0f} ms wall, {cpu:.0f} ms CPU   "
          f"{verdict(wall, cpu, GOAL_REDRAW_MS, 'ms')}")

    def chart_and_key() -> tuple[bytes, str]:  # as the dashboard draws them: the key in HTML
        figure = dashboard_chart(state.log, legend=False)
        return png_bytes(figure), chart_key_html(getattr(figure, "key", []))

    parts = {"counts + advice (diagnose)": lambda: (setattr(state, "_advice_key", None),
                                                     state.refresh()),
             "graph counts table": lambda: graph_counts_html(state.log),
             "event table page": lambda: dash.table_panel.show(state.log, state.advice),
             "chart PNG and its key": chart_and_key}
    for name, fn in parts.items():
        w, c = timed(fn, repeats)
        print(f"  {name:<28} {w:8.1f} ms wall {c:8.1f} ms CPU")
    state.busy = True  # a run goes on: events stream in, the chart follows at most every 0.5 s
    dash._chart_at = time.monotonic()
    log = state.log

    def one_event() -> None:
        log.append(CompileEvent(function="forward", kind="recompile", started_at=time.time(),
                                duration_s=1.0, input_shapes={"input_ids": [8, len(log.events)]}))
        state.refresh(advice=False)  # what the recorder's subscriber does with a new event

    wall, cpu = timed(one_event, repeats * 4)
    print(f"a live event in a {n}-event session, median of {repeats * 4}: {wall:.1f} ms wall, "
          f"{cpu:.1f} ms CPU   {verdict(wall, cpu, GOAL_EVENT_MS, 'ms')}")
    assert dash.table_panel.table.total == len(log.events), "the table missed events"
    state.busy = False
    dash.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=10_000)
    parser.add_argument("--replay-events", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"python {sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f} (wall times grow with it; CPU times do not)")
    with tempfile.TemporaryDirectory(prefix="neuronkit-widget-bench-") as folder:
        big, small = Path(folder) / "replay.jsonl", Path(folder) / "session.jsonl"
        build(big, args.replay_events)
        build(small, args.events)
        replay(big, small, repeats=3)
        session(small, args.repeats)


if __name__ == "__main__":
    main()
