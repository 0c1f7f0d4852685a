"""The wording of torch's messages, as neuronkit reads it (neuronkit/_torch_text.py): the one place
to update when torch rewords a guard failure, a source name or a warning."""
from __future__ import annotations

from neuronkit import _torch_text as text

MISMATCH = "0/0: tensor 'L['x']' size mismatch at index 1. expected 3, actual 5"
SCALAR = ("0/3: kwargs['cache'].layers[0].cumulative_length_int == 17    # is_full = current_length"
          " >= self.max_cache_len  # transformers/cache_utils.py:566 in update\nUser stack trace:")


def test_input_names_lose_every_source_wrapper():
    assert text.input_name("L['x']") == "x"
    assert text.input_name("kwargs['cache'].layers[0].keys") == "cache.layers[0].keys"
    assert text.input_name("L['kwargs']['past_key_values'].layers[0].keys") == \
        "past_key_values.layers[0].keys"
    assert text.input_name("G['weight']") == "weight"
    assert text.input_name("cache.layers[0].keys") == "cache.layers[0].keys"  # old logs: as is


def test_size_mismatches_and_short_reasons():
    assert text.size_mismatches(MISMATCH) == [("x", 1, 3, 5)]
    assert text.size_mismatches("no size here") == []
    assert text.short_reason(MISMATCH) == "x dim 1: 3 -> 5"
    wrapped = "Recompiling function f triggered by the following guard failure(s):\n- " + MISMATCH
    assert text.short_reason(wrapped) == "x dim 1: 3 -> 5"
    assert text.short_reason("0/0: " + "y" * 80, width=10) == "yyyyyyyyy…"


def test_guards_and_python_ints():
    assert text.first_guard(SCALAR) == "kwargs['cache'].layers[0].cumulative_length_int == 17"
    assert text.scalar_guard(SCALAR) == ("cache.layers[0].cumulative_length_int", 17)
    assert text.scalar_guard(MISMATCH) is None
    assert text.scalar_guard("0/0: n == 3      # f(x, n)  # m.py:2 in f") == ("n", 3)
    assert text.changed_dim("input_ids dim 1: 17 -> 33") == 1
    assert text.changed_dim(MISMATCH) == 1 and text.changed_dim("grad_mode changed") is None


def test_failure_reason_is_one_line():
    assert text.failure_reason("boom\n  details") == "boom details"
    long = "Graph break type\n  Explanation: " + "x" * 200
    assert text.failure_reason(long) == "Graph break type"
    assert text.failure_reason("backend='b' raised:\nRuntimeError: " + "y" * 200) == (
        "backend='b' raised: RuntimeError: " + "y" * 200)


def test_devices_and_reasons_payloads():
    assert text.parse_device("device(type='cpu')") == "cpu"
    assert text.parse_device("device(type='cuda', index=1)") == "cuda:1"
    assert text.parse_device("device(type='neuron', index=0)") == "neuron:0"
    assert text.parse_device(None) is None and text.parse_device("cpu?") is None
    assert text.parse_reasons('[\n"0/1: a",\n"0/0: b"\n]') == ["0/1: a", "0/0: b"]
    assert text.parse_reasons("0/0: a") == ["0/0: a"] and text.parse_reasons(None) == []


def test_the_recompile_limit_warning():
    args = ("recompile_limit", 8, "'forward' (/m.py:12)", "reason", "url")
    assert text.limit_note("torch._dynamo hit config.%s (%s)\n function: %s", args) == {
        "limit_type": "recompile_limit", "limit": 8, "function": "forward", "location": "/m.py:12"}
    assert text.limit_note("another message", ()) is None
    assert text.limit_value_in("torch._dynamo hit config.recompile_limit (8)") == 8
    assert text.limit_value_in("the limit (currently set to 16)") == 16
    assert text.limit_value_in("nothing") is None
