"""Never eager unannounced: a compiling ``nk.generate`` call whose forward transformers (or torch)
did not compile says so in its result, in an ``eager_fallback`` event of the log, in the advice
and in one warning, with the reason; a call that compiled says nothing of the kind.

Cheap: a two-layer llama4_text built from its config (transformers 5.24 never compiles a
``llama4`` type's forward in generate) and the embedded tiny Qwen3, all eager on CPU.
"""
from __future__ import annotations

import types
import warnings

import pytest
import torch

import neuronkit as nk
from neuronkit.advice.uncompiled import uncompiled_findings
from neuronkit.events.event import CompileEvent
from neuronkit.views.text import format_events
from neuronkit.workloads.generate_eager import EagerForwardWarning, is_uncompiled, nothing_compiled

PROMPTS = ["the cat", "a mat and a hill over the sea while the rain fell on quiet rivers"]


@pytest.fixture(scope="module")
def llama4_text(tok):
    import transformers

    config = transformers.Llama4TextConfig(
        vocab_size=len(tok), hidden_size=64, intermediate_size=128, intermediate_size_mlp=128,
        num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2, head_dim=16,
        num_local_experts=2, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = transformers.Llama4ForCausalLM(config).eval()
    model.generation_config = transformers.GenerationConfig(
        do_sample=False, pad_token_id=tok.pad_token_id, eos_token_id=tok.eos_token_id)
    return model


def generate_warned(model, tok, prompts=PROMPTS, **kwargs):
    """nk.generate and the EagerForwardWarnings it gave."""
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        res = nk.generate(model, tok, prompts, max_new_tokens=4, buckets=[16, 32], batch_size=1,
                          backend="eager", **kwargs)
    return res, [w for w in caught if issubclass(w.category, EagerForwardWarning)]


def test_llama4_text_says_it_ran_eager_and_why(llama4_text, tok, tmp_path):
    log_path = tmp_path / "log.jsonl"
    with nk.CompileRecorder(log_path=log_path) as rec:
        res, warned = generate_warned(llama4_text, tok, recorder=rec)
    assert res.graphs == 0 and res.planned_graphs == 4       # 2 buckets x (prefill + decode)
    assert res.ran_eager and res.eager_calls == 0            # not the recompile limit
    assert "get_compiled_call" in res.eager_reason and "'llama4_text'" in res.eager_reason
    assert "ran EAGER, not compiled" in str(res)
    assert len(warned) == 1 and res.eager_reason in str(warned[0].message)   # once per call
    eager = [e for e in res.events if is_uncompiled(e)]
    assert [e.function for e in eager] == ["Llama4ForCausalLM.forward[prefill]",
                                           "Llama4ForCausalLM.forward[decode]"] * 2
    assert {e.metrics["not_compiled"]["cause"] for e in eager} == {"model_type"}
    assert sum(e.calls for e in eager) == res.new_tokens     # rows of 1: a forward per new token
    assert [e.seq for e in rec.log.events] == [e.seq for e in res.events]
    loaded = nk.CompileLog.load(log_path)                    # the JSONL schema takes them
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in rec.log.events]
    finding = next(a for a in nk.diagnose(loaded) if "never compiled" in a.title)
    assert finding.severity == "critical" and finding.numbers["cause"] == "model_type"
    assert finding.numbers["calls"] == sum(e.calls for e in eager)
    assert "get_compiled_call" in finding.detail and "kernel for each new input shape" in finding.detail
    assert "transformers decides it for this model type" in finding.fix
    table = format_events(loaded)
    assert table.count("not compiled") == 4 and "forward[decode]" in table
    rows = {row["function"]: row for row in loaded.summary()}
    assert rows["Llama4ForCausalLM.forward[decode]"]["eager_calls"] == res.new_tokens - 2
    assert rows["Llama4ForCausalLM.forward[prefill]"]["graphs"] == 0


def test_a_generation_config_that_disables_compile_is_named(model, tok, monkeypatch):
    monkeypatch.setattr(model.generation_config, "disable_compile", True)
    res, warned = generate_warned(model, tok)
    assert res.graphs == 0 and res.ran_eager and len(warned) == 1
    assert "disable_compile=True" in res.eager_reason
    causes = {e.metrics["not_compiled"]["cause"] for e in res.events if is_uncompiled(e)}
    assert causes == {"disable_compile"}
    finding = next(a for a in nk.diagnose(res.events) if "never compiled" in a.title)
    assert "disable_compile = False" in finding.fix


def test_a_compile_config_for_gpus_only_is_named_on_cpu(model, tok):
    from transformers import CompileConfig

    res, warned = generate_warned(model, tok, compile_config=CompileConfig(backend="eager"))
    assert res.graphs == 0 and len(warned) == 1
    assert "only on cuda/xpu/neuron/tpu" in res.eager_reason and "on cpu" in res.eager_reason
    assert {e.metrics["not_compiled"]["cause"] for e in res.events if is_uncompiled(e)} == {"device"}


@pytest.mark.slow   # two real (eager-backend) compiles
def test_a_compiled_run_says_nothing_of_the_kind(model, tok, compiler_reset):
    res, warned = generate_warned(model, tok, PROMPTS[:1])
    again, warned_again = generate_warned(model, tok, PROMPTS[:1])   # its graphs, reused
    assert res.graphs == 2 and again.graphs == 0 and not warned + warned_again
    for r in (res, again):
        assert not r.ran_eager and r.eager_reason == ""
        assert not [e for e in r.events if e.kind == "eager_fallback"]
        assert "EAGER" not in str(r)
    assert not uncompiled_findings(res.events)


def test_dynamo_switched_off_is_named():
    import torch._dynamo

    model = types.SimpleNamespace(forward=lambda **kw: None)
    # torch's own patch: pytest's monkeypatch deletes a config key on undo (a ConfigModule)
    with torch._dynamo.config.patch(disable=True):
        found = nothing_compiled(model, [])
    assert found is not None and found.cause == "dynamo_disabled"
    assert nothing_compiled(model, [CompileEvent(kind="first")]) is None   # a graph compiled


def test_limit_fallbacks_and_untrusted_logs_are_not_misread():
    limit = CompileEvent(kind="eager_fallback", function="f", calls=3)       # past the limit
    assert not is_uncompiled(limit) and not uncompiled_findings([limit])
    odd = CompileEvent(kind="eager_fallback", function="f", calls=2, rank=1,
                       metrics={"not_compiled": {"cause": 7, "reason": ["<b>"]}})
    (finding,) = uncompiled_findings([limit, odd])
    assert finding.numbers["cause"] == "unknown" and "no reason recorded" in finding.detail
    assert "TORCH_LOGS=dynamo" in finding.fix
