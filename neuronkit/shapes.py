"""Static shapes: length buckets, a bucket planner, and a shape audit of batches.

With ``dynamic=False`` (what the Neuron backend needs) every new input shape is a new graph, and
on Neuron each graph costs minutes of compilation. Padding every sequence up to one of a few fixed
lengths (buckets) bounds the number of graphs; :func:`plan_buckets` picks the lengths that trade
compile time against padded tokens, and :func:`audit_shapes` counts the graphs a data stream would
build before anything is compiled. Given tokenized examples (not batches), or a DataLoader over them,
it also says when they were tokenized without ``padding="max_length"`` and gives the one-line fix.
"""
from __future__ import annotations

import math
import numbers
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

DEFAULT_COMPILE_COST_S = 60.0
# Device seconds one padded prompt token costs: its share of prefill plus its slot in the static
# cache that every decode step reads, roughly 1 ms for a ~1B-parameter model on one NeuronCore.
# A workload served many times pays its padding every time: multiply by the expected repeats.
DEFAULT_TOKEN_COST_S = 1e-3

__all__ = ["Buckets", "plan_buckets", "plan_cost", "audit_shapes", "ShapeAudit",
           "DEFAULT_TOKEN_COST_S", "example_lengths", "padding_fix"]

TOKEN_KEY = "input_ids"
SCAN_LIMIT = 10_000   # examples read to find their lengths (a datasets.Dataset reads one slice)


def _as_length(value: Any, what: str) -> int:
    """A positive int (bools, floats and strings are rejected), else a clear error."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a positive int, got the bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be a positive int, got {value!r} "
                        f"({type(value).__name__})") from None
    if n <= 0:
        raise ValueError(f"{what} must be a positive int, got {n}")
    return n


class Buckets:
    """Sorted, distinct, positive sequence lengths; ``fit(n)`` is the smallest one >= ``n``."""

    def __init__(self, boundaries: Iterable[int]):
        if isinstance(boundaries, Buckets):
            boundaries = boundaries.boundaries
        if isinstance(boundaries, (str, bytes)) or not isinstance(boundaries, Iterable):
            raise TypeError(f"Buckets takes a list of positive ints such as [32, 64, 128], "
                            f"got {boundaries!r}")
        values = [_as_length(b, "each bucket boundary") for b in boundaries]
        if not values:
            raise ValueError("Buckets needs at least one boundary, e.g. Buckets([32, 64, 128])")
        dupes = sorted(b for b, c in Counter(values).items() if c > 1)
        if dupes:
            raise ValueError(f"bucket boundaries must be distinct; repeated: {dupes}")
        self.boundaries: tuple[int, ...] = tuple(sorted(values))

    @property
    def max(self) -> int:
        return self.boundaries[-1]

    def fit(self, n: int) -> int:
        """The smallest boundary >= ``n``; ValueError when ``n`` is longer than every bucket."""
        n = _as_length(n, "the length to fit")
        for b in self.boundaries:
            if b >= n:
                return b
        raise ValueError(f"length {n} is longer than the largest bucket of {self!r}; add a "
                         f"bucket >= {n} or truncate the input to {self.max}")

    def padding(self, lengths: Iterable[int]) -> int:
        """Padded positions when each length is padded up to its bucket: sum(fit(n) - n)."""
        return sum(self.fit(n) - n for n in lengths)

    def __iter__(self) -> Iterator[int]:
        return iter(self.boundaries)

    def __len__(self) -> int:
        return len(self.boundaries)

    def __contains__(self, n: object) -> bool:
        return n in self.boundaries

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Buckets):
            return self.boundaries == other.boundaries
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.boundaries)

    def __repr__(self) -> str:
        return f"Buckets({list(self.boundaries)})"


def _costs(compile_cost_s: Any, token_cost_s: Any) -> tuple[float, float]:
    """Both costs as floats: finite numbers of seconds >= 0, else a clear error."""
    out = []
    for name, cost, default in (("compile_cost_s", compile_cost_s, DEFAULT_COMPILE_COST_S),
                                ("token_cost_s", token_cost_s, DEFAULT_TOKEN_COST_S)):
        if isinstance(cost, bool) or not isinstance(cost, numbers.Real):
            raise TypeError(f"{name} must be a number of seconds >= 0, got {cost!r} "
                            f"({type(cost).__name__}); the default is {default}")
        if not math.isfinite(cost) or cost < 0:
            raise ValueError(f"{name} must be a finite number of seconds >= 0, got {cost!r}; "
                             f"pass a measured or estimated cost (the default is {default}), "
                             "0 to ignore that side of the trade-off")
        out.append(float(cost))
    return out[0], out[1]


def plan_cost(lengths: Iterable[int], buckets: Buckets | Sequence[int],
              compile_cost_s: float = DEFAULT_COMPILE_COST_S,
              token_cost_s: float = DEFAULT_TOKEN_COST_S) -> float:
    """What :func:`plan_buckets` minimises: buckets x compile cost + padded tokens x token cost."""
    compile_cost_s, token_cost_s = _costs(compile_cost_s, token_cost_s)
    buckets = Buckets(buckets)
    return len(buckets) * compile_cost_s + buckets.padding(lengths) * token_cost_s


def plan_buckets(lengths: Iterable[int], max_buckets: int | None = None,
                 compile_cost_s: float = DEFAULT_COMPILE_COST_S,
                 token_cost_s: float = DEFAULT_TOKEN_COST_S, multiple_of: int = 1) -> Buckets:
    """Bucket boundaries minimising ``len(buckets) * compile_cost_s + padding * token_cost_s``.

    ``padding`` is ``sum(bucket(n) - n)`` over the observed ``lengths`` (each one a request), so
    a length seen often weighs more. Each bucket is one graph to compile. Boundaries are observed
    lengths rounded up to ``multiple_of``; the largest always covers ``max(lengths)``. The answer
    is exact: dynamic programming over the k sorted distinct lengths, O(k^2), or O(k^2 * m) for
    the best plan with at most ``max_buckets=m`` buckets. Ties go to fewer buckets.
    """
    if isinstance(lengths, (str, bytes)) or not isinstance(lengths, Iterable):
        raise TypeError(f"plan_buckets takes a list of positive int lengths, got {lengths!r}")
    values = [_as_length(n, "each length") for n in lengths]
    if not values:
        raise ValueError("plan_buckets needs at least one observed length")
    step = _as_length(multiple_of, "multiple_of")
    if max_buckets is not None:
        max_buckets = _as_length(max_buckets, "max_buckets")
    compile_cost_s, token_cost_s = _costs(compile_cost_s, token_cost_s)

    rounded = Counter(-(-n // step) * step for n in values)   # candidate boundary -> count
    cands = np.array(sorted(rounded), dtype=np.float64)
    count = np.array([rounded[int(v)] for v in cands], dtype=np.float64)
    # a bucket at cands[i] holding candidates j+1..i pads sum c_t (v_i - v_t), plus the rounding
    pre_c = np.concatenate([[0.0], np.cumsum(count)])
    pre_s = np.concatenate([[0.0], np.cumsum(count * cands)])
    k = len(cands)

    def group_cost(i: int) -> np.ndarray:
        """Cost of one bucket at cands[i-1] holding candidates j..i-1, for every cut j < i."""
        j = np.arange(i)
        padded = cands[i - 1] * (pre_c[i] - pre_c[j]) - (pre_s[i] - pre_s[j])
        return compile_cost_s + token_cost_s * padded

    def pick(total: np.ndarray, buckets_used: np.ndarray) -> int:
        """Index of the cheapest total; among (near-)ties the one with the fewest buckets."""
        low = total.min()
        tied = np.flatnonzero(total <= low + 1e-9 * max(1.0, abs(low)))
        return int(tied[np.argmin(buckets_used[tied])])

    if max_buckets is None or max_buckets >= k:
        # best[i]: cheapest cover of the first i candidates, any number of buckets: O(k^2)
        best, used, back = np.zeros(k + 1), np.zeros(k + 1, dtype=np.int64), [0] * (k + 1)
        for i in range(1, k + 1):
            total = best[:i] + group_cost(i)
            j = pick(total, used[:i])
            best[i], used[i], back[i] = total[j], used[j] + 1, j
        chosen, i = [], k
        while i > 0:
            chosen.append(int(cands[i - 1]))
            i = back[i]
        return Buckets(chosen)

    # best_m[b][i]: cheapest cover of the first i candidates with exactly b buckets: O(k^2 * m)
    m = max_buckets
    best_m = np.full((m + 1, k + 1), np.inf)
    back_m = np.zeros((m + 1, k + 1), dtype=np.int64)
    best_m[0][0] = 0.0
    for i in range(1, k + 1):
        cost_i = group_cost(i)
        for b in range(1, min(m, i) + 1):
            total = best_m[b - 1][:i] + cost_i
            j = int(np.argmin(total))
            best_m[b][i], back_m[b][i] = total[j], j
    b = 1 + pick(best_m[1:, k], np.arange(m))
    chosen, i = [], k
    while b > 0:
        chosen.append(int(cands[i - 1]))
        i, b = int(back_m[b][i]), b - 1
    return Buckets(chosen)


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
