"""The bucket trade-off of a traffic file: for 1..N buckets, the graphs to compile, the padding
requests pay, the requests that overflow and the compile bill; and the chosen plan, which is
``nk.plan_buckets`` on the same prompt lengths with the same prices.

Prices: seconds a graph takes to compile (the assumed default, ``--compile-cost-s``, or measured:
:func:`price_from_log`) and seconds a padded prompt token costs (``DEFAULT_TOKEN_COST_S``).
"""
from __future__ import annotations

import statistics
from dataclasses import asdict, dataclass, field
from typing import Any, Sequence

from neuronkit.events.event import GRAPH_KINDS
from neuronkit.workloads.shapes import (
    DEFAULT_COMPILE_COST_S,
    DEFAULT_TOKEN_COST_S,
    Buckets,
    checked_costs,
    plan_buckets,
)

__all__ = ["PHASES", "BucketPlan", "PlanRow", "plan_traffic", "price_from_log"]

PHASES = ("prefill", "decode")  # a bucket is a prefill graph and a decode graph per batch size


@dataclass
class PlanRow:
    """One plan of the trade-off: its buckets and what they cost."""

    buckets: list[int]
    graphs_prefill: int
    graphs_decode: int
    padding_tokens: int
    padding_share: float  # padded tokens / prompt tokens computed (real + padded)
    overflow: int  # requests longer than max_len (planned truncated to it)
    compile_s: float  # graphs x compile price
    padding_s: float  # padded tokens x token price
    chosen: bool = False

    @property
    def graphs(self) -> int:
        return self.graphs_prefill + self.graphs_decode

    @property
    def total_s(self) -> float:
        return self.compile_s + self.padding_s


@dataclass
class BucketPlan:
    """The trade-off rows (1..N buckets) and the chosen plan, with the prices and their source."""

    rows: list[PlanRow]
    chosen: list[int]
    compile_cost_s: float
    token_cost_s: float
    price_source: str
    batch_sizes: list[int]
    requests: int
    max_len: int | None
    notes: list[str] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        for row, out in zip(self.rows, data["rows"], strict=True):
            out["graphs"], out["total_s"] = row.graphs, row.total_s
        return data


def price_from_log(path: str) -> tuple[float, str]:
    """Seconds a graph costs, measured in a neuronkit log: the median NEFF build seconds
    (``neff_cache == "compiled"``), else the median Dynamo compile seconds of its graph events;
    and the words saying where the number came from. ValueError where the log has neither."""
    from neuronkit.log.open import open_log

    try:
        events = open_log(path).events
    except (OSError, ValueError) as exc:
        why = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
        raise ValueError(f"--price-log {path}: {why}") from exc
    builds = [float(e.neff_compile_s) for e in events if e.neff_cache == "compiled"
              and e.neff_compile_s is not None and e.neff_compile_s > 0]
    if builds:
        median = statistics.median(builds)
        return median, f"measured: median of {len(builds)} NEFF build(s) in {path}"
    graphs = [e.duration_s for e in events if e.kind in GRAPH_KINDS and e.duration_s > 0]
    if graphs:
        median = statistics.median(graphs)
        return median, (f"measured: median Dynamo compile seconds of {len(graphs)} graph(s) in "
                        f"{path} (no NEFF builds in it: off Neuron, a lower bound)")
    raise ValueError(f"--price-log {path}: no NEFF builds and no graph compiles with seconds to "
                     "take a price from")


def _row(lengths: Sequence[int], buckets: Buckets, n_sizes: int, overflow: int,
         compile_cost_s: float, token_cost_s: float) -> PlanRow:
    padding = buckets.padding(lengths)
    real = sum(lengths)
    graphs = len(buckets) * n_sizes
    return PlanRow(buckets=list(buckets), graphs_prefill=graphs, graphs_decode=graphs,
                   padding_tokens=padding, padding_share=padding / (real + padding),
                   overflow=overflow, compile_s=2 * graphs * compile_cost_s,
                   padding_s=padding * token_cost_s)


def plan_traffic(prompt_lengths: Sequence[int], *, max_buckets: int = 8,
                 compile_cost_s: float = DEFAULT_COMPILE_COST_S,
                 token_cost_s: float = DEFAULT_TOKEN_COST_S, price_source: str = "",
                 batch_sizes: Sequence[int] = (1,), max_len: int | None = None) -> BucketPlan:
    """The trade-off for 1..``max_buckets`` buckets over the prompt lengths (each row: the
    plan with the least padding for that many buckets) and the chosen plan:
    ``plan_buckets(lengths, max_buckets, compile_cost_s, token_cost_s, graphs_per_bucket=2 *
    len(batch_sizes))`` (a prefill and a decode graph per bucket and batch size). Prompts longer
    than ``max_len`` overflow: counted, and planned as ``max_len`` (truncated)."""
    if max_buckets < 1:
        raise ValueError(f"--max-buckets must be >= 1, got {max_buckets}")
    compile_cost_s, token_cost_s = checked_costs(compile_cost_s, token_cost_s)
    sizes = sorted(set(batch_sizes)) or [1]
    lengths = [min(n, max_len) for n in prompt_lengths] if max_len else list(prompt_lengths)
    overflow = sum(n > max_len for n in prompt_lengths) if max_len else 0
    chosen = plan_buckets(lengths, max_buckets=max_buckets, compile_cost_s=compile_cost_s,
                          token_cost_s=token_cost_s, graphs_per_bucket=2 * len(sizes))
    rows: list[PlanRow] = []
    for k in range(1, max_buckets + 1):
        least = chosen if len(chosen) == k else plan_buckets(
            lengths, max_buckets=k, compile_cost_s=0.0, token_cost_s=1.0)
        if len(least) < k:  # fewer distinct lengths than k: more buckets change nothing
            break
        row = _row(lengths, least, len(sizes), overflow, compile_cost_s, token_cost_s)
        row.chosen = list(least) == list(chosen)
        rows.append(row)
    source = price_source or "assumed"
    return BucketPlan(rows=rows, chosen=list(chosen), compile_cost_s=compile_cost_s,
                      token_cost_s=token_cost_s, price_source=source, batch_sizes=sizes,
                      requests=len(lengths), max_len=max_len)
