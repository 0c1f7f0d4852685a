"""Warm-call cost of an active CompileRecorder: goal <= 1.01 x the time without it.

A small compiled MLP block and a one-line function (eager backend, dynamic=False; on the latter
Dynamo's own per-call work dominates) are compiled once, then called warm in interleaved rounds
(A = no recorder, B = recorder active, in A B B A order so drift hits both sides alike) in one
process. Each sample times --calls calls; the script prints the median per-call time of each
side and their ratio. (Warm calls emit no trace records, so the recorder
has nothing to do on them; this checks that it stays so.)

    python bench/recorder_overhead.py [--rounds 30] [--calls 300]
"""
from __future__ import annotations

import argparse
import statistics
import time

import torch

import neuronkit as nk


class Block(torch.nn.Module):
    def __init__(self, width: int = 64) -> None:
        super().__init__()
        self.up = torch.nn.Linear(width, 4 * width)
        self.down = torch.nn.Linear(4 * width, width)
        self.norm = torch.nn.LayerNorm(width)

    def forward(self, x):
        return self.norm(x + self.down(torch.nn.functional.gelu(self.up(x))))


def per_call_s(fn, x, calls: int) -> float:
    start = time.perf_counter()
    for _ in range(calls):
        fn(x)
    return (time.perf_counter() - start) / calls


def compare(name: str, fn, x, rounds: int, calls: int) -> None:
    rec = nk.CompileRecorder()
    with torch.no_grad():
        with rec:
            fn(x)  # compile once, recorded
        assert len(rec.events) == 1, rec.events
        for _ in range(3):
            per_call_s(fn, x, calls)  # warm up
        without, with_rec = [], []
        for _ in range(rounds):
            without.append(per_call_s(fn, x, calls))
            with rec:
                with_rec.append(per_call_s(fn, x, calls))
                with_rec.append(per_call_s(fn, x, calls))
            without.append(per_call_s(fn, x, calls))
    assert len(rec.events) == 1, "a warm call was recorded as a compile"
    a, b = statistics.median(without), statistics.median(with_rec)
    print(f"{name}: no recorder {a * 1e6:8.2f} us | recorder active {b * 1e6:8.2f} us | "
          f"ratio {b / a:.4f} (goal <= 1.01)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=30, help="A B B A rounds (default 30)")
    parser.add_argument("--calls", type=int, default=300, help="warm calls per round (default 300)")
    args = parser.parse_args()
    torch.manual_seed(0)
    torch.set_num_threads(1)
    print(f"median per warm call, {2 * args.rounds} samples a side (A B B A), "
          f"{args.calls} calls a sample")
    block = torch.compile(Block().eval(), backend="eager", dynamic=False)
    compare("MLP block (4x16x64)", block, torch.randn(4, 16, 64), args.rounds, args.calls)
    tiny = torch.compile(lambda t: t * 2 + 1, backend="eager", dynamic=False)
    compare("x * 2 + 1 on 8 floats", tiny, torch.randn(8), args.rounds, args.calls * 10)


if __name__ == "__main__":
    main()
