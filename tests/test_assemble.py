"""Assembling a CompileEvent from what torch's trace said: pure, no torch (sources/assemble.py)."""
from __future__ import annotations

from neuronkit.sources.assemble import FunctionState, TracedParts, assemble, describe_change


def test_change_text():
    assert describe_change({"a": [1, 2]}, {"a": [1, 3], "b": [4]}, []) == \
        "a dim 1: 2 -> 3; b: new input [4]"
    assert describe_change({"a": [1, 2]}, {"a": [1, 2, 3]}, []) == "a shape: [1, 2] -> [1, 2, 3]"
    assert describe_change({"a": [1]}, {}, []) == ""
    assert describe_change({"a": [1], "b": [2]}, {"a": [1]}, []) == "b: no longer passed"
    # no earlier graph known: read it from the guard failure
    assert describe_change(None, {"a": [5]}, ["0/0: tensor 'a' size mismatch at index 0. "
                                              "expected 2, actual 5"]) == "a dim 0: 2 -> 5"
    assert describe_change(None, {}, ["0/0: n == 3      # f(x, n)  # m.py:2 in f\nUser stack"]) \
        == "guard failed: n == 3"
    many = {f"k{i}": [1, 8] for i in range(4)}
    assert describe_change({k: [1, 4] for k in many}, many, []) == \
        "k0 dim 1: 4 -> 8 (and 3 more inputs alike)"


def test_first_recompile_limit_hit_and_failure():
    state = FunctionState()
    first = assemble(TracedParts(inputs={"x": [2, 3]}, backend="eager", device="cpu"),
                     {"accumulated_cache_size": 0, "entire_frame_compile_time_s": 0.5,
                      "compile_id": "0/0", "start_time": 10.0}, None, state, "f", "m.py:1", 8)
    assert (first.kind, first.changed, first.graph_count, first.duration_s) == ("first", "", 1, 0.5)
    again = assemble(TracedParts(inputs={"x": [2, 7]},
                                 reasons=["0/0: tensor 'L['x']' size mismatch at index 1. "
                                          "expected 3, actual 7"]),
                     {"accumulated_cache_size": 1}, None, state, "f", "m.py:1", 8)
    assert (again.kind, again.changed, again.graph_count, again.device) == \
        ("recompile", "x dim 1: 3 -> 7", 2, "cpu")
    hit = assemble(TracedParts(reasons=["0/1: tensor 'L['x']' size mismatch at index 1. "
                                        "expected 7, actual 9"]),
                   {"fail_type": "RecompileLimitExceeded"}, None, state, "f", "m.py:1", 8)
    assert hit.kind == "limit_hit" and hit.input_shapes == {"x": [2, 9]}
    assert hit.metrics["limit"] == {"name": "recompile_limit", "value": 8}
    failed = assemble(TracedParts(), {"fail_type": "Unsupported", "fail_reason": "boom\nmore"},
                      None, state, "f", "m.py:1", 8)
    assert failed.kind == "failed" and failed.reasons == ["boom more"]
    assert state.graphs == 2                              # refused and failed compiles build none
