"""Wall time of ``neuronkit warmup --manifest M -j 1`` vs ``-j 2`` on this machine, side by side.

Records a tiny inductor job with ``--shapes`` distinct input shapes once (its manifest), then
warms its graphs up into a fresh (cold) inductor cache with one process and with two, ``--runs``
times each, interleaved. Prints the median of each, the ratio, and how many graphs each built.
Each warm-up process also pays its own start (Python, torch import, Dynamo tracing of every
graph): the ratio is of the whole command, as a user sees it.

    python bench/parallel_warmup.py --shapes 6 --runs 1
"""
from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

from neuronkit.apps.precompile import INDUCTOR_CACHE_ENV, precompile
from neuronkit.workloads.run_manifest import load_manifest, write_run_manifest

JOB = textwrap.dedent("""
    import sys
    import torch
    torch.manual_seed(0)
    lin = torch.nn.Linear(16, 16)
    @torch.compile(backend="inductor", dynamic=False)
    def f(x):
        return torch.tanh(lin(torch.relu(lin(x)))) * 2
    for n in range(2, 2 + int(sys.argv[1])):
        f(torch.randn(n, 16))
""")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", type=int, default=6, help="distinct shapes: graphs (default 6)")
    parser.add_argument("--runs", type=int, default=1, help="warm-ups of each kind (default 1)")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="parallel-warmup-") as tmp:
        root = Path(tmp)
        (root / "job.py").write_text(JOB)
        command = [sys.executable, "job.py", str(args.shapes)]
        env = {**os.environ, INDUCTOR_CACHE_ENV: str(root / "record-cache")}
        subprocess.run([sys.executable, "-m", "neuronkit", "record", "--log-dir", str(root / "run"),
                        "--", *command], cwd=root, env=env, check=True, capture_output=True)
        here = os.getcwd()
        os.chdir(root)
        try:
            manifest = load_manifest(write_run_manifest(root / "run", command))
        finally:
            os.chdir(here)
        times: dict[int, list[float]] = {1: [], 2: []}
        built: dict[int, list[int]] = {}
        for run in range(args.runs):  # interleaved: the machine's noise falls on both alike
            for jobs in (1, 2):
                result = precompile(manifest, jobs, cache=root / f"cache-{jobs}-{run}")
                if not result.ok:
                    raise SystemExit(f"-j {jobs} failed: {[s.stderr_tail for s in result.shards]}")
                times[jobs].append(result.seconds)
                built[jobs] = [len(s.built) for s in result.shards]
    med = {jobs: statistics.median(t) for jobs, t in times.items()}
    print(f"{manifest.counts['graphs']} graphs, {args.runs} cold warm-up(s) each, "
          f"{os.cpu_count()} CPUs, median wall s:")
    for jobs in (1, 2):
        print(f"  -j {jobs}: {med[jobs]:7.1f} s  (graphs built per shard: {built[jobs]})")
    print(f"-j 2 / -j 1: {med[2] / med[1]:.2f} ({med[1] / med[2]:.2f}x faster)")


if __name__ == "__main__":
    main()
