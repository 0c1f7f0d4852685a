"""The wording of torch's messages, as neuronkit reads it (neuronkit/_torch_text.py): the one place
to update when torch rewords a guard failure, a source name or a warning."""
from __future__ import annotations

from neuronkit.sources import torch_text as text

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


# guard failures as torch 2.13 words them (recorded here), and older / other sources' forms
GUARDS = {
    "0/0: ___check_obj_id(fn, 139783729002624), type=<class 'builtin_function_or_method'>":
        "fn: a different object",
    "0/0: ___check_type_id(L['t'], 139783745954688), type=<class 'tuple'>":
        "t: a different type (was tuple)",
    "0/0: ___dict_contains('weight', G['f'].__closure__[1].cell_contents)  # w['weight']":
        "a variable captured by f: key 'weight' removed",
    "0/0: not ___dict_contains('bias', L['self']._modules['lin']._parameters)":
        "self.lin._parameters: key 'bias' added",
    "0/0: len(L['x']) == 3      # xs[0] * len(xs)  # m.py:17 in f": "x: length changed (was 3)",
    "0/0: L['self'].training == False": "self.training changed (was False)",
    "0/0: s._modules['d'].training == True     ": "s.d.training changed (was True)",
    "0/0: n == 3      # f(x, n)  # m.py:2 in f\nUser stack": "a Python int/flag changed: n == 3",
    "0/0: flag == True     # b = ...": "a Python int/flag changed: flag == True",
    "0/0: s == 0.5": "a Python float changed: s == 0.5",
    "0/0: s == 'ab'": "a Python string changed: s == 'ab'",
    "0/0: o is None": "o: was None, now set",
    "0/0: tensor 'x' dtype mismatch. expected Float, actual Double": "x: dtype changed (Float -> Double)",
    "0/0: tensor 'L['x']' requires_grad mismatch. expected requires_grad=0":
        "x: requires_grad changed (was False)",
    "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, BackendSelect, "
    "ADInplaceOrView, AutogradCPU), actual DispatchKeySet(Meta, BackendSelect, ADInplaceOrView, "
    "AutogradMeta)": "x: moved to another device (CPU -> Meta)",
    "0/0: tensor 'x' dispatch key set mismatch. expected DispatchKeySet(CPU, AutogradCPU), actual "
    "DispatchKeySet(CPU, AutogradCPU, AutocastCPU)": "x: tensor mode changed (dispatch keys +AutocastCPU)",
    "0/0: tensor 'x' stride mismatch at index 0. expected 3, actual 1":
        "x: memory layout changed (strides 3 -> 1)",
    "0/0: GLOBAL_STATE changed: grad_mode ": "grad mode changed",
    "0/0: GLOBAL_STATE changed: autocast(cpu)_enabled ": "autocast (cpu) changed",
    MISMATCH: "x dim 1: 3 -> 5",
    "0/0: ___some_future_guard(L['x'])": "___some_future_guard(L['x'])",  # unknown: torch's text
}


def test_guards_in_plain_words():
    for reason, words in GUARDS.items():
        assert text.guard_text(reason) == words, reason
    # tables use the plain words, cut to width; the reason itself is kept verbatim by the events
    assert text.short_reason("0/0: GLOBAL_STATE changed: grad_mode ") == "grad mode changed"
    assert text.short_reason("0/0: ___check_obj_id(L['self'].model, 1403)", 20) == "self.model: a diffe…"


def test_a_recompile_limit_failure_is_told_by_its_metrics():
    reason = ("Dynamo recompile limit exceeded\n  Explanation: Dynamo attempted to recompile the code "
              "object too many times, exceeding the recompile_limit cache size limit (currently set "
              "to 2). Excessive recompilations can degrade performance")
    assert text.limit_failure("Unsupported", reason) == {
        "limit_type": "recompile_limit", "limit": 2, "function": "", "location": ""}
    accumulated = reason.replace("the recompile_limit", "the accumulated_recompile_limit")
    assert text.limit_failure("Unsupported", accumulated)["limit_type"] == \
        "accumulated_recompile_limit"
    assert text.limit_failure("Unsupported", "Data-dependent branching") is None
    assert text.limit_failure("RecompileLimitExceeded", "")["limit"] is None


BREAK = """Graph break in user code at /v/site-packages/torch/distributed/fsdp/_state.py:30
Graph Break Reason: Encountered graph break when attempting to trace CALL: a function call, e.g. f(x, y):

Attempted to call function marked as skipped
  Explanation: Dynamo developers have intentionally marked that the function `disable` should not be traced.
  Hint: Avoid calling the function `disable`.

User code traceback:
  File "/home/me/train.py", line 12, in step
    loss = model(**batch).loss
  File "/venv/lib/python3.11/site-packages/transformers/models/qwen3/modeling_qwen3.py", line 375, in forward
    hidden = layer(hidden)
  File "/venv/lib/python3.11/site-packages/torch/nn/modules/module.py", line 1778, in _call_impl
    return forward_call(*args, **kwargs)
  File "/v/site-packages/torch/distributed/fsdp/_state.py", line 30, in _pre_forward
    torch._dynamo.disable(fn)

Traceback (most recent call last):
  File "/venv/lib/python3.11/site-packages/torch/_dynamo/symbolic_convert.py", line 1076, in wrapper
"""


def test_a_graph_break_report_gives_the_user_frame_and_the_reason():
    site = text.break_site(BREAK)
    assert site.where.endswith("transformers/models/qwen3/modeling_qwen3.py:375")  # not torch's
    assert site.reason.startswith("Attempted to call function marked as skipped (Explanation: ")
    assert len(site.frames) == 4 and site.frames[0] == "/home/me/train.py:12"
    assert text.break_site("some other artifact") is None
    item = ("Graph break in user code at /w/m.py:18\nGraph Break Reason: Encountered graph break "
            "when attempting to trace CALL: a function call, e.g. f(x, y):\n\nUnsupported "
            "Tensor.item() call with capture_scalar_outputs=False\n  Explanation: no.\n\nUser code "
            "traceback:\n  File \"/w/m.py\", line 18, in f\n")
    assert text.break_site(item) == text.BreakSite(
        "/w/m.py:18", "Unsupported Tensor.item() call with capture_scalar_outputs=False "
        "(Explanation: no.)", ["/w/m.py:18"])


def test_what_caused_a_graph_break():
    site = text.break_site(BREAK)
    assert text.break_cause(site.reason, site.where, *site.frames)[0] == "fsdp"
    assert text.break_cause(site.reason, site.where)[0] == "skipped"   # no FSDP frame: not FSDP
    cases = {"Unsupported Tensor.item() call with capture_scalar_outputs=False": "item",
             "Data-dependent branching (Explanation: Detected data-dependent branching)": "data_dependent",
             "Attempted to call function marked as skipped (Explanation: Dynamo does not know how "
             "to trace the builtin `posix.getpid.` This function ...)": "builtin",
             "Skip calling `torch.compiler.disable()`d function": "disabled",
             "Dynamic shape operator (Explanation: aten.nonzero)": "dynamic_output",
             "Missing tp_iternext": "other"}
    for reason, cause in cases.items():
        assert text.break_cause(reason)[0] == cause, reason
    assert text.break_cause(list(cases)[2])[1] == "an unsupported builtin (`posix.getpid`)"
    assert text.break_cause("Missing tp_iternext\n more") == ("other", "Missing tp_iternext")


def test_a_variable_captured_by_a_module_hook_names_the_hook_and_its_module():
    # transformers 5.25 guards a value a forward pre-hook of k_norm captured; the owner came out
    # as "[0]]" before (notebook 05 with the newest releases)
    from neuronkit.sources.torch_text import _guard_name

    hooks = "L['self']._modules['self_attn']._modules['k_norm']._forward_pre_hooks"
    source = f"{hooks}[list(dict.keys({hooks}))[0]].__closure__[1].cell_contents"
    assert _guard_name(source) == ("a variable captured by a forward pre-hook of "
                                   "self.self_attn.k_norm")
    assert _guard_name("L['m']._backward_hooks[0].__closure__[0].cell_contents") == \
        "a variable captured by a backward hook of m"
    assert _guard_name("L['self']._modules['k'].forward.__closure__[1].cell_contents") == \
        "a variable captured by self.k.forward"
