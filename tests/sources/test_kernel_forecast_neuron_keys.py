"""The kernel forecast keys ops as native torch-neuronx would: the op it runs instead of the CPU's
(attention, ``nn.Linear``, structured ops), its dtype rules, and a named list of what it cannot map
(``neuronkit/sources/neuron_op_keys.py`` cites the source for each)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
import transformers

import neuronkit as nk
from neuronkit.sources.kernel_forecast import forecast_kernels, reset_forecast

SDPA = "aten::_scaled_dot_product_fused_attention_overrideable"
CPU_SDPA = "aten::_scaled_dot_product_flash_attention_for_cpu"


@pytest.fixture(autouse=True)
def fresh_forecast():
    reset_forecast()
    yield
    reset_forecast()


@pytest.fixture(scope="module")
def tiny_gqa():
    """A random-weight Qwen3 decoder with grouped-query attention (4 query, 2 key/value heads)."""
    torch.manual_seed(0)
    cfg = transformers.Qwen3Config(vocab_size=128, hidden_size=32, intermediate_size=64,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2, head_dim=8, max_position_embeddings=64)
    return transformers.AutoModelForCausalLM.from_config(cfg, attn_implementation="sdpa").eval()


def _qkv(heads=4, kv_heads=2, seq=7, dim=8, dtype=torch.float32):
    return (torch.randn(1, heads, seq, dim, dtype=dtype), torch.randn(1, kv_heads, seq, dim, dtype=dtype),
            torch.randn(1, kv_heads, seq, dim, dtype=dtype))


# ---- attention -------------------------------------------------------------------------------

def test_a_decoder_forecasts_neurons_attention_op_not_the_cpu_one(tiny_gqa):
    ids = torch.randint(0, 128, (1, 7))
    with torch.no_grad(), forecast_kernels(within=tiny_gqa) as fc:
        tiny_gqa(input_ids=ids)
    assert fc.ops[SDPA] == 1                       # two layers, one shape: one kernel
    assert not [op for op in fc.ops if "_for_cpu" in op]
    assert "aten::linear" in fc.ops and "aten::mm" not in fc.ops and "aten::addmm" not in fc.ops
    assert fc.unmapped == {}


def test_attention_keys_the_scale_neuron_computes_and_its_helper_kernels():
    q, k, v = _qkv()
    with forecast_kernels() as fc:
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True)
        # the same scale given explicitly: torch-neuronx computes 1/sqrt(head_dim) when it is
        # None, then keys the value, so both calls share one kernel
        F.scaled_dot_product_attention(q, k, v, is_causal=True, enable_gqa=True,
                                       scale=1 / 8 ** 0.5)
    assert fc.ops[SDPA] == 1
    # a one-element zeros for the missing mask, and key/value repeated to the query's heads
    assert fc.ops["aten::zeros"] == 1 and fc.ops["aten::contiguous"] == 1
    assert fc.ops["aten::copy_"] == 1


def test_attention_in_float64_gets_no_kernel_and_is_named():
    q, k, v = _qkv(heads=2, dtype=torch.float64)
    with forecast_kernels() as fc:
        F.scaled_dot_product_attention(q, k, v)
    assert SDPA not in fc.ops and CPU_SDPA not in fc.ops
    assert CPU_SDPA in fc.unmapped and "float64" in fc.unmapped[CPU_SDPA]


def test_attention_the_cpu_ran_on_torchs_math_path_is_named():
    q, k, v = _qkv(heads=2)
    with forecast_kernels() as fc:
        F.scaled_dot_product_attention(q, k, v, dropout_p=0.5)    # the CPU's flash takes no dropout
    assert "math path" in fc.unmapped["aten::_safe_softmax"]


# ---- other ops Neuron runs under another name ------------------------------------------------

def test_linear_is_one_neuron_kernel_not_the_cpus_matmul():
    lin, x, y = torch.nn.Linear(4, 3), torch.ones(2, 5, 4), torch.ones(2, 5, 4)
    with forecast_kernels() as fc:
        lin(x)
        lin(y)                                    # same shapes: same kernel
    assert dict(fc.ops) == {"aten::linear": 1}


def test_structured_ops_key_as_their_registered_out_variant_with_static_args():
    x, y = torch.rand(3, 4) + 1, torch.rand(4) + 1
    with forecast_kernels() as fc:
        x / y                                     # div.Tensor: Neuron registers div.out
        x.pow(2)
        x.pow(3)                                  # pow keys its exponent by value
    assert dict(fc.ops) == {"aten::div.out": 1, "aten::pow.Tensor_Scalar_out": 2}


# ---- dtypes ----------------------------------------------------------------------------------

def test_int64_and_int32_inputs_are_two_kernels_keyed_before_the_cast():
    a, b = torch.arange(6).reshape(2, 3), torch.arange(6, dtype=torch.int32).reshape(2, 3)
    with forecast_kernels() as fc:
        a * a
        b * b                                     # the cast to int32 comes after the key
    assert fc.ops["aten::mul.Tensor"] == 2


def test_casts_through_the_cpu_compile_nothing_the_others_a_copy_kernel():
    x, i = torch.ones(3, 4), torch.arange(12).reshape(3, 4)
    with forecast_kernels() as fc:
        x.double()                                # to float64: a CPU bounce, no kernel
        i.to(torch.int32)                         # int64 -> int32 takes the bounce too
        x.to(torch.bfloat16)                      # on the device: torch-mlir's _to_copy
        x.to(torch.int64)                         # int64 is not excluded there
        x.to(torch.int32)                         # int32 is: a device cast, keyed aten::copy_
    assert dict(fc.ops) == {"aten::_to_copy": 2, "aten::copy_": 1}


# ---- what cannot be mapped is named ----------------------------------------------------------

def test_an_op_without_a_neuron_kernel_is_named_in_the_event_and_the_forecast():
    x = torch.ones(8)
    with nk.CompileRecorder(device="cpu", backend="eager") as rec:
        with forecast_kernels(rec, label="step") as fc:
            x + 1
            x.bernoulli_(0.5)                     # torch-neuronx registers no kernel for it
            x.bernoulli_(0.25)
    assert "aten::bernoulli_.float" in fc.unmapped and fc.unmapped_calls["aten::bernoulli_.float"] == 2
    assert "not mapped: aten::bernoulli_.float" in repr(fc)
    (event,) = rec.events
    assert event.kernels == 1 and event.metrics["not_mapped"] == {"aten::bernoulli_.float": 2}
    assert any(r.startswith("not mapped: aten::bernoulli_.float") for r in event.reasons)


def test_unmapped_names_reach_the_terminal_filtered():
    from neuronkit.sources import kernel_forecast

    forecast = kernel_forecast.KernelForecast()
    forecast._not_mapped("aten::evil\x1b[31m", "why\x1b]0;title\x07")
    assert "\x1b" not in repr(forecast)


def test_dropout_in_training_is_neurons_fused_native_dropout():
    x, y = torch.ones(4, 8), torch.ones(4, 8)
    with forecast_kernels() as fc:
        F.dropout(x, 0.1, training=True)          # the CPU decomposes it: bernoulli_, div_, mul
        F.dropout(y, 0.1, training=True)
        F.dropout(x, 0.1, training=False)         # no op at all
    assert dict(fc.ops) == {"aten::native_dropout": 1}
    assert list(fc.unmapped) == ["aten::native_dropout"]      # keyed on rewritten arguments
