"""What in a Trainer's datasets would compile more graphs than one: a partial last batch, and
tokenized examples of varying lengths that the data collator does not pad to one length."""
from __future__ import annotations

import copy
import random
import warnings
from typing import Any

import numpy as np
import torch
from transformers import TrainingArguments

from neuronkit.workloads.shape_audit import (
    batch_signature,
    describe_lengths,
    example_lengths,
    padding_fix,
    pads_to_buckets,
    unpadded_examples_message,
)
from neuronkit.workloads.trainer_args import StaticShapeWarning

__all__ = ["check_static_shapes", "padding_finding"]


def check_static_shapes(args: TrainingArguments, train_dataset: Any = None,
                        eval_dataset: Any = None, *, warn: bool = True,
                        data_collator: Any = None) -> list[str]:
    """What in the datasets would compile more graphs than one, each with its fix (warned too):
    a partial last batch, and tokenized examples of varying lengths that ``data_collator`` (or,
    when None, Trainer's default) does not pad to one length."""
    found = _partial_batch_findings(args, train_dataset, eval_dataset)
    for name, dataset, batch in (("train", train_dataset, args.per_device_train_batch_size),
                                 ("eval", eval_dataset, args.per_device_eval_batch_size)):
        message = padding_finding(dataset, data_collator, batch)
        if message:
            found.append(f"{name}: {message}")
    if warn:
        for message in found:
            warnings.warn(message, StaticShapeWarning, stacklevel=2)
    return found


def _partial_batch_findings(args: TrainingArguments, train_dataset: Any,
                            eval_dataset: Any) -> list[str]:
    """A partial last batch has its own shape, so one more graph (both datasets)."""
    found: list[str] = []
    if args.dataloader_drop_last:
        return found
    world = max(1, int(getattr(args, "world_size", 1) or 1))
    even = getattr(args.accelerator_config, "even_batches", True)
    if world > 1 and even:
        return found      # accelerate loops back to the first examples to fill the last batch
    for name, dataset, batch in (("train", train_dataset, args.per_device_train_batch_size),
                                 ("eval", eval_dataset, args.per_device_eval_batch_size)):
        if dataset is None or not hasattr(dataset, "__len__"):
            continue
        n = len(dataset)
        per_rank = -(-n // world)
        rest = per_rank % batch
        if rest and per_rank > batch:
            found.append(
                f"{name}: {n} examples / batch {batch} leaves a last batch of {rest} -> one extra "
                f"graph (batch dim 0: {batch} -> {rest}), on Neuron one more compile. Set "
                f"dataloader_drop_last=True (drops {rest} examples per epoch) or use "
                f"{per_rank - rest} or {per_rank - rest + batch} examples.")
    return found


def padding_finding(dataset: Any, collator: Any, batch_size: int) -> str | None:
    """None when every batch of ``dataset`` will have one sequence length: its examples are of
    one length, or ``collator`` pads the shortest and the longest alike; else what and the fix."""
    lengths = example_lengths(dataset)
    if not lengths or len(set(lengths)) == 1:
        return None                                    # not tokenized, or padded already
    if collator is None:
        return unpadded_examples_message(lengths, note=(
            " No data_collator was given to check: Trainer's default pads each batch to its "
            "longest, or fails on mixed lengths."))
    shortest, longest = lengths.index(min(lengths)), lengths.index(max(lengths))
    inner = getattr(collator, "data_collator", collator)    # inside Trainer's column remover
    tokenizer = getattr(inner, "tokenizer", None)
    name = getattr(inner, "__name__", type(inner).__name__)
    try:
        shapes = _probe(collator, [dataset[shortest], dataset[longest]], batch_size)
    except Exception as exc:   # the collator's own error, to quote
        error = (str(exc).splitlines() or [""])[0][:160].rstrip(".")
        return (f"input_ids: the examples have {describe_lengths(lengths)}, and the data "
                f"collator ({name}) fails on a batch of the shortest and the longest: "
                f"{type(exc).__name__}: {error}. {padding_fix(lengths, tokenizer)}")
    if len({tuple(sorted(s.items(), key=str)) for s in shapes}) == 1 or pads_to_buckets(collator):
        return None                                    # one length (or buckets, on purpose)
    seen = sorted({s["input_ids"][-1] for s in shapes if s.get("input_ids")})
    return (f"input_ids: the examples have {describe_lengths(lengths)}: tokenized without "
            f'padding="max_length", and the data collator ({name}) pads each batch to its own '
            f"longest (batches of {' or '.join(map(str, seen))} tokens from the shortest and the "
            f"longest example): one graph per batch length, on Neuron one compile each. "
            f"{padding_fix(lengths, tokenizer)}")


def _probe(collator: Any, pair: list[Any], batch_size: int) -> list[dict[Any, tuple[int, ...]]]:
    """Shape signatures of the batches ``collator`` builds from the shortest example alone, the
    longest alone, and the two mixed; global RNGs and the collator's own generator untouched."""
    short, long = pair
    groups = [[short] * batch_size, [long] * batch_size]
    if batch_size > 1:
        groups.append([short] + [long] * (batch_size - 1))
    probe = _probe_copy(collator)
    state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            batches = [probe([copy.deepcopy(x) for x in group]) for group in groups]
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
    return [batch_signature(b) for b in batches]


def _probe_copy(collator: Any) -> Any:
    """A shallow copy of ``collator`` (and of the collator Trainer wraps) without its seeded
    generator, so probing it leaves the masks of the training batches as they were."""
    probe = copy.copy(collator)                       # a function comes back as it is
    inner = getattr(collator, "data_collator", None)
    if inner is not None:
        probe.data_collator = _probe_copy(inner)
    if getattr(probe, "generator", None) is not None:
        probe.generator = None
    return probe
