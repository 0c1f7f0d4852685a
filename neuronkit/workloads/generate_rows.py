"""The rows of an ``nk.generate`` batch: its prompts left-padded into tensors, the clock that notes
when the prefill ended, and each row's new tokens up to its end of sequence."""
from __future__ import annotations

import time

__all__ = ["FirstTokenClock", "left_padded", "until_eos"]


class FirstTokenClock:
    """Logits processor that notes when the first new token's logits exist (end of prefill).

    On any device but CPU the logits may not be computed yet (CUDA is asynchronous, Neuron
    lazy), so it reads one value back first, which waits for them."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids, scores):
        if self.at is None:
            if scores.device.type != "cpu":
                float(scores[0, 0])  # forces the prefill to finish on an async or lazy device
            self.at = time.perf_counter()
        return scores


def left_padded(rows: list[tuple[int, ...]], width: int, pad_id: int):
    """(input_ids, attention_mask) CPU tensors of shape (len(rows), width), padded on the left."""
    import torch

    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        input_ids[r, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[r, width - len(row):] = 1
    return input_ids, mask


def until_eos(new: list[int], eos: set[int]) -> list[int]:
    """The new tokens of a row up to and including its first eos (the padding after it dropped)."""
    return new[:next((k + 1 for k, t in enumerate(new) if t in eos), len(new))]
