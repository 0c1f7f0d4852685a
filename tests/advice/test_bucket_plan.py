"""The bucket trade-off: rows per bucket count, the chosen plan = nk.plan_buckets, prices."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import neuronkit as nk
from neuronkit.advice.bucket_plan import plan_traffic, price_from_log
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.traffic import read_traffic

SAMPLE = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "sample_traffic.jsonl"


@pytest.mark.parametrize("sizes,cost", [([1], 60.0), ([1, 4], 600.0), ([2], 1.0)])
def test_chosen_plan_is_plan_buckets_on_the_sample(sizes: list[int], cost: float) -> None:
    lengths = read_traffic(SAMPLE).prompt
    plan = plan_traffic(lengths, max_buckets=8, compile_cost_s=cost, token_cost_s=1e-3,
                        batch_sizes=sizes)
    expected = nk.plan_buckets(lengths, max_buckets=8, compile_cost_s=cost, token_cost_s=1e-3,
                               graphs_per_bucket=2 * len(sizes))
    assert nk.Buckets(plan.chosen) == expected
    assert [len(r.buckets) for r in plan.rows if r.chosen] == [len(expected)]


def test_rows_count_graphs_padding_and_bill() -> None:
    rng = np.random.default_rng(0)
    lengths = [int(n) for n in rng.integers(1, 500, 300)]
    plan = plan_traffic(lengths, max_buckets=4, compile_cost_s=10.0, batch_sizes=[1, 8])
    assert [len(r.buckets) for r in plan.rows] == [1, 2, 3, 4]
    for r in plan.rows:
        b = nk.Buckets(r.buckets)
        assert r.padding_tokens == b.padding(lengths)
        assert r.padding_share == pytest.approx(r.padding_tokens / (sum(lengths) + r.padding_tokens))
        assert r.graphs_prefill == r.graphs_decode == 2 * len(b)
        assert r.compile_s == pytest.approx(r.graphs * 10.0)
    pads = [r.padding_tokens for r in plan.rows]
    assert pads == sorted(pads, reverse=True) and pads[0] > pads[-1]


def test_max_len_counts_overflow_and_caps_the_top_bucket() -> None:
    plan = plan_traffic([10, 20, 30, 900, 1000], max_buckets=3, max_len=100)
    assert all(r.overflow == 2 for r in plan.rows)
    assert max(plan.chosen) <= 100


def test_rows_stop_at_the_distinct_lengths() -> None:
    plan = plan_traffic([5, 5, 9], max_buckets=8)
    assert [len(r.buckets) for r in plan.rows] == [1, 2]


def _log(tmp_path: Path, events: list[CompileEvent]) -> str:
    return str(CompileLog(events).save(tmp_path / "price.jsonl"))


def test_price_from_neff_builds_else_dynamo_seconds(tmp_path: Path) -> None:
    neff = [CompileEvent(seq=i, function="f", duration_s=1.0, neff_compile_s=s, neff_cache=c)
            for i, (s, c) in enumerate([(90.0, "compiled"), (30.0, "compiled"), (0.0, "disk_hit"),
                                        (60.0, "compiled")])]
    seconds, source = price_from_log(_log(tmp_path, neff))
    assert seconds == 60.0 and "median of 3 NEFF build" in source
    dynamo = [CompileEvent(seq=i, function="f", duration_s=s) for i, s in enumerate([2.0, 4.0, 9.0])]
    seconds, source = price_from_log(_log(tmp_path, dynamo))
    assert seconds == 4.0 and "Dynamo" in source
    with pytest.raises(ValueError, match="no NEFF builds"):
        price_from_log(_log(tmp_path, []))
