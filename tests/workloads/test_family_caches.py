"""Families beyond plain attention: linear-attention and state-space caches hold (Qwen3.5's gated
delta net, Mamba), and models whose output left padding changes (BART-style decoders, RWKV) are
refused before anything runs, with the reason and the fix. Tiny seeded random-weight models."""
from __future__ import annotations

import types

import pytest
import torch

import neuronkit as nk
from neuronkit.workloads.padding_check import LeftPaddingError, _read_off, left_padding_verdict

PROMPTS = ["the cat", "the cat sat on a mat while rain fell over the quiet hills and rivers ran",
           "quiet hills", "a mat", "rain fell over quiet hills and the sea was calm that day",
           "the sea"]


def tiny(kind: str, tok):
    """A seeded 2-layer model of ``kind`` sized to the embedded tokenizer."""
    import transformers
    from transformers import AutoModelForCausalLM, GenerationConfig

    ids = dict(vocab_size=len(tok), pad_token_id=tok.pad_token_id,
               eos_token_id=tok.eos_token_id, bos_token_id=tok.eos_token_id)
    if kind == "qwen3_5":
        config = transformers.Qwen3_5TextConfig(
            **ids, hidden_size=64, intermediate_size=128, num_hidden_layers=2,
            num_attention_heads=4, num_key_value_heads=2, head_dim=16, linear_num_key_heads=2,
            linear_num_value_heads=4, linear_key_head_dim=16, linear_value_head_dim=16,
            layer_types=["linear_attention", "full_attention"])
    elif kind == "mamba":
        config = transformers.MambaConfig(**ids, hidden_size=64, state_size=8, num_hidden_layers=2,
                                          time_step_rank=8, intermediate_size=128)
    elif kind == "bart":
        config = transformers.BartConfig(**ids, d_model=64, decoder_layers=2, encoder_layers=2,
                                         decoder_attention_heads=4, encoder_attention_heads=4,
                                         decoder_ffn_dim=128, encoder_ffn_dim=128,
                                         max_position_embeddings=256)
    elif kind == "rwkv":
        config = transformers.RwkvConfig(**ids, hidden_size=64, attention_hidden_size=64,
                                         intermediate_size=128, num_hidden_layers=2,
                                         context_length=256)
    else:
        raise ValueError(kind)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=tok.pad_token_id,
                                               eos_token_id=tok.eos_token_id)
    return model


def plain(model, tok, prompt: str, max_new_tokens: int) -> list[int]:
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        return model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)[0].tolist()


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["qwen3_5", "mamba"])
def test_linear_attention_families_hold(kind, tok, compiler_reset):
    model = tiny(kind, tok)
    lengths = [len(tok(p)["input_ids"]) for p in PROMPTS]
    assert min(lengths) < 16 < max(lengths) <= 32                 # both buckets, padded rows
    res = nk.generate(model, tok, PROMPTS, max_new_tokens=6, buckets=[16, 32], batch_size=2,
                      backend="eager")
    assert res.graphs <= res.planned_graphs == 4 and res.eager_calls == 0, kind
    assert not [e for e in res.events if e.kind == "limit_hit"]
    for prompt, ids in zip(PROMPTS, res.output_ids, strict=True):
        assert ids.tolist() == plain(model, tok, prompt, 6), (kind, prompt)
    # a batch in which no row is padded reuses the padded batches' prefill graph
    full = "rain fell over quiet hills and the sea"
    while len(tok(full)["input_ids"]) < 16:
        full += " again"
    full_ids = tok(full)["input_ids"][:16]
    again = nk.generate(model, tok, [tok.decode(full_ids)] * 2, max_new_tokens=6,
                        buckets=[16, 32], batch_size=2, backend="eager")
    assert again.graphs == 0, [str(e) for e in again.events]


@pytest.mark.slow
def test_models_that_left_padding_changes_are_refused_before_generating(tok, compiler_reset):
    kind, why = "bart", "differ by up to"
    model = tiny(kind, tok)
    calls = []
    real = model.generate
    for compile in (True, False):                                   # eager would differ too
        with pytest.raises(LeftPaddingError, match=f"{type(model).__name__}: left padding "
                           f"changes .*{why}.*buckets=None, batch_size=1"):
            nk.generate(model, tok, PROMPTS[:2], max_new_tokens=4, buckets=[16, 32],
                        batch_size=2, compile=compile, backend="eager")
    model.generate = lambda **kw: calls.append(kw) or real(**kw)    # the verdict is kept
    with pytest.raises(LeftPaddingError):
        nk.warmup(model, tok, [16], batch_sizes=[1], max_new_tokens=2, backend="eager")
    assert calls == []
    # the fix the message names: each prompt alone, unpadded, gives plain generate's tokens
    res = nk.generate(model, tok, PROMPTS[:3], max_new_tokens=4, buckets=None, batch_size=1,
                      compile=False)
    for prompt, ids in zip(PROMPTS[:3], res.output_ids, strict=True):
        assert ids.tolist() == plain(model, tok, prompt, 4), (kind, prompt)


def test_off_the_cpu_the_verdict_is_read_off_the_model_without_running_it():
    def forward_with(*names):
        params = ", ".join(names)
        scope: dict = {}
        exec(f"def forward(input_ids, {params}): pass", scope)
        return scope["forward"]

    def model(forward, layer_types=None):
        text = types.SimpleNamespace(layer_types=layer_types)
        return types.SimpleNamespace(forward=forward, config=types.SimpleNamespace(
            get_text_config=lambda decoder=True: text))

    assert _read_off(model(forward_with("attention_mask", "position_ids"))) is None
    assert _read_off(model(forward_with("attention_mask"), ["linear_attention"] * 2)) is None
    assert "no position_ids" in _read_off(model(forward_with("attention_mask")))
    assert "no position_ids" in _read_off(model(forward_with("attention_mask"),
                                                ["linear_attention", "full_attention"]))


def test_the_padding_probe_runs_once_per_model(tiny_model_path, tok):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    calls = []
    real = model.generate
    model.generate = lambda **kw: calls.append(kw) or real(**kw)
    ids = tok("the cat sat")["input_ids"]
    assert left_padding_verdict(model, ids, tok.pad_token_id) is None
    assert len(calls) == 2                          # alone, and behind the pad tokens
    assert left_padding_verdict(model, ids, tok.pad_token_id) is None and len(calls) == 2


@pytest.mark.slow
def test_a_model_that_recompiles_every_step_is_stopped_at_the_first_graph_over_the_plan(
        tok, compiler_reset):
    from neuronkit.examples.families import tiny_family
    from neuronkit.workloads.graph_watch import UnboundedGraphsError

    model = tiny_family("llama", tok)
    norm = model.model.norm

    def per_step_value(input_ids, scores):       # a Python float the graph reads, new each step
        norm.variance_epsilon = 1e-6 * input_ids.shape[1]
        return scores

    with nk.CompileRecorder() as rec, pytest.raises(
            UnboundedGraphsError, match=r"LlamaForCausalLM: 3 graphs compiled where the plan "
                                        r"allows 2 .*variance_epsilon.*compile=False"):
        nk.generate(model, tok, PROMPTS[:2], max_new_tokens=8, buckets=[32], batch_size=2,
                    backend="eager", recorder=rec, logits_processor=[per_step_value])
    kinds = [e.kind for e in rec.events]  # the prefill's and the decode's first, then one more
    assert kinds.count("first") == 2 and kinds.count("recompile") == 1   # kept, and no more


def test_a_model_without_a_kv_cache_is_refused_before_anything_runs(tok, compiler_reset):
    model = tiny("rwkv", tok)                      # keeps a recurrent `state` of its own
    calls = []
    model.generate = lambda **kw: calls.append(kw)
    for compile in (True, False):
        with pytest.raises(nk.UnboundedCacheError, match="RwkvForCausalLM: its forward takes "
                           "neither cache nor past_key_values.*model.generate directly"):
            nk.generate(model, tok, PROMPTS[:2], max_new_tokens=4, buckets=None, batch_size=1,
                        compile=compile)
    assert calls == []                             # not even the padding probe


def test_a_static_cache_failure_names_the_cache_and_the_fix(tiny_model_path, tok, monkeypatch):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")

    def fails(**kw):
        if "max_new_tokens" in kw and kw.get("output_logits"):  # the padding probe
            return real(**kw)
        raise IndexError("index_copy_(): index 48 is out of bounds for dimension 2 with size 48")
    real = model.generate
    monkeypatch.setattr(model, "generate", fails)
    from neuronkit.workloads.generation import StaticCacheError

    with pytest.raises(StaticCacheError, match=r"failed on a 2x32 batch with a static cache of "
                                               r"\d+ positions \(IndexError: index_copy_.*"
                                               r"compile=False"):
        nk.generate(model, tok, PROMPTS[:2], max_new_tokens=4, buckets=[32], batch_size=2,
                    compile=False)


@pytest.mark.slow
def test_a_sliding_window_kept_by_the_cache_is_refused_once_sequences_outgrow_it(
        tok, compiler_reset):
    from neuronkit.examples.any_family import tiny_causal_lm

    model = tiny_causal_lm("moshi", tok)            # window 8, applied by its cache layers
    assert model.config.get_text_config().sliding_window == 8
    short = ["the cat", "a mat"]                     # 2 + 3 tokens, 2 new: within the window
    res = nk.generate(model, tok, short, max_new_tokens=2, buckets=[4], batch_size=2,
                      backend="eager")
    for prompt, ids in zip(short, res.output_ids, strict=True):
        assert ids.tolist() == plain(model, tok, prompt, 2), prompt
    with pytest.raises(LeftPaddingError, match="MoshiForCausalLM: its sliding window of 8 is "
                       "kept by its cache.*within the window"):
        nk.generate(model, tok, short, max_new_tokens=8, buckets=[4], batch_size=2,
                    backend="eager")
