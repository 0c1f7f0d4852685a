"""Reading a large compile log: load, summary, diagnose and the text report of 100k events.

Goals: load + summary + diagnose + report under 3 s in total, peak memory under 300 MB, and a
bounded report (``format_report(log, limit=50)``: under 100 kB whatever the log's length). The
log is synthetic but shaped like a long distributed run gone wrong: 8 ranks, a dozen functions
(forward in several files, decode wrappers, resume functions, the optimizer step, eager kernels),
sequence lengths, batch sizes and KV-cache lengths that vary, guard-failure reasons, limit hits,
failures, graph breaks, NEFF update lines and wall-time lines. It is deterministic (one seed), so
figures compare across runs and across versions of neuronkit.

Timings run first without tracing, as wall time (the goal) and this process's CPU time (what a
busy shared machine does not inflate); a second pass measures the peak of Python allocations
with tracemalloc (which slows code, so it is not timed). ``ru_maxrss`` is the process's peak RSS.

    python bench/log_scale.py [--events 100000] [--path /tmp/log.jsonl] [--keep] [--reuse]
"""
from __future__ import annotations

import argparse
import gc
import json
import os
import random
import resource
import sys
import tempfile
import time
import tracemalloc
import warnings
from pathlib import Path
from typing import Any, Callable

import neuronkit as nk
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.text import format_report

GOAL_TOTAL_S = 3.0
GOAL_PEAK_MB = 300.0
GOAL_REPORT_KB = 100.0  # a report of 100k events stays readable: it shows the last events only
REPORT_LIMIT = 50

SITE = "/venv/lib/python3.11/site-packages/transformers"
FUNCTIONS = [  # (name, location, what varies)
    ("forward", f"{SITE}/models/llama/modeling_llama.py:412", "length"),
    ("forward", f"{SITE}/models/llama/modeling_llama.py:268", "length"),
    ("forward", f"{SITE}/models/qwen3/modeling_qwen3.py:440", "batch"),
    ("wrapped_func", f"{SITE}/utils/deprecation.py:121", "cache"),
    ("torch_dynamo_resume_in_forward_at_375", f"{SITE}/models/llama/modeling_llama.py:375",
     "length"),
    ("torch_dynamo_resume_in_forward_at_472", f"{SITE}/models/llama/modeling_llama.py:472",
     "length"),
    ("_update_causal_mask", f"{SITE}/models/llama/modeling_llama.py:590", "length"),
    ("step", "/work/train.py:88", "scalar"),
    ("loss_fn", "/work/train.py:41", "batch"),
    ("compute_loss", f"{SITE}/trainer.py:3790", "length"),
    ("eager kernels", "", "kernels"),
]
RANKS = 8
KINDS = ["recompile"] * 60 + ["first"] * 4 + ["limit_hit"] * 14 + ["eager_fallback"] * 5 + \
    ["failed"] * 3 + ["graph_break"] * 2 + ["kernels"] * 12
OPS = ["aten::embedding", "aten::mul.Tensor", "aten::add.Tensor", "aten::softmax",
       "aten::mm", "aten::cat", "aten::index_select"]


def _shapes(what: str, batch: int, length: int, cache: int) -> dict[str, list[int | str]]:
    if what == "kernels":
        return {}
    shapes: dict[str, list[int | str]] = {"input_ids": [batch, length],
                                          "attention_mask": [batch, length]}
    if what == "cache":
        shapes["cache.layers[0].keys"] = [batch, 8, cache, 64]
        shapes["cache.layers[0].values"] = [batch, 8, cache, 64]
    return shapes


def _reason(rng: random.Random, what: str, graph: int, old: tuple[int, int, int],
            new: tuple[int, int, int]) -> list[str]:
    cid = f"{rng.randrange(40)}/{graph}"
    if what == "scalar":
        return [f"{cid}: L['self'].state.step_int == {old[1]}  # step_int is a Python int"]
    if what == "cache":
        return [f"{cid}: tensor 'L['kwargs']['cache'].layers[0].keys' size mismatch at index 2. "
                f"expected {old[2]}, actual {new[2]}"]
    if what == "batch":
        return [f"{cid}: tensor 'L['input_ids']' size mismatch at index 0. "
                f"expected {old[0]}, actual {new[0]}"]
    return [f"{cid}: tensor 'L['input_ids']' size mismatch at index 1. "
            f"expected {old[1]}, actual {new[1]}"]


def build(path: Path, n: int, seed: int = 0) -> int:
    """Write a synthetic ``n``-event log to ``path`` (streamed: nothing held); returns bytes."""
    rng = random.Random(seed)
    header = {"format": "neuronkit-compile-log", "version": 2, "neuronkit": "0.2.0",
              "torch": "2.9.0", "transformers": "4.57.0", "torch_neuronx": "2.9.0.2.10",
              "device": "neuron", "backend": "neuron", "rank": 0}
    last: dict[tuple[int, int], tuple[int, int, int]] = {}
    graphs: dict[tuple[int, int], int] = {}
    t = 1_760_000_000.0
    with open(path, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(header) + "\n")
        for seq in range(n):
            fi = rng.randrange(len(FUNCTIONS) - 1)
            kind = rng.choice(KINDS)
            if kind == "kernels":
                fi = len(FUNCTIONS) - 1
            name, location, what = FUNCTIONS[fi]
            rank = rng.randrange(RANKS)
            batch = rng.choice((8, 8, 8, 8, 8, 4, 2, 1)) if what == "batch" else 8
            length = rng.choice((128, 256, 384, 512)) + rng.randrange(0, 64, 8)
            cache = length + rng.randrange(1, 33)
            new = (batch, length, cache)
            old = last.get((fi, rank), (8, 128, 160))
            if kind in ("first", "recompile"):
                graphs[fi, rank] = 1 if kind == "first" else graphs.get((fi, rank), 0) + 1
                last[fi, rank] = new
            t += rng.expovariate(1 / 0.8)
            dynamo: dict[str, Any] = {"guard_count": 700 + fi, "graph_node_count": 200 + fi * 3,
                                      "accumulated_cache_size": graphs.get((fi, rank), 0)}
            # what a workload records itself (eager calls, kernels) carries no Dynamo metrics
            metrics: dict[str, Any] = {} if kind in ("eager_fallback", "kernels") else {
                "dynamo": dynamo}
            event: dict[str, Any] = {
                "seq": seq, "compile_id": f"{fi}/{graphs.get((fi, rank), 0)}", "function": name,
                "location": location, "backend": "neuron", "device": "neuron", "started_at": t,
                "duration_s": round(rng.uniform(0.2, 6.0), 6),
                "input_shapes": _shapes(what, *new), "changed": "", "reasons": [],
                "kind": kind, "graph_count": graphs.get((fi, rank), 0), "rank": rank,
                "context": f"step {seq // 40}", "metrics": metrics,
                "calls": 0, "neff_compile_s": None, "neff_cache": None, "kernels": 0, "ops": {},
                "forecast": False}
            if kind == "recompile":
                event["reasons"] = _reason(rng, what, graphs[fi, rank] - 1, old, new)
                event["changed"] = f"input_ids dim 1: {old[1]} -> {new[1]}"
            elif kind == "limit_hit":
                event["reasons"] = _reason(rng, what, 7, old, new)
                metrics["limit"] = {"name": "recompile_limit", "value": 8}
            elif kind == "eager_fallback":
                event["calls"] = rng.randrange(1, 40)
                event["reasons"] = [f"{event['calls']} forward calls ran eager after {name} hit "
                                    "torch._dynamo.config.recompile_limit"]
            elif kind in ("failed", "graph_break"):
                unsupported = rng.random() < 0.7
                dynamo["fail_type"] = "Unsupported" if unsupported else "RuntimeError"
                dynamo["fail_reason"] = ("Attempted to call function marked as skipped: "
                                         "torch._dynamo.disable" if unsupported else
                                         "backend='neuron' raised: RuntimeError: out of memory")
                event["reasons"] = [dynamo["fail_reason"].splitlines()[0]]
            elif kind == "kernels":
                chosen = rng.sample(OPS, rng.randrange(1, 4))
                event["ops"] = {op: rng.randrange(1, 5) for op in chosen}
                event["kernels"] = sum(event["ops"].values())
                event["input_shapes"] = {}
                event["reasons"] = [f"{event['kernels']} new eager-op kernel(s) compiled since "
                                    "the last safe point"]
            fh.write(json.dumps(event) + "\n")
            if kind in ("first", "recompile") and rng.random() < 0.4:
                state = rng.choice(("compiled", "compiled", "disk_hit", "memory_hit"))
                seconds = round(rng.uniform(30, 240), 6) if state == "compiled" else 0.0
                fh.write(json.dumps({"update": seq, "neff_compile_s": seconds,
                                     "neff_cache": state}) + "\n")
            if seq % 5000 == 4999:
                fh.write(json.dumps({"wall_time_s": round(t - 1_760_000_000.0 + 60, 3)}) + "\n")
    return path.stat().st_size


def _steps(path: Path) -> list[tuple[str, Callable[[dict[str, Any]], Any]]]:
    def load(state: dict[str, Any]) -> Any:
        state["log"] = CompileLog.load(path)
        return f"{len(state['log'])} events"

    def summary(state: dict[str, Any]) -> Any:
        state["summary"] = state["log"].summary()
        return f"{len(state['summary'])} rows"

    def diagnose(state: dict[str, Any]) -> Any:
        state["advice"] = nk.diagnose(state["log"])
        return f"{len(state['advice'])} findings"

    def report(state: dict[str, Any]) -> Any:  # the rows and findings just made, as the CLI does
        text = format_report(state["log"], limit=REPORT_LIMIT, advice=state["advice"],
                             summary=state["summary"])
        state["report_kb"] = len(text.encode()) / 1e3
        return (f"limit={REPORT_LIMIT}: {len(text.splitlines())} lines, "
                f"{state['report_kb']:.0f} kB")

    return [("load", load), ("summary", summary), ("diagnose", diagnose),
            ("format_report", report)]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--path", type=Path, default=None,
                        help="where to write the log (default: a temporary file)")
    parser.add_argument("--keep", action="store_true", help="keep the log file afterwards")
    parser.add_argument("--reuse", action="store_true",
                        help="read the log at --path as it is (built by an earlier --keep run)")
    args = parser.parse_args(argv)
    folder = None
    if args.path is None:
        folder = tempfile.mkdtemp(prefix="neuronkit-log-scale-")
        args.path = Path(folder) / "compile.jsonl"
    started = time.perf_counter()
    if args.reuse and args.path.is_file():
        made = "reused"
    else:
        build(args.path, args.events)
        made = f"{args.events} events built in {time.perf_counter() - started:.1f} s"
    print(f"log: {args.path} ({args.path.stat().st_size / 1e6:.1f} MB, {made}; python "
          f"{sys.version.split()[0]}, {os.cpu_count()} cores, load average "
          f"{os.getloadavg()[0]:.1f})")
    warnings.simplefilter("error")  # a clean synthetic log must load without a warning
    try:
        gc.collect()
        start_rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3
        state: dict[str, Any] = {}
        total = cpu_total = 0.0
        for name, step in _steps(args.path):
            t0, c0 = time.perf_counter(), time.process_time()
            what = step(state)
            took, cpu = time.perf_counter() - t0, time.process_time() - c0
            total += took
            cpu_total += cpu
            print(f"  {name:<14} {took:7.3f} s   (cpu {cpu:6.3f} s; {what})")
        ok_total = total < GOAL_TOTAL_S
        print(f"  {'total':<14} {total:7.3f} s   (cpu {cpu_total:6.3f} s) goal < {GOAL_TOTAL_S:.1f} "
              f"s: {'ok' if ok_total else 'MISSED'}")
        rss_mb = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e3  # Linux: kB
        ok_report = state["report_kb"] < GOAL_REPORT_KB
        print(f"  {'report size':<14} {state['report_kb']:7.1f} kB  goal < {GOAL_REPORT_KB:.0f} kB "
              f"(bounded by limit={REPORT_LIMIT}, not by the log): "
              f"{'ok' if ok_report else 'MISSED'}")
        state.clear()
        gc.collect()
        tracemalloc.start()
        for _, step in _steps(args.path):
            step(state)
        peak_mb = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.stop()
        ok_peak = peak_mb < GOAL_PEAK_MB
        print(f"  {'peak memory':<14} {peak_mb:7.1f} MB  (Python allocations, tracemalloc; goal < "
              f"{GOAL_PEAK_MB:.0f} MB: {'ok' if ok_peak else 'MISSED'})")
        print(f"  {'peak RSS':<14} {rss_mb:7.1f} MB  (the whole process in the timed pass, "
              f"{start_rss_mb:.0f} MB of it before the load: Python and its imports)")
    finally:
        if not args.keep:
            args.path.unlink(missing_ok=True)
            if folder:
                os.rmdir(folder)
    return 0 if ok_total and ok_peak and ok_report else 1


if __name__ == "__main__":
    raise SystemExit(main())
