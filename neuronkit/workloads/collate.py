"""Fixed-length batches for causal-LM training: every batch one shape, so one graph.

    collator = nk.FixedLengthCollator(tokenizer, max_length=128)
    collator = nk.FixedLengthCollator(tokenizer, buckets=[64, 128, 256])
"""
from __future__ import annotations

import operator
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import torch

from neuronkit.setup.models import pad_token_id
from neuronkit.workloads.shapes import Buckets

__all__ = ["FixedLengthCollator", "IGNORE_INDEX", "token_ids"]

IGNORE_INDEX = -100  # the label the loss skips


class FixedLengthCollator:
    """Causal-LM batches padded (on the right) to one fixed length, or to the smallest bucket.

    Examples are dicts with ``input_ids`` (optionally ``labels``: integer ids, never rounded),
    dicts with ``text``, or strings (tokenized here). Labels are the input ids with -100 on
    padding. An example longer than the limit raises unless ``truncation=True``, which keeps its
    first ``limit`` tokens (the end is dropped) and the same positions of its given ``labels``,
    so they stay aligned.
    """

    def __init__(self, tokenizer: Any, max_length: int | None = None,
                 buckets: Buckets | Sequence[int] | None = None, truncation: bool = False):
        if (max_length is None) == (buckets is None):
            raise ValueError("FixedLengthCollator needs exactly one of max_length=N (every batch "
                             "padded to N) or buckets=[...] (each batch padded to its bucket)")
        self.tokenizer = tokenizer
        self.buckets = Buckets(buckets) if buckets is not None else None
        if max_length is not None and (isinstance(max_length, bool) or
                                       not isinstance(max_length, int) or max_length < 1):
            raise ValueError(f"max_length must be a positive int, got {max_length!r}")
        self.max_length = max_length
        self.truncation = bool(truncation)
        self.pad_token_id = pad_token_id(tokenizer)

    @property
    def limit(self) -> int:
        if self.max_length is not None:
            return self.max_length
        assert self.buckets is not None  # __init__ requires one of the two
        return self.buckets.max

    def __repr__(self) -> str:
        target = f"max_length={self.max_length}" if self.max_length else f"buckets={self.buckets!r}"
        return f"FixedLengthCollator({target}, truncation={self.truncation})"

    def _ids(self, example: Any, index: int) -> tuple[list[int], list[int] | None]:
        if isinstance(example, str):
            return list(self.tokenizer(example)["input_ids"]), None
        if isinstance(example, Mapping):
            if "input_ids" in example:
                labels = example.get("labels")
                return (token_ids(example["input_ids"], index, "input_ids"),
                        token_ids(labels, index, "labels") if labels is not None else None)
            if "text" in example:
                return list(self.tokenizer(example["text"])["input_ids"]), None
            raise ValueError(
                f"example {index} has keys {sorted(example)}, but FixedLengthCollator needs "
                "'input_ids' or 'text'. With a datasets.Dataset, Trainer drops columns the model "
                "does not take: pass remove_unused_columns=False to keep 'text'.")
        raise TypeError(f"example {index} is a {type(example).__name__}; FixedLengthCollator "
                        "takes dicts with 'input_ids' or 'text', or strings")

    def __call__(self, examples: Sequence[Any]) -> dict[str, torch.Tensor]:
        if not examples:
            raise ValueError("FixedLengthCollator got an empty batch")
        rows = []
        for i, example in enumerate(examples):
            ids, labels = self._ids(example, i)
            if labels is not None and len(labels) != len(ids):
                raise ValueError(f"example {i}: labels has {len(labels)} tokens but input_ids has "
                                 f"{len(ids)}")
            if len(ids) > self.limit:
                if not self.truncation:
                    what = f"max_length={self.max_length}" if self.max_length else \
                        f"the largest bucket ({self.limit}) of {self.buckets!r}"
                    raise ValueError(
                        f"example {i} has {len(ids)} tokens, longer than {what}. Shorten it, raise "
                        f"the limit, or pass truncation=True to keep its first {self.limit} tokens.")
                ids = ids[:self.limit]
                labels = labels[:self.limit] if labels is not None else None
            rows.append((ids, labels if labels is not None else list(ids)))
        longest = max(len(ids) for ids, _ in rows)
        if self.max_length is not None:
            length = self.max_length
        else:
            assert self.buckets is not None  # __init__ requires one of the two
            length = self.buckets.fit(max(longest, 1))
        input_ids = torch.full((len(rows), length), self.pad_token_id, dtype=torch.long)
        target = torch.full((len(rows), length), IGNORE_INDEX, dtype=torch.long)
        attention = torch.zeros((len(rows), length), dtype=torch.long)
        for r, (ids, lab) in enumerate(rows):
            n = len(ids)
            input_ids[r, :n] = torch.tensor(ids, dtype=torch.long)
            target[r, :n] = torch.tensor(lab, dtype=torch.long)
            attention[r, :n] = 1
        return {"input_ids": input_ids, "attention_mask": attention, "labels": target}


def token_ids(value: Any, index: int, field: str) -> list[int]:
    """Token ids as a list of int: ints, or integer numpy / torch values (a float, a bool or
    text is an error naming the example and the field, never truncated to an int)."""
    if isinstance(value, torch.Tensor):
        value = value.reshape(-1).tolist()      # Python ints, or floats / bools to refuse
    if isinstance(value, (str, bytes)):
        raise TypeError(f"example {index}: {field} is a {type(value).__name__} ({value!r:.40}), "
                        "not a list of token ids; to have the collator tokenize text, pass "
                        "{'text': ...} or the string itself")
    if not isinstance(value, Iterable):
        raise TypeError(f"example {index}: {field} is a {type(value).__name__}, not a list of "
                        f"token ids ({value!r:.40}); pass e.g. {field}=[1, 2, 3]")
    ids = []
    for k, v in enumerate(value):
        try:
            if isinstance(v, bool):             # an int to Python, never a token id
                raise TypeError(v)
            ids.append(operator.index(v))      # ints, numpy / torch integers; not 1.7, not 6.0
        except TypeError:
            raise TypeError(f"example {index}: {field}[{k}] is {v!r:.40} ({type(v).__name__}), "
                            "not an integer token id: token ids are ints (or integer numpy / "
                            "torch values), never rounded") from None
    return ids
