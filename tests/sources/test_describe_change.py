"""``describe_change``'s "no longer passed" branch: an input the previous graph had and this
call does not pass is named, beside whatever else changed (sources/assemble.py)."""
from __future__ import annotations

from neuronkit.sources.assemble import describe_change

GUARD = "0/0: tensor 'a' size mismatch at index 0. expected 1, actual 2"


def test_a_dropped_input_is_named():
    assert describe_change({"a": [1, 2], "mask": [1, 2]}, {"a": [1, 2]}, []) == \
        "mask: no longer passed"


def test_every_dropped_input_is_named_in_the_previous_graphs_order():
    previous = {"b": [4], "a": [1], "c": [3]}
    assert describe_change(previous, {"a": [1]}, []) == "b: no longer passed; c: no longer passed"


def test_dropped_inputs_come_after_the_changes_and_are_never_grouped_as_dims():
    previous = {"a": [1, 8], "b": [1, 8], "labels": [1, 8], "mask": [1, 8]}
    now = {"a": [1, 16], "b": [1, 16], "extra": [2]}
    assert describe_change(previous, now, []) == (
        "a dim 1: 8 -> 16 (with b dim 1); extra: new input [2]; "
        "labels: no longer passed; mask: no longer passed")


def test_a_dropped_input_wins_over_the_guard_text():
    # the shapes say what changed; torch's guard failure is only the fallback
    assert describe_change({"a": [1], "b": [2]}, {"a": [1]}, [GUARD]) == "b: no longer passed"


def test_one_change_of_many_dims_names_each_dim_once():
    """The prompt length moves input_ids, position_ids and the mask's rows by the same step, and
    the cache length (prompt + 32) moves the mask's columns: two phrases, no dim repeated."""
    previous = {"input_ids": [1, 137], "position_ids": [1, 137], "mask": [1, 1, 137, 169]}
    now = {"input_ids": [1, 115], "position_ids": [1, 115], "mask": [1, 1, 115, 147]}
    text = describe_change(previous, now, ["0/1: tensor 'input_ids' size mismatch at index 1. "
                                           "expected 1, actual 115"])
    assert text == ("input_ids dim 1: 137 -> 115 (with position_ids dim 1 and mask dim 2); "
                    "mask dim 3: 169 -> 147")
    assert text.count("input_ids") == 1
