"""Writes ``sample_traffic.jsonl``: 10,000 SYNTHETIC serving requests for ``neuronkit buckets``
and the notebooks. Not recorded from any server: prompt and output token counts are drawn from
log-normal distributions (a long tail: most prompts a few hundred tokens, a few near 8k), with a
fixed seed. The first line is a header saying so, and every request carries ``"synthetic": true``.

    python notebooks/data/make_traffic.py [OUT_FILE]     (default: sample_traffic.jsonl here)
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import numpy as np

HERE = Path(__file__).resolve().parent
REQUESTS = 10_000
MAX_PROMPT, MAX_OUTPUT = 8192, 2048
HEADER = {"header": "SYNTHETIC traffic: 10,000 requests drawn by notebooks/data/make_traffic.py "
                    "(log-normal prompt and output token counts, seed 42), not recorded from a "
                    "server", "synthetic": True}


def requests(n: int = REQUESTS, seed: int = 42) -> list[dict[str, int | bool]]:
    """``n`` requests: prompt tokens ~ log-normal (median ~250, long tail, capped at 8192),
    output tokens ~ log-normal (median ~120, capped at 2048)."""
    rng = np.random.default_rng(seed)
    prompt = np.clip(rng.lognormal(np.log(250), 0.9, n), 1, MAX_PROMPT).astype(int)
    output = np.clip(rng.lognormal(np.log(120), 0.8, n), 1, MAX_OUTPUT).astype(int)
    return [{"prompt_tokens": int(p), "output_tokens": int(o), "synthetic": True}
            for p, o in zip(prompt, output, strict=True)]


def main(out: Path = HERE / "sample_traffic.jsonl") -> Path:
    lines = [json.dumps(HEADER)] + [json.dumps(r) for r in requests()]
    out.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return out


if __name__ == "__main__":
    print(main(*(Path(a) for a in sys.argv[1:2])))
