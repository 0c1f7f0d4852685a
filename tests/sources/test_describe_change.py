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
        "a dim 1: 8 -> 16 (and 1 more inputs alike); extra: new input [2]; "
        "labels: no longer passed; mask: no longer passed")


def test_a_dropped_input_wins_over_the_guard_text():
    # the shapes say what changed; torch's guard failure is only the fallback
    assert describe_change({"a": [1], "b": [2]}, {"a": [1]}, [GUARD]) == "b: no longer passed"
