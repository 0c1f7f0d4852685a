"""nk.generate's progress and Stop between batches (what the dashboard's worker thread uses)."""
from __future__ import annotations

import threading

import pytest

import neuronkit as nk
from neuronkit.workloads.progress import BatchTiming, eta_s, new_shapes


def timing(bucket: int, cache: int, run: float, compile_s: float = 0.0) -> BatchTiming:
    return BatchTiming(bucket=bucket, cache_len=cache, rows=1, real_rows=1, prefill_s=run / 2,
                       decode_s=run / 2 + compile_s, new_tokens=4, compiles=int(compile_s > 0),
                       compile_s=compile_s)


def test_the_eta_prices_a_compile_once_per_new_shape():
    done = [timing(16, 20, run=1.0, compile_s=9.0), timing(16, 20, run=1.0)]
    left = [(16, 20), (32, 36), (32, 36), (64, 68)]
    assert new_shapes(done, left) == 2
    assert eta_s(done, left) == pytest.approx(4 * 1.0 + 2 * 9.0)
    assert eta_s([], left) is None and eta_s(done, []) == 0.0


def test_progress_after_every_batch_and_stop_before_the_next(model, tok):
    prompts = ["the cat sat", "on a mat while rain fell", "the sea", "quiet hills and rivers ran"]
    seen: list[nk.BatchProgress] = []
    stop = threading.Event()

    def on_batch(progress: nk.BatchProgress) -> None:
        seen.append(progress)
        if progress.done == 2:
            stop.set()

    with nk.CompileRecorder() as rec:
        res = nk.generate(model, tok, prompts, max_new_tokens=3, batch_size=1,
                          buckets=nk.Buckets([8, 16]), recorder=rec, on_batch=on_batch,
                          stop=stop, compile=False)
    assert [p.done for p in seen] == [1, 2] and {p.total for p in seen} == {4}
    assert res.stopped and (res.batches_done, res.batches) == (2, 4)
    assert sum(1 for t in res.texts if t) <= 2 and res.output_ids.count(None) == 2
    assert "batch 2 of 4" in str(seen[-1])
    # not stopped: every batch runs and reports
    seen.clear()
    res = nk.generate(model, tok, prompts[:2], max_new_tokens=2, batch_size=1, compile=False,
                      on_batch=seen.append)
    assert not res.stopped and [p.done for p in seen] == [1, 2] and seen[-1].eta_s == 0.0
