"""Static shapes: length buckets, a bucket planner, and a shape audit of batches.

With ``dynamic=False`` (what the Neuron backend needs) every new input shape is a new graph, and
on Neuron each graph costs minutes of compilation. Padding every sequence up to one of a few fixed
lengths (buckets) bounds the number of graphs; :func:`plan_buckets` picks the lengths that trade
compile time against padded tokens, and :func:`audit_shapes` counts the graphs a data stream would
build before anything is compiled.
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
           "DEFAULT_TOKEN_COST_S"]


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


@dataclass
class ShapeAudit:
    """Distinct shapes per key, the dims that vary, and the graphs ``dynamic=False`` would build."""

    shapes: dict[Any, list[tuple[int, ...]]]
    varying_dims: dict[Any, list[int]]
    predicted_graphs: int
    batches: int
    signatures: Counter = field(default_factory=Counter)   # shape signature -> batches with it

    def __str__(self) -> str:
        lines = [f"{self.batches} batches, {self.predicted_graphs} distinct shape signature(s) "
                 f"-> {self.predicted_graphs} graph(s) with dynamic=False"]
        for key, shapes in self.shapes.items():
            dims = self.varying_dims[key]
            vary = f"dims {dims} vary" if dims else "fixed"
            shown = ", ".join(str(list(s)) for s in shapes[:6])
            more = f", ... ({len(shapes)} in all)" if len(shapes) > 6 else ""
            lines.append(f"  {key}: {vary}; shapes {shown}{more}")
        if any(self.varying_dims.values()):
            lines.append("  to bound the graphs, pad the varying dims to fixed lengths or buckets "
                         "(nk.Buckets / nk.plan_buckets) and keep the batch size fixed")
        return "\n".join(lines)


def audit_shapes(batches: Iterable[Any]) -> ShapeAudit:
    """Audit an iterable of batches (a list of dicts, a DataLoader, BatchEncodings...) without
    compiling: the distinct shape signatures are the graphs a ``dynamic=False`` compile builds."""
    if isinstance(batches, (str, bytes, Mapping)) or not isinstance(batches, Iterable):
        raise TypeError(f"audit_shapes takes an iterable of batches (a list of dicts or a "
                        f"DataLoader), got a {type(batches).__name__}")
    per_key: dict[Any, set[tuple[int, ...]]] = {}
    signatures: Counter = Counter()
    n = 0
    for batch in batches:
        named = _named_tensors(batch)
        n += 1
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
    return ShapeAudit(shapes=shapes, varying_dims=varying, predicted_graphs=len(signatures),
                      batches=n, signatures=signatures)
