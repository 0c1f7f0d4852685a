"""The dashboard's inputs: the choices it offers and the parsing of what a user types."""
from __future__ import annotations

import random

__all__ = ["CPU_BACKENDS", "DEFAULT_BOUNDARIES", "DEFAULT_PROMPT", "DTYPES", "NO_COMPILE",
           "FOLLOW_REASON", "PADDINGS", "REPLAY_REASON", "SWEEP_ORDERS", "describe_error", "parse_boundaries",
           "sweep_lengths"]

PADDINGS = ("none", "max", "buckets")
SWEEP_ORDERS = ("growing", "random")
CPU_BACKENDS = ("eager", "aot_eager", "inductor")
NO_COMPILE = "none"
DTYPES = ("bfloat16", "float32", "float16")
DEFAULT_BOUNDARIES = "32,64,128"
DEFAULT_PROMPT = "Trainium compiles one graph for every input shape"
REPLAY_REASON = "replay of a saved log: no model is loaded (start a live dashboard to generate)"
FOLLOW_REASON = ("dashboard following a run's logs: no model is loaded (start a live dashboard "
                 "to generate)")


def parse_boundaries(text: str) -> list[int]:
    """``"32, 64,128"`` -> ``[32, 64, 128]``; a clear error for anything else."""
    parts = [p.strip() for p in str(text).replace(";", ",").split(",") if p.strip()]
    try:
        values = sorted({int(p) for p in parts})
    except ValueError:
        values = []
    if not values or values[0] <= 0:
        raise ValueError(f"bucket boundaries must be comma-separated positive token counts such "
                         f"as '32,64,128'; got {text!r}")
    return values


def sweep_lengths(count: int, longest: int, order: str = "growing", seed: int = 0,
                  shortest: int = 8) -> list[int]:
    """Prompt lengths for a sweep: ``count`` lengths up to ``longest``, growing or shuffled."""
    if count < 1:
        raise ValueError(f"a sweep needs at least 1 prompt, got {count}")
    if order not in SWEEP_ORDERS:
        raise ValueError(f"sweep order must be one of {SWEEP_ORDERS}, got {order!r}")
    shortest = max(1, min(shortest, longest))
    if order == "random":
        rng = random.Random(seed)
        return [rng.randint(shortest, longest) for _ in range(count)]
    if count == 1:
        return [longest]
    return [round(shortest + (longest - shortest) * i / (count - 1)) for i in range(count)]


def describe_error(exc: BaseException) -> str:
    """``"TypeName: first line of the message"``."""
    first = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    return f"{type(exc).__name__}: {first}" if first else type(exc).__name__
