"""The kernel forecast: distinct eager-op kernel keys, counted on CPU, compiled code left alone."""
from __future__ import annotations

import functools
import warnings

import pytest
import torch
from torch._dynamo.utils import counters

import neuronkit as nk
from helpers.compiling import counting_backend
from neuronkit.sources.kernel_forecast import KernelForecast, forecast_kernels, reset_forecast
from neuronkit.sources.neuron import KERNELS_FUNCTION

ADD = "aten::add.Tensor"


@pytest.fixture(autouse=True)
def fresh_forecast():
    """Each test starts from a process that has seen no kernel key."""
    reset_forecast()
    yield
    reset_forecast()


def recorder(**kw):
    return nk.CompileRecorder(device="cpu", backend="eager", **kw)


# ---- the key ---------------------------------------------------------------------------------

def test_distinct_keys_exact_counts():
    a, b = torch.ones(2, 3), torch.ones(4)
    with forecast_kernels() as fc:
        a + 1
        b + 1                                   # another shape: another kernel
        assert fc.kernels == 2
        a + 1
        b + 1                                   # seen: not new
        assert fc.kernels == 2
        a.double() + 1                          # another dtype: the add (the cast to float64
        assert fc.ops == {ADD: 3}               # bounces through the CPU: no kernel)
        a + 7                                   # another value of the same scalar type: same key
        assert fc.kernels == 3
        a + 2.5                                 # another scalar type: a new key
        assert fc.ops[ADD] == 4
    assert fc.kernels == 4 and sum(fc.ops.values()) == 4


def test_non_scalar_arguments_count_by_value_and_no_kernel_ops_are_skipped():
    x = torch.arange(12.0).reshape(3, 4)        # made outside: not counted
    with forecast_kernels() as fc:
        x.sum(0)
        x.sum(1)                                # another dim: another kernel
        x.sum(1)
        x.view(4, 3), x[1:], x.t(), x.transpose(0, 1), x.unsqueeze(0)   # views: strided aliases
        torch.empty(5), x.new_empty(3)          # allocations
        x[0, 0].item()                          # a host read (the select is a view)
        x[:0] * 2                               # an empty input: short-circuited
        torch.arange(0, 5)
        torch.arange(0, 7)                      # arange keys its bounds by value: another kernel
    # arange.start runs as torch's composite, which calls the arange.start_out Neuron registers
    assert dict(fc.ops) == {"aten::sum.dim_IntList": 2, "aten::arange.start_out": 2}


def test_higher_order_ops_still_run():
    x = torch.ones(3)
    with forecast_kernels() as fc:
        y = torch.cond(x.sum() > 0, lambda v: v.sin(), lambda v: v.cos(), (x,))
    assert torch.equal(y, x.sin())
    # the cond itself: not keyed; gt.Scalar calls the gt.Scalar_out Neuron registers
    assert dict(fc.ops) == {"aten::sum": 1, "aten::gt.Scalar_out": 1}


def test_keys_are_per_process_until_reset():
    x = torch.ones(3)
    with forecast_kernels() as first:
        x * 2
    with forecast_kernels() as second:
        x * 2                                   # the process compiled it already
    assert (first.kernels, second.kernels) == (1, 0)
    reset_forecast()
    with forecast_kernels() as third:
        x * 2
    assert third.kernels == 1


def test_nested_forecasts_each_count_what_is_new():
    x = torch.ones(3)
    with forecast_kernels() as outer:
        x + 1
        with forecast_kernels() as inner:
            x + 1                               # seen by the process already
            x - 1
            with inner.counting():              # counting twice does not count twice
                x * 3
    assert (inner.kernels, outer.kernels) == (2, 3)
    assert torch._C._len_torch_dispatch_stack() == 0


def test_within_counts_only_inside_the_module():
    class Net(torch.nn.Module):
        def forward(self, x):
            return x * 2

    class Wrapped(torch.nn.Module):
        @staticmethod
        def _decorate(fn):
            @functools.wraps(fn)
            def wrapper(*args, **kwargs):
                return fn(*args, **kwargs)
            return wrapper

        @_decorate
        def forward(self, x):
            return x - 1

    net, wrapped, x = Net(), Wrapped(), torch.ones(3)
    with forecast_kernels(within=net) as fc:
        x + 1                                   # on the host: not counted
        net(x)
        wrapped(x)                              # another module: not counted
    assert dict(fc.ops) == {"aten::mul.Tensor": 1}
    with forecast_kernels(within=wrapped) as fc:
        wrapped(x)                              # decorators unwrapped
    assert dict(fc.ops) == {"aten::sub.Tensor": 1}
    with pytest.raises(TypeError, match="within"):
        KernelForecast(within=3)


# ---- events ----------------------------------------------------------------------------------

def test_one_event_per_checkpoint_with_new_kernels():
    x = torch.ones(3)
    with recorder(context="outer") as rec:
        with forecast_kernels(rec, label="prefill 16") as fc:
            x + 1
            x * 2
            x.sin()
            first = fc.checkpoint()
            assert fc.checkpoint() is None      # nothing new since: no event
            x + 1
            assert fc.checkpoint() is None
            x - 1                               # recorded at the end
    assert [e.kernels for e in rec.events] == [3, 1] and fc.events == rec.events
    assert first is rec.events[0]
    for e in rec.events:
        assert (e.kind, e.function, e.forecast, e.context) == ("kernels", KERNELS_FUNCTION, True,
                                                              "prefill 16")
        assert e.started_at > 0 and e.device == "cpu"
        assert "forecast counted on cpu" in e.reasons[0] and "not measured on Neuron" in e.reasons[0]
    assert rec.events[0].ops == {ADD: 1, "aten::mul.Tensor": 1, "aten::sin": 1}
    assert rec.log.summary()[0]["kernels"] == 4


def test_without_a_recorder_it_only_counts():
    with forecast_kernels() as fc:
        torch.ones(3) + 1
    assert fc.kernels == 2 and fc.events == [] and fc.checkpoint() is None


def test_events_take_the_recorders_label_by_default():
    with recorder() as rec:
        with rec.context("step 4"), forecast_kernels(rec):
            torch.ones(3) * 5
    assert [e.context for e in rec.events] == ["step 4"]


# ---- compiled code ---------------------------------------------------------------------------

@torch._dynamo.disable
def _host_step(x):
    return x * 3                                # runs eagerly between two graphs: a kernel on Neuron


def _two_graphs(x):
    y = torch.sin(x) + 1
    y = _host_step(y)
    return torch.cos(y) - 2


def _compile_run(backend_name, forecast: bool):
    """Graphs Dynamo built, its frame counts, and the forecast's ops, for a fixed call sequence:
    one call before the forecast starts (compiled outside it), then three inside."""
    torch.compiler.reset()
    counters.clear()
    reset_forecast()
    backend = counting_backend() if backend_name == "counting" else backend_name
    fn = torch.compile(_two_graphs, backend=backend, dynamic=False)
    a, b = torch.ones(3), torch.ones(5)
    fn(a)
    fc = None
    if forecast:
        with forecast_kernels() as fc:
            fn(a), fn(a), fn(b)
    else:
        fn(a), fn(a), fn(b)
    graphs = backend.graphs if backend_name == "counting" else None
    return (graphs, dict(counters["stats"]), dict(counters["frames"])), fc


@pytest.mark.parametrize("backend", ["counting", "eager", "aot_eager"])
def test_compiles_unchanged_and_compiled_ops_not_counted(backend):
    without, _ = _compile_run(backend, forecast=False)
    with_forecast, fc = _compile_run(backend, forecast=True)
    assert with_forecast == without                     # same compiles, same graphs
    assert without[1]["unique_graphs"] == 4             # 2 graphs per shape: torch really compiled
    # only the op run between the graphs, once per shape (the call before the forecast is not
    # counted: nothing was marked seen); sin/add/cos/sub ran inside compiled graphs
    assert dict(fc.ops) == {"aten::mul.Tensor": 2} and fc.kernels == 2


def test_a_compiled_module_counts_nothing_but_its_eager_fallback():
    torch.compiler.reset()
    lin = torch.nn.Linear(4, 4)
    compiled = torch.compile(lin, backend="aot_eager", dynamic=False)
    x = torch.ones(2, 4)
    with forecast_kernels(within=lin) as fc:
        compiled(x)
    assert fc.kernels == 0
    with forecast_kernels(within=lin) as fc:
        lin(x)                                          # the same module run eagerly
    assert dict(fc.ops) == {"aten::linear": 1}          # Neuron's one kernel for nn.Linear
    torch.compiler.reset()


# ---- nk.generate -----------------------------------------------------------------------------

def test_generate_forecast_per_batch_then_nothing_new_then_a_new_bucket(model, tok, compiler_reset):
    short, longer = "the cat sat on a mat", "the rain fell over the quiet hills and rivers"
    assert len(tok(short)["input_ids"]) <= 16 < len(tok(longer)["input_ids"]) <= 32
    # transformers' eager prefill: each new prompt shape is a batch of eager kernels on Neuron
    kw = dict(max_new_tokens=3, buckets=[16, 32], batch_size=1, backend="eager", prefill="eager")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        first = nk.generate(model, tok, [short], forecast_kernels=True, **kw)
        again = nk.generate(model, tok, [short], forecast_kernels=True, **kw)
        grown = nk.generate(model, tok, [short, longer], forecast_kernels=True, **kw)
        off = nk.generate(model, tok, [longer], **kw)
    kernels = [e for e in first.events if e.kind == "kernels"]
    assert len(kernels) == 1 and kernels[0].forecast
    assert kernels[0].context == "generate batch 0: bucket 16, cache 48"
    assert first.forecast_kernels == kernels[0].kernels >= 10
    assert "forecast: " in str(first) and "eager kernels" in str(first)
    # the same prompt shape again: every kernel is in the process already
    assert again.forecast_kernels == 0 and not [e for e in again.events if e.kind == "kernels"]
    assert "forecast" not in str(again)
    # a new bucket: its prefill shapes are new kernels, in the second batch's event only
    kernels = [e for e in grown.events if e.kind == "kernels"]
    assert [e.context for e in kernels] == ["generate batch 1: bucket 32, cache 64"]
    assert grown.forecast_kernels == kernels[0].kernels > 0
    assert grown.graphs == 1 and again.graphs == 0       # compiles as usual
    assert off.forecast_kernels == 0 and not [e for e in off.events if e.kind == "kernels"]


def test_generate_forecast_is_off_unless_asked_and_leaves_the_output_alone(model, tok,
                                                                          compiler_reset):
    stacks: list[int] = []

    def note_modes(input_ids, scores):
        stacks.append(torch._C._len_torch_dispatch_stack())
        return scores

    kw = dict(max_new_tokens=4, buckets=[16], batch_size=1, compile=False,
              logits_processor=[note_modes])
    plain = nk.generate(model, tok, ["a cat"], **kw)
    assert set(stacks) == {0} and plain.forecast_kernels == 0     # no mode, no overhead
    stacks.clear()
    counted = nk.generate(model, tok, ["a cat"], forecast_kernels=True, **kw)
    assert set(stacks) == {1} and counted.texts == plain.texts
    assert torch._C._len_torch_dispatch_stack() == 0
    # eager decode steps are eager kernels on Neuron too: more than a compiled decode's forecast
    reset_forecast()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        compiled = nk.generate(model, tok, ["a cat"], forecast_kernels=True, backend="eager",
                               prefill="eager", **{**kw, "compile": True})
        reset_forecast()
        whole = nk.generate(model, tok, ["a cat"], forecast_kernels=True, backend="eager",
                            **{**kw, "compile": True})                  # prefill compiled too
    assert 0 < compiled.forecast_kernels < counted.forecast_kernels
    assert whole.forecast_kernels == 0 and whole.texts == plain.texts   # nothing eager left
    assert compiled.eager_ops > 0 and whole.eager_ops == 0             # the prefill's op calls
