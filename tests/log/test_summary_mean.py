"""``CompileLog.summary()``'s ``mean_s``: the compile seconds per compile attempt, a failed
compile counting as one (``mean_s = compile_s / (graphs + failed)``)."""
from __future__ import annotations

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog


def _event(kind, duration_s, function="forward", location="m.py:1", rank=0):
    return CompileEvent(function=function, location=location, kind=kind, duration_s=duration_s,
                        rank=rank, input_shapes={"x": [int(duration_s * 10)]})


def _row(log, function):
    [row] = [r for r in log.summary() if r["function"] == function]
    return row


def test_mean_counts_failed_compiles_as_compiles():
    log = CompileLog([_event("first", 1.0), _event("recompile", 3.0), _event("failed", 2.0)])
    row = _row(log, "forward")
    assert (row["graphs"], row["failed"]) == (2, 1)
    assert row["compile_s"] == pytest.approx(6.0)
    assert row["mean_s"] == pytest.approx(6.0 / 3)     # not 6.0 / 2: the failure took time too


def test_mean_of_a_function_whose_every_compile_failed():
    log = CompileLog([_event("failed", 4.0, "step"), _event("failed", 2.0, "step"),
                      _event("first", 0.5, "other", "o.py:1")])
    row = _row(log, "step")
    assert (row["graphs"], row["failed"], row["compile_s"]) == (0, 2, pytest.approx(6.0))
    assert row["mean_s"] == pytest.approx(3.0)          # not 0.0 for "no graphs"
    assert _row(log, "other")["mean_s"] == pytest.approx(0.5)


def test_mean_adds_up_all_ranks():
    log = CompileLog([_event("first", 1.0, rank=0), _event("first", 2.0, rank=1),
                      _event("failed", 3.0, rank=1)])
    row = _row(log, "forward")
    assert (row["graphs"], row["failed"]) == (2, 1)
    assert row["mean_s"] == pytest.approx(2.0)


def test_no_compile_attempts_means_zero_not_a_division_error():
    log = CompileLog([CompileEvent(function="f", location="m.py:1", kind="eager_fallback",
                                   calls=3)])
    row = _row(log, "f")
    assert (row["graphs"], row["failed"], row["eager_calls"], row["mean_s"]) == (0, 0, 3, 0.0)
