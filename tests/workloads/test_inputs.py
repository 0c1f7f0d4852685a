"""Inputs that were silently wrong or crashed deep inside: each now a clear error, raised before
any work, or the right answer (``fixed_shape_args``' switch, the collator's token ids, huge
lengths in the bucket planner, ``nk.generate``'s model, tokenizer, ``on_batch`` and ``stop``)."""
from __future__ import annotations

import os
import re
import threading

import numpy as np
import pytest
import torch

import neuronkit as nk
from neuronkit.workloads.shapes import plan_cost
from neuronkit.workloads.trainer_args import DYNAMIC_ENV, fixed_shape_args

# ---- fixed_shape_args(dynamic=...) ------------------------------------------------------------

@pytest.mark.parametrize("dynamic", ["false", "False", 0, 1, "true", [], np.bool_(False)])
def test_dynamic_must_be_true_false_or_none_on_every_call(tmp_path, monkeypatch, dynamic):
    monkeypatch.delenv(DYNAMIC_ENV, raising=False)
    for _ in range(2):      # the second call once crashed on the first call's setting
        with pytest.raises(TypeError, match=r"dynamic must be True, False or None, got "
                                            + re.escape(repr(dynamic))):
            fixed_shape_args(str(tmp_path), dynamic=dynamic, quiet=True)
    assert DYNAMIC_ENV not in os.environ            # nothing was switched on


def test_dynamic_false_twice_keeps_dynamic_shapes_off(tmp_path, monkeypatch):
    monkeypatch.delenv(DYNAMIC_ENV, raising=False)
    for _ in range(2):
        fixed_shape_args(str(tmp_path), dynamic=False, quiet=True)
        assert os.environ[DYNAMIC_ENV] == "false"


# ---- FixedLengthCollator token ids ------------------------------------------------------------

@pytest.mark.parametrize("ids", [
    [5, 6, 7], np.array([5, 6, 7]), np.array([5, 6, 7], dtype=np.int32), torch.tensor([5, 6, 7]),
    [np.int64(5), np.int16(6), torch.tensor(7)], (5, 6, 7), range(5, 8)])
def test_collator_takes_integer_token_ids_of_any_kind(tok, ids):
    batch = nk.FixedLengthCollator(tok, max_length=4)([{"input_ids": ids}])
    assert batch["input_ids"][0, :3].tolist() == [5, 6, 7]
    assert batch["labels"][0].tolist() == [5, 6, 7, -100]


@pytest.mark.parametrize("field, value, text", [
    ("input_ids", [5, 1.7, 7], r"example 1: input_ids\[1\] is 1\.7 \(float\)"),
    ("input_ids", [5, 6.0], r"example 1: input_ids\[1\] is 6\.0 \(float\)"),
    ("input_ids", np.array([5.0, 1.7]), r"example 1: input_ids\[0\] is .*5\.0.* \(float64\)"),
    ("input_ids", torch.tensor([5.0, 1.7]), r"example 1: input_ids\[0\] is 5\.0 \(float\)"),
    ("input_ids", [5, True], r"example 1: input_ids\[1\] is True \(bool\)"),
    ("input_ids", [5, "6"], r"example 1: input_ids\[1\] is '6' \(str\)"),
    ("input_ids", [5, [6]], r"example 1: input_ids\[1\] is \[6\] \(list\)"),
    ("input_ids", [5, None], r"example 1: input_ids\[1\] is None"),
    ("input_ids", "abc", r"example 1: input_ids is a str.*\{'text': \.\.\.\}"),
    ("input_ids", 5, r"example 1: input_ids is a int, not a list of token ids"),
    ("labels", [5, 1.5, 7], r"example 1: labels\[1\] is 1\.5 \(float\)"),
])
def test_collator_names_the_example_and_field_of_bad_token_ids(tok, field, value, text):
    good = {"input_ids": [1, 2, 3]}
    bad = {"input_ids": [1, 2, 3], field: value}
    with pytest.raises(TypeError, match=text):
        nk.FixedLengthCollator(tok, max_length=8)([good, bad])


# ---- huge lengths: integer arithmetic ---------------------------------------------------------

BIG = 2 ** 53 + 1          # the first int a float64 cannot hold


def test_plan_buckets_covers_a_length_a_float_cannot_hold():
    assert nk.plan_buckets([BIG]) == nk.Buckets([BIG])
    assert nk.plan_buckets([BIG - 2, BIG]).max == BIG
    assert nk.plan_buckets([BIG, 3], max_buckets=1) == nk.Buckets([BIG])
    assert nk.plan_buckets([BIG], multiple_of=2) == nk.Buckets([BIG + 1])
    assert nk.plan_buckets([BIG], multiple_of=BIG + 2) == nk.Buckets([BIG + 2])


def test_plan_buckets_pads_exactly_with_huge_lengths():
    """Two huge lengths one token apart: one bucket pads a single token, so at a token cost far
    below the compile cost they share it (float rounding once saw 0 or 2 tokens)."""
    lengths = [BIG, BIG + 1]
    assert nk.plan_buckets(lengths, token_cost_s=1.0, compile_cost_s=0.6) == nk.Buckets(
        [BIG, BIG + 1])                       # 1 token of padding costs more than a graph
    assert nk.plan_buckets(lengths, token_cost_s=1.0, compile_cost_s=1.5) == nk.Buckets([BIG + 1])
    assert plan_cost(lengths, [BIG + 1], compile_cost_s=1.5, token_cost_s=1.0) == 2.5
    many = [2 ** 62 + i for i in range(0, 40, 3)] * 3     # prefix sums beyond int64
    best = nk.plan_buckets(many, compile_cost_s=2.5, token_cost_s=1.0)
    assert best.max == max(many) and all(b in many for b in best)
    assert nk.Buckets([BIG]).fit(BIG) == BIG and nk.Buckets([BIG]).padding([BIG - 1]) == 1


def test_a_length_beyond_any_tensor_is_a_clear_error():
    for call in (lambda: nk.plan_buckets([2 ** 63]), lambda: nk.Buckets([2 ** 70]),
                 lambda: nk.plan_buckets([5], multiple_of=2 ** 64)):
        with pytest.raises(ValueError, match=r"at most 2\*\*63 - 1"):
            call()


# ---- nk.generate's model, tokenizer, on_batch and stop ----------------------------------------

@pytest.fixture
def generate_calls(model, monkeypatch) -> list:
    """The model's ``generate`` calls (none may happen before a bad argument is refused)."""
    calls: list = []
    real = model.generate
    monkeypatch.setattr(model, "generate", lambda *a, **k: calls.append(k) or real(*a, **k))
    return calls


@pytest.mark.parametrize("kwargs, text", [
    ({"stop": "yes"}, r"stop must be a threading\.Event \(or anything with is_set\(\)\) or None, "
                      r"got a str: 'yes'"),
    ({"stop": True}, r"stop must be a threading\.Event.*got a bool"),
    ({"on_batch": 5}, r"on_batch must be a callable .*or None, got a int: 5"),
    ({"on_batch": "print"}, r"on_batch must be a callable.*got a str"),
])
def test_bad_on_batch_or_stop_is_refused_before_any_batch(model, tok, generate_calls, kwargs, text):
    with pytest.raises(TypeError, match=text):
        nk.generate(model, tok, ["the cat", "a dog"], max_new_tokens=2, compile=False,
                    batch_size=1, **kwargs)
    assert generate_calls == []


def test_a_good_on_batch_and_stop_still_run(model, tok, generate_calls):
    seen, stop = [], threading.Event()
    result = nk.generate(model, tok, ["the cat", "a dog"], max_new_tokens=2, compile=False,
                         batch_size=1, on_batch=lambda p: (seen.append(p.done), stop.set()),
                         stop=stop)
    assert seen == [1] and result.stopped and len(generate_calls) == 1


@pytest.mark.parametrize("bad, text", [
    (None, r"model must be a loaded transformers causal LM.*got None"),
    ("Qwen/Qwen3-0.6B", r"model must be a loaded .*got a str: 'Qwen/Qwen3-0\.6B'.*"
                        r"nk\.load_model\('Qwen/Qwen3-0\.6B'\)"),
    (object(), r"model must be a loaded transformers causal LM.*got a object"),
])
def test_model_must_be_a_loaded_causal_lm(tok, bad, text):
    with pytest.raises(TypeError, match=text):
        nk.generate(bad, tok, ["the cat"], compile=False)


@pytest.mark.parametrize("bad, text", [
    (None, r"tokenizer must be a tokenizer.*got None"),
    ("Qwen/Qwen3-0.6B", r"tokenizer must be .*got a str: 'Qwen/Qwen3-0\.6B'.*"
                        r"nk\.load_tokenizer\('Qwen/Qwen3-0\.6B'\)"),
    (42, r"tokenizer must be a tokenizer.*got a int"),
])
def test_tokenizer_must_be_a_tokenizer(model, generate_calls, bad, text):
    with pytest.raises(TypeError, match=text):
        nk.generate(model, bad, ["the cat"], compile=False)
    assert generate_calls == []
