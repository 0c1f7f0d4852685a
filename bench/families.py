"""The family matrix: nk.generate on a tiny model of every causal-LM type of transformers.

For each ``model_type`` in transformers' causal-LM mapping, a child process builds it tiny from
its config (random weights, nothing downloaded: neuronkit/examples/any_family.py) and compares
nk.generate (buckets, batch size, compiled with the ``eager`` backend) with plain model.generate
(neuronkit/examples/family_check.py). Children run in parallel (--jobs), each with a timeout,
OMP_NUM_THREADS=1 and HF_HUB_OFFLINE=1. Writes docs/families.md and docs/families.json.

    python bench/families.py [--types a,b,c] [--jobs 2] [--timeout 180] [--out docs/families.md]

This runs on CPU, not on Neuron: it checks that graphs stay bounded and tokens exact, not what
a Neuron compile of each graph costs.
"""
from __future__ import annotations

import argparse
import dataclasses
import datetime
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from neuronkit.examples.family_check import (  # noqa: E402  (after the path, for a checkout)
    SIX_PROMPTS,
    FamilyOutcome,
    markdown_report,
    outcome_rows,
)

MARK = "FAMILY_OUTCOME "
BUCKETS, BATCH_SIZE, MAX_NEW_TOKENS = (16, 32), 2, 8


def run_one(model_type: str) -> None:
    """The child: check one type and print its outcome as one JSON line."""
    import warnings

    warnings.filterwarnings("ignore")
    from transformers.utils import logging

    from neuronkit.examples.family_check import check_family

    logging.set_verbosity_error()
    row = check_family(model_type, buckets=BUCKETS, batch_size=BATCH_SIZE,
                       max_new_tokens=MAX_NEW_TOKENS)
    print(MARK + json.dumps(dataclasses.asdict(row)), flush=True)


@dataclasses.dataclass
class Child:
    model_type: str
    proc: subprocess.Popen
    stdout: Any      # temporary files, not pipes: a chatty child cannot block on a full pipe
    stderr: Any
    started: float


def start(model_type: str) -> Child:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "TRANSFORMERS_OFFLINE": "1", "TOKENIZERS_PARALLELISM": "false"}
    out, err = tempfile.TemporaryFile(mode="w+"), tempfile.TemporaryFile(mode="w+")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).resolve()), "--one", model_type],
                            stdout=out, stderr=err, text=True, env=env, cwd=ROOT,
                            start_new_session=True)
    return Child(model_type, proc, out, err, time.perf_counter())


def finish(child: Child, timeout: float) -> FamilyOutcome:
    """The child's outcome (it has exited, or is killed after ``timeout`` seconds)."""
    seconds = round(time.perf_counter() - child.started, 2)
    if child.proc.poll() is None:
        os.killpg(child.proc.pid, signal.SIGKILL)
        child.proc.wait()
        return FamilyOutcome(child.model_type, "?", "crashes", f"timed out after {timeout:g} s",
                             seconds=seconds)
    child.stdout.seek(0)
    for line in reversed(child.stdout.read().splitlines()):
        if line.startswith(MARK):
            return FamilyOutcome(**json.loads(line[len(MARK):]))
    child.stderr.seek(0)
    last = [s for s in child.stderr.read().splitlines() if s.strip()][-1:] or [""]
    return FamilyOutcome(child.model_type, "?", "crashes",
                         f"child exited {child.proc.returncode}: {last[0].strip()}", seconds=seconds)


def run_all(types: list[str], jobs: int, timeout: float) -> list[FamilyOutcome]:
    """Every type in its own child, ``jobs`` at a time; one progress line per type."""
    waiting, running, rows = list(types), [], []
    try:
        while waiting or running:
            while waiting and len(running) < jobs:
                running.append(start(waiting.pop(0)))
            time.sleep(0.2)
            for child in list(running):
                if child.proc.poll() is None and time.perf_counter() - child.started < timeout:
                    continue
                running.remove(child)
                row = finish(child, timeout)
                child.stdout.close()
                child.stderr.close()
                rows.append(row)
                print(f"[{len(rows):3d}/{len(types)}] {row.model_type:28s} {row.outcome:20s} "
                      f"{row.graphs}/{row.planned_graphs} {row.seconds:6.1f} s  {row.reason[:90]}",
                      flush=True)
    finally:   # interrupted: no child left running
        for child in running:
            if child.proc.poll() is None:
                os.killpg(child.proc.pid, signal.SIGKILL)
    return rows


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--types", help="comma-separated model types (default: all)")
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--timeout", type=float, default=180.0, help="seconds per type")
    parser.add_argument("--out", default="docs/families.md")
    parser.add_argument("--update", action="store_true",
                        help="re-check --types only; keep the other rows of --out's .json")
    parser.add_argument("--one", help=argparse.SUPPRESS)   # a child: check one type
    args = parser.parse_args()
    if args.one:
        run_one(args.one)
        return
    import torch
    import transformers

    from neuronkit.examples.any_family import causal_lm_types
    from neuronkit.setup.models import load_tokenizer

    types = args.types.split(",") if args.types else causal_lm_types()
    tok = load_tokenizer()
    lengths = sorted(len(tok(p)["input_ids"]) for p in SIX_PROMPTS)
    t0 = time.perf_counter()
    rows = run_all(types, max(1, args.jobs), args.timeout)
    wall = time.perf_counter() - t0
    run = f"{len(types)} types, {args.jobs} jobs, {args.timeout:g} s timeout, {wall / 60:.1f} min"
    if args.update:   # the earlier rows of the types not re-checked, and the earlier run's line
        earlier = json.loads(Path(args.out).with_suffix(".json").read_text())
        rows += [FamilyOutcome(**r) for r in earlier["rows"] if r["model_type"] not in types]
        before, sep, checked = earlier["settings"]["run"].partition("; re-checked since: ")
        run = f"{before}; re-checked since: {checked + ', ' if sep else ''}{', '.join(types)}"
    versions = {"transformers": transformers.__version__, "torch": torch.__version__}
    date = datetime.date.today().isoformat()
    settings = {
        "device": "CPU (not Neuron): graphs and tokens are checked here, not Neuron compile time",
        "backend": "eager (Dynamo's graphs, run by torch: what is compiled, not how fast)",
        "buckets": str(list(BUCKETS)), "batch size": str(BATCH_SIZE),
        "prompts": f"{len(SIX_PROMPTS)}, of {', '.join(map(str, lengths))} tokens",
        "max new tokens": str(MAX_NEW_TOKENS),
        "reference": "plain greedy model.generate per prompt (no padding, not compiled)",
        "models": "tiny random-weight models built from each type's config (no Hub)",
        "run": run,
    }
    out = Path(args.out)
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(markdown_report(rows, versions=versions, date=date, settings=settings))
    out.with_suffix(".json").write_text(json.dumps(
        {**versions, "date": date, "settings": settings, "rows": outcome_rows(rows)}, indent=1) + "\n")
    print(f"wrote {out} and {out.with_suffix('.json')} ({wall / 60:.1f} min)")


if __name__ == "__main__":
    main()
