"""The Dynamo source on real compiles: a recompile-limit hit with torch's logging silenced, graph
breaks as their own kind, and wrapper frames named after what they wrap (sources/dynamo.py)."""
from __future__ import annotations

import functools
import logging
import warnings

import pytest
import torch

import neuronkit as nk
from neuronkit.sources import dynamo


@pytest.fixture
def silenced_dynamo(compiler_reset):
    """torch's dynamo logs at ERROR: its recompile-limit warning is never emitted."""
    torch._logging.set_logs(dynamo=logging.ERROR)
    try:
        yield
    finally:
        torch._logging.set_logs()


def scale(x):
    return x * 2


def test_a_limit_hit_is_recorded_when_dynamo_logging_is_silenced(silenced_dynamo, monkeypatch):
    """No warning to read: only the metrics record says the compile was refused. Without that
    path the hit is misfiled as a failed compile (torch's Unsupported) with no limit."""
    monkeypatch.setattr(dynamo.TAP, "errors", [])
    fn = torch.compile(scale, backend="eager", dynamic=False)
    with torch._dynamo.config.patch(recompile_limit=2), nk.CompileRecorder() as rec:
        fn(torch.ones(3))
        fn(torch.ones(5))
        with pytest.warns(RuntimeWarning, match=r"scale hit torch\._dynamo\.config\.recompile_limit"
                                                r" \(2 graphs\)"):
            fn(torch.ones(7))
    assert [e.kind for e in rec.events] == ["first", "recompile", "limit_hit"]
    hit = rec.events[-1]
    assert hit.function == "scale" and hit.location.endswith(f"{__file__}:{scale.__code__.co_firstlineno}")
    assert hit.metrics["limit"] == {"name": "recompile_limit", "value": 2}
    assert hit.graph_count == 2 and hit.input_shapes == {"x": [7]}
    assert hit.changed == "x dim 0: 5 -> 7"
    assert not dynamo.TAP.errors
    advice = next(a for a in nk.diagnose(rec.log) if "recompile limit hit" in a.title)
    assert advice.numbers["recompile_limit"] == 2 and advice.numbers["held"] == 2


def take_item(x):
    n = x.sum().item()  # the break: a tensor's value taken into Python
    return x * n


BREAK_LINE = take_item.__code__.co_firstlineno + 1


def test_a_graph_break_is_its_own_kind_naming_the_user_line(compiler_reset):
    with nk.CompileRecorder() as rec:
        torch.compile(take_item, backend="eager")(torch.ones(3))
    kinds = [(e.kind, e.function) for e in rec.events]
    assert kinds[:2] == [("first", "take_item"), ("graph_break", "take_item")]
    brk = rec.events[1]
    info = brk.metrics["graph_break"]
    assert info["where"] == f"{__file__}:{BREAK_LINE}" and info["resumed"] is True
    assert info["cause"] == "item" and "item()" in brk.reasons[0]
    assert rec.log.graph_counts() == {"take_item": 1, f"torch_dynamo_resume_in_take_item_at_{BREAK_LINE}": 1}
    a = next(a for a in nk.diagnose(rec.log) if a.title.startswith("graph breaks"))
    assert "`.item()`" in a.detail and "capture_scalar_outputs" in a.fix and "FSDP" not in a.fix


def keeps_kwargs(func):
    """A functools.wraps wrapper, like transformers' deprecate_kwarg around a model's forward."""
    @functools.wraps(func)
    def wrapped_func(*args, **kwargs):
        return func(*args, **kwargs)
    return wrapped_func


class TinyForCausalLM(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = torch.nn.Embedding(10, 4)

    @keeps_kwargs
    def forward(self, input_ids, past_key_values=None):
        return self.embed(input_ids)


def test_a_wrapper_frame_is_named_after_the_method_with_prefill_and_decode(compiler_reset):
    model = TinyForCausalLM()
    fn = torch.compile(model, backend="eager", dynamic=False)
    cache = object()
    with warnings.catch_warnings(), nk.CompileRecorder() as rec:
        warnings.simplefilter("ignore")
        fn(torch.ones(1, 5, dtype=torch.long), past_key_values=cache)  # prefill: five new positions
        fn(torch.ones(1, 1, dtype=torch.long), past_key_values=cache)  # decode: one
        fn(torch.ones(2, 5, dtype=torch.long))                         # no cache: a plain forward
    real = TinyForCausalLM.forward.__wrapped__.__code__
    wrapper = TinyForCausalLM.forward.__code__
    assert [e.function for e in rec.events] == [
        "TinyForCausalLM.forward[prefill]", "TinyForCausalLM.forward[decode]",
        "TinyForCausalLM.forward"]
    assert {e.location for e in rec.events} == {f"{real.co_filename}:{real.co_firstlineno}"}
    assert all(e.metrics["frame"] == {"name": "wrapped_func", "location":
                                      f"{wrapper.co_filename}:{wrapper.co_firstlineno}"}
               for e in rec.events)
    assert [e.metrics.get("phase") for e in rec.events] == ["prefill", "decode", None]
    assert [e.graph_count for e in rec.events] == [1, 2, 3]  # one code object: torch's count
