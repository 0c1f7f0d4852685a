"""What a ``generate()`` call will run, decided from token ids before any model runs.

transformers compiles the decode step of ``generate()`` when the cache is static, and that graph
is keyed on the batch size and the static cache length. Left to itself, transformers grows the
cache to the longest request seen so far, so each new longest request recompiles (minutes each
on Neuron) and every later short request pays for the long cache. So each batch is planned:

1. left-padded to its prompt-length bucket (``buckets``), with a short batch filled up to
   ``batch_size`` by dummy rows that are dropped from the result;
2. given its own static cache of length ``cache_length(bucket, max_new_tokens)``;

so the decode graphs are at most ``len(buckets)`` per (batch size, new-token room), whatever the
arrival order. :func:`plan_generation` is pure: plain ints in, a frozen :class:`GenerationPlan` out.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from neuronkit.workloads.shapes import Buckets, plan_buckets

__all__ = ["DEFAULT_BATCH_SIZE", "MIN_NEW_TOKEN_ROOM", "PREFILL_MODES", "GenerationPlan",
           "PlannedBatch", "PlannedGraph", "cache_length", "capped_cache_length", "check_prefill",
           "check_truncate", "plan_generation", "positive", "resolve_buckets"]

DEFAULT_BATCH_SIZE = 4
MIN_NEW_TOKEN_ROOM = 32


def positive(value: Any, name: str) -> int:
    """``value`` if it is a positive int (not a bool), else a ValueError naming ``name``."""
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


PREFILL_MODES = ("compiled", "eager")


def check_prefill(prefill: Any) -> None:
    if prefill not in PREFILL_MODES:
        raise ValueError(f"prefill must be 'compiled' (a graph per batch size and bucket, beside "
                         f"the decode graph) or 'eager' (transformers' own prefill, uncompiled); "
                         f"got {prefill!r}")


def check_truncate(truncate: str | None) -> None:
    if truncate not in (None, "left"):
        raise ValueError(f"truncate must be None or 'left', got {truncate!r}")


def cache_length(bucket: int, max_new_tokens: int) -> int:
    """Static cache length for a prompt bucket: ``bucket`` plus room for the new tokens, the room
    being ``max_new_tokens`` rounded up to a power of two (at least 32). Requests with different
    ``max_new_tokens`` in the same power-of-two band share one decode graph."""
    room = MIN_NEW_TOKEN_ROOM
    while room < max_new_tokens:
        room *= 2
    return bucket + room


def capped_cache_length(bucket: int, max_new_tokens: int, max_positions: int | None) -> int:
    """:func:`cache_length`, capped at the model's positions (an error if they cannot fit)."""
    cache_len = cache_length(bucket, max_new_tokens)
    if max_positions is not None and cache_len > max_positions:
        if bucket + max_new_tokens > max_positions:
            raise ValueError(f"bucket {bucket} + max_new_tokens {max_new_tokens} exceeds the "
                             f"model's {max_positions} positions; use smaller buckets, truncate, or "
                             "fewer new tokens")
        cache_len = max_positions
    return cache_len


def resolve_buckets(buckets: Any, lengths: list[int], graphs_per_bucket: int = 1) -> Buckets | None:
    """None, ``"auto"`` (``plan_buckets`` on ``lengths``, each bucket costing
    ``graphs_per_bucket`` graphs), a list of ints or a :class:`Buckets`."""
    if buckets is None:
        return None
    if isinstance(buckets, str):
        if buckets != "auto":
            raise ValueError(f"buckets must be None, 'auto', a list of ints or a Buckets, "
                             f"got {buckets!r}")
        return plan_buckets(lengths, graphs_per_bucket=graphs_per_bucket)
    return Buckets(buckets)


def _fitted(ids: list[list[int]], buckets: Buckets | None, truncate: str | None) -> list[list[int]]:
    """``ids`` with each prompt longer than the largest bucket cut to its end (``truncate='left'``),
    else a ValueError naming the prompt."""
    if buckets is None:
        return ids
    out = []
    for i, x in enumerate(ids):
        if len(x) > buckets.max:
            if truncate != "left":
                raise ValueError(f"prompt {i} has {len(x)} tokens, longer than the largest "
                                 f"bucket of {buckets!r}; add a bucket >= {len(x)}, or pass "
                                 f"truncate='left' to keep its last {buckets.max} tokens")
            x = x[-buckets.max:]
        out.append(x)
    return out


def _grouped(lengths: list[int], buckets: Buckets | None,
             batch_size: int) -> list[tuple[int, list[int]]]:
    """[(bucket, [prompt indices])]: grouped by bucket (ascending), in arrival order within; with
    no buckets, batches in arrival order, each padded to its own longest prompt."""
    if buckets is None:
        chunks = [list(range(i, min(i + batch_size, len(lengths))))
                  for i in range(0, len(lengths), batch_size)]
        return [(max(lengths[i] for i in chunk), chunk) for chunk in chunks]
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(buckets.fit(n), []).append(i)
    return [(b, idx[i:i + batch_size]) for b, idx in sorted(groups.items())
            for i in range(0, len(idx), batch_size)]


@dataclass(frozen=True)
class PlannedGraph:
    """One graph a call may compile: its kind and the shape it is keyed on."""

    kind: str          # "prefill" (keyed on rows, bucket, cache length) or "decode" (one token)
    rows: int
    bucket: int
    cache_len: int


@dataclass(frozen=True)
class PlannedBatch:
    """One ``model.generate`` call: its prompts, padded shape and static cache length."""

    bucket: int                  # prompt length every row is left-padded to
    prompts: tuple[int, ...]     # indices of the prompts it holds, in arrival order
    rows: int                    # batch rows: the prompts, then dummy rows up to batch_size
    cache_len: int               # static cache length
    prefill: bool = False        # the prefill runs compiled too (a graph of its own)

    @property
    def row_prompts(self) -> tuple[int, ...]:
        """The prompt in each row: a dummy row repeats the first prompt (its output is dropped)."""
        return self.prompts + (self.prompts[0],) * (self.rows - len(self.prompts))

    @property
    def shape(self) -> tuple[int, int]:
        """(bucket, cache length): what a batch must share with an earlier one to reuse its graphs."""
        return self.bucket, self.cache_len

    def graphs(self) -> tuple[PlannedGraph, ...]:
        """The graphs this batch needs compiled: its prefill (when compiled) and decode step."""
        decode = PlannedGraph("decode", self.rows, self.bucket, self.cache_len)
        if not self.prefill:
            return (decode,)
        return PlannedGraph("prefill", self.rows, self.bucket, self.cache_len), decode


@dataclass(frozen=True)
class GenerationPlan:
    """Everything a ``generate()`` call decides before a model runs."""

    token_ids: tuple[tuple[int, ...], ...]   # per prompt, after truncation
    buckets: Buckets | None                  # None: each batch padded to its own longest prompt
    batch_size: int
    max_new_tokens: int
    batches: tuple[PlannedBatch, ...]
    graphs: tuple[PlannedGraph, ...]         # distinct graphs the batches need; () when not compiling

    @property
    def planned_graphs(self) -> int:
        """The most graphs the call could compile."""
        return len(self.graphs)

    def padding_waste(self, batches_done: int | None = None) -> float:
        """Padded fraction of all prompt positions (dummy rows included) of the first
        ``batches_done`` batches (all of them by default)."""
        done = self.batches[:batches_done]
        positions = sum(b.rows * b.bucket for b in done)
        real = sum(len(self.token_ids[i]) for b in done for i in b.prompts)
        return 1.0 - real / positions if positions else 0.0


def plan_generation(token_ids: Sequence[Sequence[int]], max_new_tokens: int,
                    buckets: Buckets | list[int] | str | None = None, batch_size: int | None = None,
                    *, truncate: str | None = None, max_positions: int | None = None,
                    compile: bool = True, prefill: str = "compiled") -> GenerationPlan:
    """The plan of a ``generate()`` call over prompts of these token ids (at least one each).

    ``buckets``, ``batch_size`` and ``truncate`` as ``nk.generate`` takes them (``batch_size``
    None: ``min(len(token_ids), 4)``); ``max_positions``: the model's positions, which cap the
    cache lengths (None: no cap); ``compile=False`` plans no graphs; ``prefill="compiled"``
    plans a prefill graph beside each decode graph, ``"eager"`` the decode graphs only.
    """
    check_prefill(prefill)
    max_new_tokens = positive(max_new_tokens, "max_new_tokens")
    check_truncate(truncate)
    batch_size = positive(batch_size if batch_size is not None
                          else min(len(token_ids), DEFAULT_BATCH_SIZE), "batch_size")
    ids = [list(x) for x in token_ids]
    for i, x in enumerate(ids):
        if not x:
            raise ValueError(f"prompt {i} has no tokens")
    compiled_prefill = compile and prefill == "compiled"
    resolved = resolve_buckets(buckets, [len(x) for x in ids], 2 if compiled_prefill else 1)
    ids = _fitted(ids, resolved, truncate)
    batches = tuple(PlannedBatch(bucket, tuple(chunk), batch_size,
                                 capped_cache_length(bucket, max_new_tokens, max_positions),
                                 prefill=compiled_prefill)
                    for bucket, chunk in _grouped([len(x) for x in ids], resolved, batch_size))
    graphs = tuple(dict.fromkeys(g for b in batches for g in b.graphs())) if compile else ()
    return GenerationPlan(token_ids=tuple(tuple(x) for x in ids), buckets=resolved,
                          batch_size=batch_size, max_new_tokens=max_new_tokens, batches=batches,
                          graphs=graphs)
