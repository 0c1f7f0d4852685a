"""Texts for the training and shape tests, tokenized the usual way."""
from __future__ import annotations

from typing import Any

TEXTS = ["Trainium compiles a graph.", "Short batches.",
         "Every new input shape is a new graph to compile.",
         "A batch padded to its own longest sentence has its own length, and so its own shape."]


def ragged(tok: Any) -> list[dict]:
    """The texts tokenized the usual way, tokenizer(texts): one length per text."""
    return [{"input_ids": ids} for ids in tok(TEXTS)["input_ids"]]
