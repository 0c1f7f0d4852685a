"""Static shapes: length buckets and a bucket planner.

With ``dynamic=False`` (what the Neuron backend needs) every new input shape is a new graph, and
on Neuron each graph costs minutes of compilation. Padding every sequence up to one of a few fixed
lengths (buckets) bounds the number of graphs; :func:`plan_buckets` picks the lengths that trade
compile time against padded tokens. The audit of a data stream's shapes: ``shape_audit.py``.
"""
from __future__ import annotations

import math
import numbers
import operator
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

import numpy as np

DEFAULT_COMPILE_COST_S = 60.0
# Device seconds one padded prompt token costs: its share of prefill plus its slot in the static
# cache that every decode step reads, roughly 1 ms for a ~1B-parameter model on one NeuronCore.
# A workload served many times pays its padding every time: multiply by the expected repeats.
DEFAULT_TOKEN_COST_S = 1e-3

__all__ = ["Buckets", "checked_costs", "plan_buckets", "plan_cost", "DEFAULT_COMPILE_COST_S",
           "DEFAULT_TOKEN_COST_S", "MAX_LENGTH"]


MAX_LENGTH = 2 ** 63 - 1  # the largest size a tensor dim can hold


def _as_length(value: Any, what: str) -> int:
    """A positive int up to :data:`MAX_LENGTH` (bools, floats and strings are rejected), else a
    clear error."""
    if isinstance(value, bool):
        raise TypeError(f"{what} must be a positive int, got the bool {value!r}")
    try:
        n = operator.index(value)
    except TypeError:
        raise TypeError(f"{what} must be a positive int, got {value!r} "
                        f"({type(value).__name__})") from None
    if n <= 0:
        raise ValueError(f"{what} must be a positive int, got {n}")
    if n > MAX_LENGTH:
        raise ValueError(f"{what} must be at most 2**63 - 1 (the largest tensor dim), got {n}")
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


def checked_costs(compile_cost_s: Any, token_cost_s: Any) -> tuple[float, float]:
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
    compile_cost_s, token_cost_s = checked_costs(compile_cost_s, token_cost_s)
    buckets = Buckets(buckets)
    return len(buckets) * compile_cost_s + buckets.padding(lengths) * token_cost_s


def plan_buckets(lengths: Iterable[int], max_buckets: int | None = None,
                 compile_cost_s: float = DEFAULT_COMPILE_COST_S,
                 token_cost_s: float = DEFAULT_TOKEN_COST_S, multiple_of: int = 1,
                 graphs_per_bucket: int = 1) -> Buckets:
    """Bucket boundaries minimising ``len(buckets) * graphs_per_bucket * compile_cost_s +
    padding * token_cost_s``.

    ``padding`` is ``sum(bucket(n) - n)`` over the observed ``lengths`` (each one a request), so
    a length seen often weighs more. Each bucket is ``graphs_per_bucket`` graphs to compile: 1 for
    a decode graph alone, 2 for ``nk.generate``'s compiled prefill and decode (what
    ``buckets="auto"`` passes). Boundaries are observed
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
    compile_cost_s, token_cost_s = checked_costs(compile_cost_s, token_cost_s)
    compile_cost_s *= _as_length(graphs_per_bucket, "graphs_per_bucket")

    rounded = Counter(-(-n // step) * step for n in values)   # candidate boundary -> count
    bounds = sorted(rounded)                                   # exact ints: the boundaries
    # padded tokens are counted exactly: in int64 where the sums fit, else in Python ints
    exact = np.int64 if bounds[-1] * len(values) < 2 ** 62 else object
    cands = np.array(bounds, dtype=exact)
    count = np.array([rounded[b] for b in bounds], dtype=exact)
    # a bucket at cands[i] holding candidates j+1..i pads sum c_t (v_i - v_t), plus the rounding
    pre_c = np.concatenate([np.zeros(1, dtype=exact), np.cumsum(count)])
    pre_s = np.concatenate([np.zeros(1, dtype=exact), np.cumsum(count * cands)])
    k = len(cands)

    def group_cost(i: int) -> np.ndarray:
        """Cost of one bucket at cands[i-1] holding candidates j..i-1, for every cut j < i."""
        j = np.arange(i)
        padded = cands[i - 1] * (pre_c[i] - pre_c[j]) - (pre_s[i] - pre_s[j])
        return compile_cost_s + token_cost_s * padded.astype(np.float64)

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
            chosen.append(bounds[i - 1])
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
        chosen.append(bounds[i - 1])
        i, b = int(back_m[b][i]), b - 1
    return Buckets(chosen)
