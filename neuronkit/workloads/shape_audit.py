"""The shape audit: the graphs a data stream would build, counted before anything compiles.

:func:`audit_shapes` reads batches (or a DataLoader) and counts their distinct shapes: with
``dynamic=False`` (what the Neuron backend needs) each is one graph. Given tokenized examples (not
batches), or a DataLoader over them, it also says when they were tokenized without
``padding="max_length"`` and gives the one-line fix.
"""
from __future__ import annotations

import numbers
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = ["audit_shapes", "ShapeAudit", "batch_signature", "example_lengths", "padding_fix",
           "describe_lengths", "suggest_max_length", "unpadded_examples_message",
           "pads_to_buckets"]

TOKEN_KEY = "input_ids"
SCAN_LIMIT = 10_000   # examples read to find their lengths (a datasets.Dataset reads one slice)


def _shape_of(value: Any) -> tuple[int, ...] | None:
    shape = getattr(value, "shape", None)
    if shape is None:
        return None
    try:
        return tuple(int(d) for d in shape)
    except TypeError:
        return None


def batch_signature(batch: Any) -> dict[Any, tuple[int, ...]]:
    """{key: shape} of one batch's tensors (what one compiled graph is specialised on)."""
    return _named_tensors(batch)


def _named_tensors(batch: Any) -> dict[Any, tuple[int, ...]]:
    """{key: shape} for the tensor-like values of one batch (dict, tuple/list, or one tensor)."""
    shape = _shape_of(batch)
    if shape is not None:
        return {"tensor": shape}
    items: Iterable[tuple[Any, Any]]
    if isinstance(batch, Mapping):                       # dict, BatchEncoding, UserDict
        items = batch.items()
    elif isinstance(batch, Sequence) and not isinstance(batch, (str, bytes)):
        items = enumerate(batch)
    else:
        raise TypeError(f"audit_shapes takes batches that are dicts of tensors, tuples/lists of "
                        f"tensors, or tensors; got a {type(batch).__name__}: {batch!r:.80}")
    shapes = {key: _shape_of(v) for key, v in items}
    return {key: s for key, s in shapes.items() if s is not None}


# -- tokenized examples: their lengths and the padding fix ----------------------------------
def _token_count(value: Any) -> int | None:
    """Tokens in one example's ids: a list of ints or a 1-D tensor/array, else None."""
    shape = _shape_of(value)
    if shape is not None:
        return shape[0] if len(shape) == 1 else None
    if isinstance(value, Sequence) and not isinstance(value, (str, bytes)):
        if not value or isinstance(value[0], numbers.Integral):
            return len(value)
    return None


def _example_length(item: Any) -> int | None:
    """Token count of a tokenized example (a dict whose ``input_ids`` are 1-D), else None."""
    if isinstance(item, Mapping) and TOKEN_KEY in item:
        return _token_count(item[TOKEN_KEY])
    return None


def example_lengths(dataset: Any, limit: int = SCAN_LIMIT) -> list[int] | None:
    """``input_ids`` lengths of the first ``limit`` examples of a list of dicts, a
    ``datasets.Dataset`` or a map-style torch Dataset; None when its examples are not tokenized."""
    if dataset is None or isinstance(dataset, (str, bytes, Mapping)):
        return None
    try:
        n = min(len(dataset), limit)
    except TypeError:
        return None
    columns = getattr(dataset, "column_names", None)
    if isinstance(columns, list):                        # datasets.Dataset: one slice, no rows
        if TOKEN_KEY not in columns:
            return None
        values = dataset[:n][TOKEN_KEY]
        counts = [_token_count(v) for v in values]
    else:
        if not hasattr(dataset, "__getitem__"):
            return None
        counts = []
        for i in range(n):
            counts.append(_example_length(dataset[i]))
            if counts[-1] is None:
                return None
    if any(c is None for c in counts):
        return None
    return [int(c) for c in counts if c is not None]


def describe_lengths(lengths: Sequence[int]) -> str:
    """'11 different lengths, 9 to 45 tokens' (or 'one length, 48 tokens')."""
    distinct = len(set(lengths))
    if distinct == 1:
        return f"one length, {lengths[0]} tokens"
    return f"{distinct} different lengths, {min(lengths)} to {max(lengths)} tokens"


def suggest_max_length(longest: int, tokenizer: Any = None) -> tuple[int, str]:
    """(max_length, why): the longest length seen rounded up to a multiple of 8, capped at the
    tokenizer's ``model_max_length`` (the 'no limit' sentinel, a huge int, never caps)."""
    n = max(8, -(-longest // 8) * 8)
    cap = getattr(tokenizer, "model_max_length", None)
    if isinstance(cap, int) and 0 < cap < n:
        return cap, (f"the tokenizer's model_max_length; the longest example seen has {longest} "
                     "tokens and truncation=True cuts it")
    return n, f"the longest example seen, {longest} tokens, rounded up to a multiple of 8"


def padding_fix(lengths: Sequence[int], tokenizer: Any = None) -> str:
    """The one-line fix for examples of these lengths: pad in the tokenizer, or in the collator."""
    n, why = suggest_max_length(max(lengths), tokenizer)
    return (f'Fix: tokenize with tokenizer(texts, padding="max_length", max_length={n}, '
            f"truncation=True) ({n}: {why}), or keep the examples and collate with "
            f"nk.FixedLengthCollator(tokenizer, max_length={n}).")


def unpadded_examples_message(lengths: Sequence[int], tokenizer: Any = None,
                              note: str = "") -> str:
    """What is wrong with tokenized examples of varying lengths (plus ``note``), and the fix."""
    return (f"{TOKEN_KEY}: the examples have {describe_lengths(lengths)}: they were tokenized "
            'without padding="max_length", so a collator that pads each batch to its own longest '
            "(DataCollatorForLanguageModeling, DataCollatorWithPadding's default) builds one graph "
            f"per batch length, on Neuron one compile each.{note} {padding_fix(lengths, tokenizer)}")


def _unwrap_collator(collator: Any) -> Any:
    """The user's collator inside Trainer's RemoveColumnsCollator (or itself)."""
    return getattr(collator, "data_collator", collator)


def pads_to_buckets(collator: Any) -> bool:
    """True for a collator that pads to buckets on purpose (``FixedLengthCollator(buckets=...)``)."""
    return getattr(_unwrap_collator(collator), "buckets", None) is not None


# -- the audit ---------------------------------------------------------------------------------
@dataclass
class ShapeAudit:
    """Distinct shapes per key, the dims that vary, and the graphs ``dynamic=False`` would build.

    ``examples``: the items were tokenized examples, not batches (``shapes`` are then per example
    and ``predicted_graphs`` the most a pad-to-longest collator could build). ``findings``: what
    would compile more graphs than needed, each with its fix.
    """

    shapes: dict[Any, list[tuple[int, ...]]]
    varying_dims: dict[Any, list[int]]
    predicted_graphs: int
    batches: int
    signatures: Counter = field(default_factory=Counter)   # shape signature -> batches with it
    examples: bool = False
    findings: list[str] = field(default_factory=list)

    def _header(self) -> str:
        if not self.examples:
            return (f"{self.batches} batches, {self.predicted_graphs} distinct shape signature(s) "
                    f"-> {self.predicted_graphs} graph(s) with dynamic=False")
        if self.predicted_graphs == 1:
            return (f"{self.batches} tokenized examples (not batches), all one shape -> 1 graph "
                    "with dynamic=False once batched (with a fixed batch size)")
        return (f"{self.batches} tokenized examples (not batches), {self.predicted_graphs} "
                f"distinct shapes -> up to {self.predicted_graphs} graph(s) with dynamic=False "
                "if a collator pads each batch to its longest")

    def __str__(self) -> str:
        lines = [self._header()]
        for key, shapes in self.shapes.items():
            dims = self.varying_dims[key]
            vary = f"dims {dims} vary" if dims else "fixed"
            shown = ", ".join(str(list(s)) for s in shapes[:6])
            more = f", ... ({len(shapes)} in all)" if len(shapes) > 6 else ""
            lines.append(f"  {key}: {vary}; shapes {shown}{more}")
        if self.findings:
            lines += [f"  ! {finding}" for finding in self.findings]
        elif any(self.varying_dims.values()):
            lines.append("  to bound the graphs, pad the varying dims to fixed lengths or buckets "
                         "(nk.Buckets / nk.plan_buckets) and keep the batch size fixed")
        return "\n".join(lines)


def _example_tensors(item: Any) -> dict[Any, tuple[int, ...]]:
    """{key: (length,)} for the token lists and 1-D tensors of one tokenized example."""
    found: dict[Any, tuple[int, ...]] = {}
    for key, value in item.items():
        n = _token_count(value)
        if n is not None:
            found[key] = (n,)
    return found


def _loader_parts(batches: Any) -> tuple[Any, Any]:
    """(dataset, collate_fn) of a DataLoader (or accelerate's wrapper of one), else (None, None)."""
    loader = getattr(batches, "base_dataloader", batches)
    if not hasattr(loader, "collate_fn"):
        return None, None
    return getattr(loader, "dataset", None), loader.collate_fn


def _partial_batch_finding(sizes: list[int]) -> str | None:
    """The short last batch (every earlier batch one size), else None."""
    if len(sizes) < 2 or len(set(sizes[:-1])) != 1 or sizes[-1] >= sizes[0]:
        return None
    return (f"batch size: the last batch holds {sizes[-1]} example(s), the others {sizes[0]}: one "
            "more graph. Drop it: dataloader_drop_last=True (Trainer) or DataLoader(..., "
            "drop_last=True).")


def _length_finding(audit: ShapeAudit, batches: Any) -> str | None:
    """Why the sequence length of ``input_ids`` changes between batches, and the fix."""
    dims = audit.varying_dims.get(TOKEN_KEY, [])
    if not any(d >= 1 for d in dims):
        return None
    dataset, collate = _loader_parts(batches)
    if collate is not None and pads_to_buckets(collate):
        return None                               # bucketed on purpose: one graph per bucket
    seen = sorted({s[1] for s in audit.shapes[TOKEN_KEY] if len(s) > 1})
    tokenizer = getattr(_unwrap_collator(collate), "tokenizer", None)
    lengths = example_lengths(dataset) if dataset is not None else None
    changes = (f"{TOKEN_KEY}: the sequence length (dim 1) changes between batches "
               f"({len(seen)} lengths, {seen[0]} to {seen[-1]}): one graph each.")
    if lengths and len(set(lengths)) > 1:
        return (f"{changes} The dataset's examples have {describe_lengths(lengths)}: tokenized "
                'without padding="max_length", and the collator pads each batch to its own '
                f"longest. {padding_fix(lengths, tokenizer)}")
    return f"{changes} Pad every batch to one length. {padding_fix(seen, tokenizer)}"


def audit_shapes(batches: Iterable[Any]) -> ShapeAudit:
    """Audit an iterable of batches (a list of dicts, a DataLoader, BatchEncodings...) without
    compiling: the distinct shape signatures are the graphs a ``dynamic=False`` compile builds.

    Tokenized examples (dicts with 1-D ``input_ids``: a list of dicts, a ``datasets.Dataset``)
    are audited as examples: lengths that vary are a finding with the ``padding="max_length"``
    fix. To audit what a collator makes of them, pass ``DataLoader(data, batch_size,
    collate_fn=collator)`` (or ``trainer.get_train_dataloader()``)."""
    if isinstance(batches, (str, bytes, Mapping)) or not isinstance(batches, Iterable):
        raise TypeError(f"audit_shapes takes an iterable of batches (a list of dicts or a "
                        f"DataLoader), got a {type(batches).__name__}")
    per_key: dict[Any, set[tuple[int, ...]]] = {}
    signatures: Counter = Counter()
    sizes: list[int] = []                        # batch dim of each batch, in order
    lengths: list[int] = []                      # input_ids length of each example
    examples: bool | None = None
    n = 0
    for batch in batches:
        length = _example_length(batch)
        if examples is None:
            examples = length is not None
        elif examples != (length is not None):
            raise TypeError(f"audit_shapes got a mix of tokenized examples (dicts with 1-D "
                            f"{TOKEN_KEY}) and batches; item {n} is {batch!r:.80}")
        named = _example_tensors(batch) if examples else _named_tensors(batch)
        n += 1
        if length is not None:
            lengths.append(length)
        first = named.get(TOKEN_KEY) or next((s for s in named.values() if s), None)
        if first:
            sizes.append(first[0])
        for key, shape in named.items():
            per_key.setdefault(key, set()).add(shape)
        signatures[tuple(sorted(named.items(), key=lambda kv: str(kv[0])))] += 1
    if n == 0:
        raise ValueError("audit_shapes got no batches: the iterable (or DataLoader) is empty")
    shapes = {key: sorted(s) for key, s in per_key.items()}
    varying = {}
    for key, distinct in shapes.items():
        rank = max(len(s) for s in distinct)
        varying[key] = [d for d in range(rank)
                        if len({s[d] if d < len(s) else None for s in distinct}) > 1]
    audit = ShapeAudit(shapes=shapes, varying_dims=varying, predicted_graphs=len(signatures),
                       batches=n, signatures=signatures, examples=bool(examples))
    audit.findings = _findings(audit, batches, sizes, lengths)
    return audit


def _findings(audit: ShapeAudit, batches: Any, sizes: list[int], lengths: list[int]) -> list[str]:
    """What in the audited stream compiles more graphs than one, each with its fix."""
    if audit.examples:
        return [unpadded_examples_message(lengths)] if len(set(lengths)) > 1 else []
    found = [_partial_batch_finding(sizes), _length_finding(audit, batches)]
    return [f for f in found if f]
