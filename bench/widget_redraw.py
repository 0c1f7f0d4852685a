"""How long the recompile dashboard takes to redraw a 1,000-event log (goal: under 300 ms).

    python bench/widget_redraw.py [--events 1000] [--repeats 5]

A redraw is what happens when an event arrives: the counters and diagnose() advice are recomputed
(``state.refresh()``), then the event table, the graph counter, the advice and the chart PNG are
drawn (``dashboard.redraw()``). The log is synthetic (three functions, shapes growing, a few
recompile-limit hits) and is replayed from a JSONL file, as ``RecompileDashboard.from_log`` does.
Prints the median wall and CPU time of a few redraws and of each part, side by side in one run.
"""
from __future__ import annotations

import argparse
import os
import random
import statistics
import tempfile
import time
from pathlib import Path

from neuronkit.events import CompileEvent, CompileLog
from neuronkit.views.charts import dashboard_chart, png_bytes
from neuronkit.views.html import advice_html, events_table_html, graph_counts_html
from neuronkit.widget import RecompileDashboard

GOAL_MS = 300.0


def synthetic_log(n: int, shapes: int | None = 24, seed: int = 0) -> CompileLog:
    """``n`` events of a merged 8-rank run: 4 functions whose input length keeps changing.

    ``shapes``: distinct input lengths per function (a run that raised ``recompile_limit``);
    None: every event a new length (the worst case for ``diagnose``, which plans buckets over
    the distinct lengths). Functions past 8 graphs on a rank sometimes hit the limit.
    """
    rng = random.Random(seed)
    functions = ["forward", "wrapped_func", "training_step", "compiled_loss"]
    pools = {f: rng.sample(range(4, 2048), shapes) if shapes else None for f in functions}
    seen: dict[tuple[str, int], list[int]] = {}
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 1, "device": "neuron",
                             "backend": "neuron"})
    t = 1_700_000_000.0
    for i in range(n):
        function, rank = rng.choice(functions), rng.randrange(8)
        history = seen.setdefault((function, rank), [])
        pool = pools[function]
        length = rng.choice(pool) if pool else rng.randint(4, 100_000)
        previous = history[-1] if history else None
        kind = "first" if previous is None else ("limit_hit" if len(history) >= 8 and i % 5 == 0
                                                 else "recompile")
        reasons = [f"{len(history) - 1 - k}/{len(history) - 1 - k}: tensor 'L['input_ids']' size "
                   f"mismatch at index 1. expected {old}, actual {length}"
                   for k, old in enumerate(reversed(history[-3:]))]
        if kind != "limit_hit":
            history.append(length)
        duration = 0.0 if kind == "limit_hit" else rng.uniform(20.0, 90.0)
        log.append(CompileEvent(
            compile_id=f"{functions.index(function)}/{len(history)}", function=function,
            location=f"model.py:{10 + functions.index(function)}", backend="neuron",
            device="neuron", started_at=t, duration_s=duration,
            input_shapes={"input_ids": [1, length]},
            changed="" if previous is None else f"input_ids dim 1: {previous} -> {length}",
            reasons=reasons, kind=kind, graph_count=len(history), rank=rank,
            context=f"step {i // 8}"))
        t += rng.uniform(0.5, 5.0)
    return log


def timed(fn, repeats: int) -> tuple[float, float]:
    """Median wall and CPU milliseconds of ``repeats`` calls (after one warm-up call).

    CPU time (this process) is what the redraw costs on an idle machine; wall time also holds
    whatever else the machine is running at the moment (the load average is printed).
    """
    fn()
    wall, cpu = [], []
    for _ in range(repeats):
        start, start_cpu = time.perf_counter(), time.process_time()
        fn()
        wall.append((time.perf_counter() - start) * 1e3)
        cpu.append((time.process_time() - start_cpu) * 1e3)
    return statistics.median(wall), statistics.median(cpu)


def measure(log: CompileLog, repeats: int, label: str) -> tuple[float, float]:
    with tempfile.TemporaryDirectory() as tmp:
        dash = RecompileDashboard.from_log(log.save(Path(tmp) / "synthetic.jsonl"))
    state, log = dash.state, dash.state.log
    parts = {
        "refresh (counts + diagnose)": state.refresh,
        "event table": lambda: events_table_html(log),
        "graph counter": lambda: graph_counts_html(log),
        "advice": lambda: advice_html(state.advice),
        "chart PNG": lambda: png_bytes(dashboard_chart(log)),
    }
    wall, cpu = timed(dash.redraw, repeats)
    print(f"{label}: redraw of a {len(log.events)}-event log, median of {repeats}")
    print(f"  {'':<28} {'wall ms':>9} {'CPU ms':>9}")
    for name, fn in parts.items():
        w, c = timed(fn, repeats)
        print(f"  {name:<28} {w:9.1f} {c:9.1f}")
    print(f"  {'full redraw':<28} {wall:9.1f} {cpu:9.1f}   goal < {GOAL_MS:.0f} ms: "
          f"wall {'OK' if wall < GOAL_MS else 'OVER'} ({wall / GOAL_MS:.2f}x), "
          f"CPU {'OK' if cpu < GOAL_MS else 'OVER'} ({cpu / GOAL_MS:.2f}x)")
    dash.close()
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1000)
    parser.add_argument("--repeats", type=int, default=5)
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores "
          "(wall times grow with it; CPU times do not)")
    measure(synthetic_log(args.events), args.repeats,
            "8 ranks, 4 functions, 24 input lengths each")
    measure(synthetic_log(args.events, shapes=None), args.repeats,
            "worst case, every event a new input length")


if __name__ == "__main__":
    main()
