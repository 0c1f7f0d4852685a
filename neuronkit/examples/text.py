"""Synthetic text for the demo, the example scripts, the benchmarks and the dashboard's sweep.

Deterministic for a seed, so two runs (or two ranks) see the same lengths.
"""
from __future__ import annotations

import random
from typing import Any

__all__ = ["WORDS", "SWEEP_TEXT", "TRAINING_TEXT", "mixed_texts", "text_of_tokens",
           "training_windows"]

WORDS = ("the quick brown fox jumps over a lazy dog while the compiler builds one graph for "
         "every shape it sees so keep shapes static and pad to buckets").split()
SWEEP_TEXT = ("Trainium compiles one graph for every input shape it meets, so a prompt of a new "
              "length can cost minutes of compilation before the first token appears. Padding "
              "prompts to a few fixed lengths keeps the number of graphs small. ")
TRAINING_TEXT = ("the compiler builds one graph for every input shape it sees so a training run "
                 "that pads each batch to its own length compiles again and again while fixed "
                 "shapes compile once")


def mixed_texts(count: int, seed: int = 0, shortest: int = 2, longest: int = 60) -> list[str]:
    """``count`` texts of ``shortest``..``longest`` random words from :data:`WORDS`."""
    rng = random.Random(seed)
    return [" ".join(rng.choice(WORDS) for _ in range(rng.randint(shortest, longest)))
            for _ in range(count)]


def text_of_tokens(tokenizer: Any, n: int) -> str:
    """A text of exactly ``n`` tokens (without special tokens) for ``tokenizer``: :data:`SWEEP_TEXT`
    repeated and cut."""
    per_repeat = max(1, len(tokenizer(SWEEP_TEXT, add_special_tokens=False)["input_ids"]))
    ids = tokenizer(SWEEP_TEXT * (2 + n // per_repeat), add_special_tokens=False)["input_ids"][:n]
    decoded = tokenizer.decode(ids)
    assert isinstance(decoded, str)  # one sequence of ids decodes to one string
    return decoded


def training_windows(count: int) -> list[str]:
    """``count`` overlapping windows of :data:`TRAINING_TEXT`, 6 to 22 words long."""
    words = TRAINING_TEXT.split()
    return [" ".join(words[i % 7: i % 7 + 6 + (i * 5) % 17]) for i in range(count)]
