"""Assembling a CompileEvent from what torch's trace said: pure, no torch (sources/assemble.py)."""
from __future__ import annotations

import functools

from neuronkit.sources.assemble import (
    FrameName,
    FunctionState,
    TracedParts,
    assemble,
    break_events,
    describe_change,
    name_frame,
)
from neuronkit.sources.torch_text import BreakSite

F = FrameName("f", "m.py:1")


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
        == "a Python int/flag changed: n == 3"
    assert describe_change(None, {}, ["0/0: ___check_obj_id(L['self'].cfg, 1403)"]) == \
        "self.cfg: a different object"
    many = {f"k{i}": [1, 8] for i in range(4)}
    assert describe_change({k: [1, 4] for k in many}, many, []) == \
        "k0 dim 1: 4 -> 8 (with k1 dim 1 and 2 more alike)"


def test_first_recompile_limit_hit_and_failure():
    state = FunctionState()
    first = assemble(TracedParts(inputs={"x": [2, 3]}, backend="eager", device="cpu"),
                     {"accumulated_cache_size": 0, "entire_frame_compile_time_s": 0.5,
                      "compile_id": "0/0", "start_time": 10.0}, None, state, F, 8)
    assert (first.kind, first.changed, first.graph_count, first.duration_s) == ("first", "", 1, 0.5)
    again = assemble(TracedParts(inputs={"x": [2, 7]},
                                 reasons=["0/0: tensor 'L['x']' size mismatch at index 1. "
                                          "expected 3, actual 7"]),
                     {"accumulated_cache_size": 1}, None, state, F, 8)
    assert (again.kind, again.changed, again.graph_count, again.device) == \
        ("recompile", "x dim 1: 3 -> 7", 2, "cpu")
    hit = assemble(TracedParts(reasons=["0/1: tensor 'L['x']' size mismatch at index 1. "
                                        "expected 7, actual 9"]),
                   {"fail_type": "RecompileLimitExceeded"}, None, state, F, 8)
    assert hit.kind == "limit_hit" and hit.input_shapes == {"x": [2, 9]}
    assert hit.metrics["limit"] == {"name": "recompile_limit", "value": 8}
    failed = assemble(TracedParts(), {"fail_type": "BackendCompilerFailed",
                                      "fail_reason": "boom\nmore"}, None, state, F, 8)
    assert failed.kind == "failed" and failed.reasons == ["boom more"]
    assert hit.graph_count == 8 and state.graphs == 8    # the code held the limit's graphs


LIMIT_REASON = ("Dynamo recompile limit exceeded\n  Explanation: Dynamo attempted to recompile the code "
                "object too many times, exceeding the recompile_limit cache size limit (currently set "
                "to 4).")


def test_a_limit_hit_without_torchs_warning_is_read_from_its_metrics():
    """With torch's dynamo logging silenced no warning comes: the metrics record (torch's
    ``Unsupported`` with its limit message) is all there is, and it is a limit hit."""
    state = FunctionState(shapes={"x": [2, 3]}, graphs=4)
    hit = assemble(TracedParts(reasons=["0/3: tensor 'L['x']' size mismatch at index 1. "
                                        "expected 3, actual 5"]),
                   {"fail_type": "Unsupported", "fail_reason": LIMIT_REASON}, None, state, F, 8)
    assert hit.kind == "limit_hit" and hit.metrics["limit"] == {"name": "recompile_limit", "value": 4}
    assert hit.input_shapes == {"x": [2, 5]} and hit.changed == "x dim 1: 3 -> 5"
    assert hit.reasons == ["0/3: tensor 'L['x']' size mismatch at index 1. expected 3, actual 5"]


def test_a_graph_break_is_its_own_kind_with_the_user_frame():
    state = FunctionState()
    site = BreakSite("/w/train.py:12", "Data-dependent branching (Explanation: no)",
                     ["/w/train.py:12"])
    m = {"fail_type": "Unsupported", "fail_reason": "Data-dependent branching\n  Explanation: no",
         "fail_user_frame_filename": "/w/train.py", "fail_user_frame_lineno": 12}
    brk = assemble(TracedParts(breaks=[site]), m, None, state, F, 8)
    assert brk.kind == "graph_break" and brk.reasons == ["Data-dependent branching Explanation: no"]
    info = brk.metrics["graph_break"]
    assert (info["where"], info["cause"], info["resumed"]) == ("/w/train.py:12", "data_dependent", False)
    assert state.graphs == 0 and brk.metrics["frame"] == {"name": "f", "location": "m.py:1"}
    # torch names a frame of its own (FSDP's hook): the user frame comes from the traceback
    m.update(fail_user_frame_filename="/venv/site-packages/torch/distributed/fsdp/_state.py")
    fsdp = BreakSite("/w/model.py:40", "Attempted to call function marked as skipped",
                     ["/w/model.py:40", "/venv/site-packages/torch/distributed/fsdp/_state.py:30"])
    brk = assemble(TracedParts(breaks=[fsdp]), m, None, FunctionState(), F, 8)
    assert brk.metrics["graph_break"]["where"] == "/w/model.py:40"
    assert brk.metrics["graph_break"]["cause"] == "fsdp"


def test_a_frame_that_resumed_after_a_break_adds_a_graph_break_event():
    site = BreakSite("/w/m.py:18", "Unsupported Tensor.item() call", ["/w/m.py:18"])
    parts = TracedParts(inputs={"x": [3]}, breaks=[site])
    graph = assemble(parts, {"accumulated_cache_size": 0, "compile_id": "0/0"}, None,
                     FunctionState(), F, 8)
    assert graph.kind == "first" and graph.graph_count == 1
    (brk,) = break_events(parts, graph, F)
    assert (brk.kind, brk.function, brk.compile_id, brk.reasons) == \
        ("graph_break", "f", "0/0", ["Unsupported Tensor.item() call"])
    assert brk.metrics["graph_break"]["resumed"] is True
    assert brk.metrics["graph_break"]["cause"] == "item" and brk.duration_s == 0.0
    assert break_events(TracedParts(), graph, F) == []


# -- naming the compiled frame ----------------------------------------------------------------
def deprecate(func):
    """Like transformers' deprecate_kwarg: a functools.wraps wrapper with a closure."""
    @functools.wraps(func)
    def wrapped_func(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapped_func


def autocast(fn):
    @functools.wraps(fn)
    def forward(*args, **kwargs):
        return fn(*args, **kwargs)
    return forward


def returns_tuple(func):
    @functools.wraps(func)
    def wrapper(self, *args, **kwargs):
        return func(self, *args, **kwargs)
    return wrapper


class Tensor:
    def __init__(self, *shape):
        self.shape = shape


class TinyForCausalLM:
    @deprecate
    @returns_tuple
    def forward(self, input_ids=None, cache=None, **kwargs):
        return input_ids


class Subclass(TinyForCausalLM):
    pass


def closure(fn):
    return tuple(fn.__closure__ or ())


def test_a_wrapper_frame_is_named_after_the_method_it_wraps_with_its_phase():
    code = TinyForCausalLM.forward.__code__
    model = Subclass()
    real = TinyForCausalLM.forward.__wrapped__.__wrapped__.__code__
    where = f"{real.co_filename}:{real.co_firstlineno}"
    decode = name_frame(code, {"args": (model,), "kwargs": {"input_ids": Tensor(4, 1),
                                                             "cache": object()}},
                        closure(TinyForCausalLM.forward))
    assert decode == FrameName("Subclass.forward[decode]", where, "wrapped_func",
                               f"{code.co_filename}:{code.co_firstlineno}", "decode")
    # a cache passed by its old name lands in **kwargs: found there too; many new tokens: prefill
    prefill = name_frame(code, {"args": (model, Tensor(4, 9)),
                                "kwargs": {"past_key_values": object()}},
                         closure(TinyForCausalLM.forward))
    assert prefill.function == "Subclass.forward[prefill]" and prefill.phase == "prefill"
    # no cache: a plain forward (training), no phase
    plain = name_frame(code, {"args": (model,), "kwargs": {"input_ids": Tensor(4, 9)}},
                       closure(TinyForCausalLM.forward))
    assert (plain.function, plain.phase) == ("Subclass.forward", None)
    # the inner wrapper, compiled as a frame of its own, gets the same name (the same rule)
    inner = TinyForCausalLM.forward.__wrapped__
    again = name_frame(inner.__code__, {"self": model, "args": (), "kwargs": {}}, closure(inner))
    assert (again.function, again.location, again.raw) == ("Subclass.forward", where, "wrapper")


def test_a_bound_method_wrapper_and_plain_frames():
    model = TinyForCausalLM()
    wrapped = autocast(model.forward)  # like accelerate's wrapper of the bound model.forward
    name = name_frame(wrapped.__code__, {"args": (), "kwargs": {"input_ids": Tensor(1, 1),
                                                                 "cache": 1}}, closure(wrapped))
    assert name.function == "TinyForCausalLM.forward[decode]"

    def helper(x):
        return x

    def step(x, *rest):  # takes *args and holds a function, but passes no call on: no wrapper
        return helper(x, rest[0])

    def plain(x):
        return helper(x)

    plain_name = name_frame(plain.__code__, {"x": 1}, closure(plain))
    assert (plain_name.function, plain_name.raw, plain_name.phase) == ("plain", "plain", None)
    assert name_frame(step.__code__, {"x": 1, "rest": (2,)}, closure(step)).function == "step"
    # a plain method frame keeps its code name, and still says its phase
    forward = TinyForCausalLM.forward.__wrapped__.__wrapped__
    method = name_frame(forward.__code__, {"self": model, "input_ids": Tensor(2, 1), "cache": 1,
                                           "kwargs": {}}, ())
    assert method.function == "forward[decode]" and method.raw == "forward"
    assert name_frame(forward.__code__, None, None).function == "forward"


def test_the_first_graph_of_each_variant_is_first_and_compares_with_its_own_variant():
    """``forward[prefill]`` and ``forward[decode]`` share one code object: Dynamo counts the first
    decode graph a recompile of it; per variant it is the decode's first graph. A later prefill
    graph says what changed against the last prefill graph, not against the decode between."""
    prefill_name = FrameName("M.forward[prefill]", "m.py:1", phase="prefill")
    decode_name = FrameName("M.forward[decode]", "m.py:1", phase="decode")
    prefill, decode = FunctionState(), FunctionState()
    mismatch = "0/{}: tensor 'L['input_ids']' size mismatch at index 1. expected {}, actual {}"
    p1 = assemble(TracedParts(inputs={"input_ids": [1, 137]}), {"accumulated_cache_size": 0},
                  None, prefill, prefill_name, 8)
    d1 = assemble(TracedParts(inputs={"input_ids": [1, 1]}, reasons=[mismatch.format(0, 137, 1)]),
                  {"accumulated_cache_size": 1}, None, decode, decode_name, 8)
    p2 = assemble(TracedParts(inputs={"input_ids": [1, 115]},
                              reasons=[mismatch.format(1, 1, 115), mismatch.format(0, 137, 115)]),
                  {"accumulated_cache_size": 2}, None, prefill, prefill_name, 8)
    d2 = assemble(TracedParts(inputs={"input_ids": [1, 1], "k": [1, 2, 147, 16]},
                              reasons=[mismatch.format(2, 115, 1)]),
                  {"accumulated_cache_size": 3}, None, decode, decode_name, 8)
    assert [e.kind for e in (p1, d1, p2, d2)] == ["first", "first", "recompile", "recompile"]
    assert d1.changed == "" and d1.metrics["code_graphs_before"] == 1  # said, not a recompile
    assert p2.changed == "input_ids dim 1: 137 -> 115"  # against the last prefill graph
    assert "1 ->" not in p2.changed and d2.changed == "k: new input [1, 2, 147, 16]"
    assert [e.graph_count for e in (p1, d1, p2, d2)] == [1, 2, 3, 4]  # the code object's graphs


def test_a_graph_of_code_compiled_before_recording_is_a_first_graph_here():
    state = FunctionState()  # a new recorder: this function never seen
    e = assemble(TracedParts(inputs={"x": [2, 9]}, reasons=[
        "0/0: tensor 'L['x']' size mismatch at index 1. expected 3, actual 9"]),
        {"accumulated_cache_size": 2}, None, state, F, 8)
    assert e.kind == "first" and e.metrics["code_graphs_before"] == 2 and e.graph_count == 3


def test_a_variant_after_torch_compiler_reset_is_first_again():
    """After a reset the code holds fewer graphs than the variant last saw (1 < 5): the decode
    graph that follows the run's new prefill is its variant's first, not a recompile against
    the graph of the run before the reset."""
    state = FunctionState(shapes={"k": [1, 2, 149, 16]}, graphs=5)
    e = assemble(TracedParts(inputs={"k": [1, 2, 176, 16]}), {"accumulated_cache_size": 1},
                 None, state, F, 8)
    assert (e.kind, e.changed, e.graph_count) == ("first", "", 2)
    assert e.metrics["code_graphs_before"] == 1


def test_a_compiled_module_is_named_after_its_forward(compiler_reset):
    """``torch.compile(module)`` calls the module through torch's ``wrap_inline`` frame
    (``inner`` in torch/_dynamo/external_utils.py): the event names the module's forward."""
    import torch

    import neuronkit as nk

    model = torch.nn.Sequential(torch.nn.Linear(4, 4), torch.nn.ReLU())
    with nk.CompileRecorder() as rec:
        torch.compile(model, backend="eager")(torch.ones(2, 4))
    (event,) = rec.log.events
    assert event.function == "Sequential.forward"
    assert event.location.endswith(("container.py:" + str(
        torch.nn.Sequential.forward.__code__.co_firstlineno)))
    assert event.metrics["frame"]["name"] == "inner"
