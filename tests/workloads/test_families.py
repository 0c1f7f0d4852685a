"""The static-shape promise on every family: Llama, Qwen3, Phi-3, Mistral (sliding window) and
Gemma 3 text (sliding + full layers), tiny seeded random-weight models built from their configs.

For each: decode graphs <= the plan's bound, no recompile-limit hit, and greedy tokens equal to
plain unpadded ``model.generate`` (dynamic cache, eager, fp32). Then the shared decode function's
limit: 10 buckets, four model classes in one process, and a forced limit hit counted exactly.
"""
from __future__ import annotations

import types

import pytest
import torch

import neuronkit as nk
from neuronkit.examples.families import SLIDING, tiny_family
from neuronkit.setup.decode_graphs import RecompileLimitWarning, decode_code, held_graphs
from neuronkit.workloads.padding_check import left_padding_verdict
from neuronkit.workloads.static_cache import UnboundedCacheError, bounded_static_cache

PROMPTS = ["the cat", "the cat sat on a mat while rain fell", "quiet hills and rivers ran to the sea",
           "a mat", "rain fell over quiet hills and the cat sat on a mat while rivers ran"]


def plain_greedy(model, tok, prompt, max_new_tokens):
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        return model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)[0].tolist()


@pytest.mark.slow   # the sliding-window families; the others: tests/examples/test_family_matrix.py
@pytest.mark.parametrize("family", SLIDING)
def test_family_bounded_and_exact(family, tok, compiler_reset):
    model = tiny_family(family, tok, sliding_window=8)   # window 8 < every cache length here
    buckets = nk.Buckets([8, 32])
    lengths = [len(tok(p)["input_ids"]) for p in PROMPTS]
    assert {buckets.fit(n) for n in lengths} == {8, 32}
    res = nk.generate(model, tok, PROMPTS, max_new_tokens=12, buckets=buckets, batch_size=2)
    assert res.planned_graphs == 4                        # 2 buckets x (prefill + decode)
    assert 1 <= res.graphs <= res.planned_graphs
    assert not [e for e in res.events if e.kind in ("limit_hit", "eager_fallback")]
    assert res.eager_calls == 0
    assert res.full_layers == {"mistral": 2, "gemma3": 1}.get(family, 0)
    for prompt, ids in zip(PROMPTS, res.output_ids, strict=True):
        assert ids.tolist() == plain_greedy(model, tok, prompt, 12), (family, prompt)


@pytest.mark.slow
def test_seed_recipe_on_a_sliding_window_model_compiles_per_token(tok, compiler_reset):
    """The problem nk.generate fixes, measured: the plain static recipe on Mistral compiles one
    graph per decode step, and the advice names the Python int."""
    model = tiny_family("mistral", tok, sliding_window=8)
    cc = nk.compile_config("eager")
    enc = tok([PROMPTS[1]], return_tensors="pt")
    with nk.CompileRecorder() as rec:
        model.generate(**enc, max_new_tokens=6, cache_implementation="static", compile_config=cc)
    assert len([e for e in rec.events if e.kind in ("first", "recompile")]) >= 5
    assert any("cumulative_length_int" in e.changed for e in rec.events)
    finding = next(a for a in nk.diagnose(rec.log) if "one graph per step" in a.title)
    assert "cumulative_length_int" in finding.numbers["name"] and "nk.generate" in finding.fix


def test_unbounded_cache_layers_are_refused_up_front():
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=2, num_attention_heads=4,
                                   num_key_value_heads=2)
    cfg.layer_types = ["full_attention", "indexed_attention"]
    with pytest.raises(UnboundedCacheError, match="layer 1 is a StaticIndexedLayer.*compile=False"):
        bounded_static_cache(types.SimpleNamespace(config=cfg), 16)
    cache, replaced = bounded_static_cache(types.SimpleNamespace(config=cfg), 16,
                                           refuse_unbounded=False)
    assert replaced == 0 and type(cache.layers[1]).__name__ == "StaticIndexedLayer"


def test_linear_attention_layers_are_kept_and_hybrid_sliding_ones_made_full_length():
    import transformers

    cfg = transformers.LlamaConfig(vocab_size=64, hidden_size=64, intermediate_size=128,
                                   num_hidden_layers=3, num_attention_heads=4,
                                   num_key_value_heads=2)
    cfg.layer_types = ["full_attention", "linear_attention", "hybrid_sliding"]
    cfg.sliding_window = 4
    cache, replaced = bounded_static_cache(types.SimpleNamespace(config=cfg), 16)
    assert replaced == 1
    assert [type(x).__name__ for x in cache.layers] == [
        "StaticLayer", "LinearAttentionLayer", "LinearAttentionAndStaticFullAttentionLayer"]
    cfg.layer_types = ["linear_attention"] * 3          # nothing keeps keys: still has a length
    only_linear, _ = bounded_static_cache(types.SimpleNamespace(config=cfg), 16)
    assert only_linear.get_seq_length() == 0


def padding_checked(model, tok) -> None:
    """Run nk.generate's left-padding probe now (once per model), so it is not counted later."""
    assert left_padding_verdict(model, tok("the cat sat")["input_ids"], tok.pad_token_id) is None


# ---- the shared decode function and torch's recompile limit --------------------------------

def bucket_prompts(tok, buckets):
    """One prompt per bucket, each longer than the bucket below."""
    prompts, words = [], 1
    for b in buckets:
        while len(tok("word " * words)["input_ids"]) <= b - 4:
            words += 1
        prompts.append("word " * words)
        assert buckets.fit(len(tok(prompts[-1])["input_ids"])) == b
    return prompts


def eager_decode_counter(model):
    """Counts decode calls (one new token) that run outside compiled code, independently of
    neuronkit: a hook on the embedding, inside the decode frame, is traced away when the frame
    is compiled and runs when torch falls back to eager."""
    calls: list[tuple[int, ...]] = []

    def hook(module, args):
        if not torch.compiler.is_compiling() and args[0].shape[-1] == 1:
            calls.append(tuple(args[0].shape))
    model.get_input_embeddings().register_forward_pre_hook(hook)
    return calls


@pytest.mark.slow
def test_six_graphs_compile_without_a_limit_hit(tok, tiny_model_path, compiler_reset,
                                                recompile_limit_4):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    buckets = nk.Buckets([4, 8, 12])                          # 3 buckets x (prefill + decode)
    res = nk.generate(model, tok, bucket_prompts(tok, buckets), max_new_tokens=3,
                      buckets=buckets, batch_size=1)
    assert res.planned_graphs == 6 and res.graphs == 6
    assert not [e for e in res.events if e.kind == "limit_hit"] and res.eager_calls == 0
    fit = res.recompile_limit
    assert (fit.limit_before, fit.limit, fit.held, fit.planned) == (4, 6, 0, 6)
    assert torch._dynamo.config.recompile_limit == 4          # restored, never lowered
    assert all(e.metrics["recompile_limit"]["limit"] == 6 for e in res.events)


@pytest.mark.slow
def test_four_model_classes_share_the_decode_limit(tok, compiler_reset):
    buckets = nk.Buckets([8, 16])
    prompts = bucket_prompts(tok, buckets)
    total, held = 0, []
    for family in ("llama", "qwen3", "mistral"):      # one shared wrapped_func; 12 graphs > 8
        model = tiny_family(family, tok)
        res = nk.generate(model, tok, prompts, max_new_tokens=3, buckets=buckets, batch_size=1)
        assert res.graphs == 4 and res.eager_calls == 0, family   # prefill + decode per bucket
        assert not [e for e in res.events if e.kind == "limit_hit"], family
        held.append(res.recompile_limit.held)
        total += res.graphs
    assert total == 12 and held == [0, 4, 8]
    assert held_graphs(decode_code(model)) == 12


@pytest.mark.slow
def test_forced_limit_hit_yields_exact_eager_fallback_events(tok, tiny_model_path, compiler_reset,
                                                             recompile_limit_4):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    padding_checked(model, tok)                  # its two eager probe steps, before counting
    witness = eager_decode_counter(model)
    buckets = nk.Buckets(list(range(4, 28, 4)))
    prompts = bucket_prompts(tok, buckets)
    with pytest.warns(RecompileLimitWarning, match="holds 0 graphs .* 6 more"):
        res = nk.generate(model, tok, prompts, max_new_tokens=5, buckets=buckets, batch_size=1,
                          fit_recompile_limit=False, prefill="eager")  # decode graphs alone
    kinds = [e.kind for e in res.events]
    assert kinds.count("first") + kinds.count("recompile") == 4 and kinds.count("limit_hit") == 1
    eager = [e for e in res.events if e.kind == "eager_fallback"]
    assert len(eager) == 2                                   # buckets 20 and 24 ran eager
    assert [e.input_shapes["cache"][1] for e in eager] == [20 + 32, 24 + 32]
    assert sum(e.calls for e in eager) == res.eager_calls == len(witness) == 2 * 4
    assert all("generate batch" in e.context for e in eager)
    advice = next(a for a in nk.diagnose(res.events) if "recompile limit hit" in a.title)
    assert advice.numbers["exact"] and "recompile_limit to 6 " in advice.fix

    # the decode function is full: loading another model says so before generating
    with pytest.warns(RecompileLimitWarning, match="already holds 4 graphs"):
        nk.load_model(tiny_model_path, device="cpu", dtype="float32")

    # nk.generate with the limit fitted compiles the refused shapes after all: no eager calls
    witness.clear()
    res = nk.generate(model, tok, prompts[4:], max_new_tokens=5, buckets=buckets, batch_size=1,
                      prefill="eager")
    assert res.recompile_limit.reenabled and res.graphs == 2 and res.eager_calls == 0
    assert witness == []
