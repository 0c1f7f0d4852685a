"""Time of ``neuronkit buckets`` on the shipped 10k-request synthetic traffic file
(``notebooks/data/sample_traffic.jsonl``): a fresh process each run (imports included), as a user
runs it. Goal: under 2 s per run. Prints each run's wall time and the median.

    python bench/buckets_cli.py [--runs 5] [--traffic FILE] [EXTRA ARGS...]
"""
from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

GOAL_S = 2.0
SAMPLE = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "sample_traffic.jsonl"


def run_once(traffic: Path, extra: list[str]) -> float:
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "neuronkit", "buckets", str(traffic), *extra],
                   check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - start


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=5)
    parser.add_argument("--traffic", type=Path, default=SAMPLE)
    args, extra = parser.parse_known_args()
    times = [run_once(args.traffic, extra) for _ in range(args.runs)]
    median = statistics.median(times)
    print("runs (s): " + ", ".join(f"{t:.2f}" for t in times))
    print(f"median {median:.2f} s; goal < {GOAL_S:g} s: {'met' if median < GOAL_S else 'MISSED'}")
    return 0 if median < GOAL_S else 1


if __name__ == "__main__":
    raise SystemExit(main())
