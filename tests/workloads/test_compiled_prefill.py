"""The whole generate from compiled graphs: after nk.warmup, serving runs the model's forward
uncompiled zero times, compiles nothing, hits no limit, and gives plain generate's greedy tokens,
on Qwen3, Llama, Mistral and Gemma 3 (tiny seeded random-weight models)."""
from __future__ import annotations

import pytest
import torch

import neuronkit as nk
from neuronkit.examples.families import tiny_family
from neuronkit.workloads.padding_check import left_padding_verdict

PROMPTS = ["the cat", "the cat sat on a mat while rain fell", "quiet hills and rivers ran",
           "a mat", "rain fell over quiet hills", "the sea", "hills", "the cat sat on a mat"]


class UncompiledForwards:
    """Counts the model's forward calls that ran uncompiled: a hook on the embeddings counts only
    when ``torch.compiler.is_compiling()`` is false (traced into a graph, it counts nothing)."""

    def __init__(self, model) -> None:
        self.calls = 0
        self.handle = model.get_input_embeddings().register_forward_pre_hook(self._hook)

    def _hook(self, module, args) -> None:
        if not torch.compiler.is_compiling():
            self.calls += 1


def plain_greedy(model, tok, prompt: str, max_new_tokens: int) -> list[int]:
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        out = model.generate(**enc, max_new_tokens=max_new_tokens, do_sample=False)
    return out[0].tolist()


@pytest.mark.slow  # four families, each warmed up and served (~10 s each on 2 cores)
@pytest.mark.parametrize("family", ["qwen3", "llama", "mistral", "gemma3"])
def test_after_warmup_serving_runs_nothing_uncompiled(family, tok, compiler_reset):
    model = tiny_family(family, tok, sliding_window=8)
    buckets, batch = [16, 32], 2
    manifest = nk.warmup(model, tok, buckets, batch_sizes=[batch], max_new_tokens=5,
                         backend="eager")
    assert [(g["prefill_graphs"], g["decode_graphs"]) for g in manifest.graphs] == [(1, 1)] * 2
    counter = UncompiledForwards(model)
    with nk.CompileRecorder() as rec:
        res = nk.generate(model, tok, PROMPTS, max_new_tokens=5, buckets=buckets,
                          batch_size=batch, backend="eager", recorder=rec)
    counter.handle.remove()
    assert counter.calls == 0, family                      # prefill and decode: all compiled
    assert rec.events == [] and res.graphs == 0 and res.eager_calls == 0
    for prompt, ids in zip(PROMPTS, res.output_ids, strict=True):
        assert ids.tolist() == plain_greedy(model, tok, prompt, 5), (family, prompt)


def test_eager_prefill_runs_one_uncompiled_forward_per_batch(tiny_model_path, tok, compiler_reset):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    assert left_padding_verdict(model, tok("the cat")["input_ids"], tok.pad_token_id) is None
    counter = UncompiledForwards(model)                    # counted after the padding probe
    eager = nk.generate(model, tok, PROMPTS[:4], max_new_tokens=3, buckets=[16, 32],
                        batch_size=2, backend="eager", prefill="eager")
    assert counter.calls == len(eager.timings)             # transformers' prefill, uncompiled
    counter.calls = 0
    torch.compiler.reset()
    whole = nk.generate(model, tok, PROMPTS[:4], max_new_tokens=3, buckets=[4, 16],
                        batch_size=2, backend="eager")
    counter.handle.remove()
    assert counter.calls == 0 and len(whole.cache_lengths) == 2
    phases = sorted(e.metrics.get("phase") for e in whole.events if e.kind in ("first", "recompile"))
    assert phases == ["decode", "decode", "prefill", "prefill"]     # 2 per (batch size, bucket)
    assert whole.planned_graphs == 4 and eager.planned_graphs == len(eager.cache_lengths)


def test_a_batch_without_padding_shares_the_padded_batches_graph(tiny_model_path, tok,
                                                                compiler_reset):
    """transformers drops the prefill's mask when no row is padded; compiled, that would be one
    more graph per bucket: the mask is kept."""
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    words = " ".join(["the"] * 40)
    exact = tok.decode(tok(words)["input_ids"][:16])
    assert len(tok(exact)["input_ids"]) == 16
    with nk.CompileRecorder() as rec:
        nk.generate(model, tok, ["a cat"], max_new_tokens=3, buckets=[16], batch_size=1,
                    backend="eager", recorder=rec)
        seen = len(rec.events)
        nk.generate(model, tok, [exact], max_new_tokens=3, buckets=[16], batch_size=1,
                    backend="eager", recorder=rec)
    assert seen == 2 and len(rec.events) == 2
    assert "create_masks_for_generate" not in vars(model)   # the call's wrapper is gone


def test_prefill_must_be_compiled_or_eager(tiny_model_path, tok):
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    with pytest.raises(ValueError, match="prefill must be 'compiled'"):
        nk.generate(model, tok, ["a"], prefill="lazy")
    with pytest.raises(ValueError, match="prefill_chunk_size"):
        nk.generate(model, tok, ["a"], prefill_chunk_size=4)


def test_auto_buckets_count_two_graphs_per_bucket():
    from neuronkit.workloads.generate_plan import plan_generation

    lengths = [5, 6, 7, 8, 40, 41]
    # [8, 41] pads 7 tokens, [41] 139: worth a second bucket at 100 s a graph, not at 2 x 100 s
    one = nk.plan_buckets(lengths, compile_cost_s=100.0, token_cost_s=1.0)
    two = nk.plan_buckets(lengths, compile_cost_s=100.0, token_cost_s=1.0, graphs_per_bucket=2)
    assert (list(one.boundaries), list(two.boundaries)) == ([8, 41], [41])
    ids = [[1] * n for n in lengths]
    assert (plan_generation(ids, 4, "auto").buckets
            == nk.plan_buckets(lengths, graphs_per_bucket=2))
    assert (plan_generation(ids, 4, "auto", prefill="eager").buckets == nk.plan_buckets(lengths))


def test_sampling_draws_the_same_tokens_with_the_prefill_compiled(tiny_model_path, tok,
                                                                  compiler_reset):
    """Seeded sampling: the compiled prefill gives the logits the eager one gives, so the same
    draws pick the same tokens (the distribution is unchanged, not only its argmax)."""
    model = nk.load_model(tiny_model_path, device="cpu", dtype="float32")
    runs = {}
    for prefill in ("eager", "compiled"):
        torch.manual_seed(1234)
        runs[prefill] = nk.generate(model, tok, PROMPTS[:4], max_new_tokens=6, buckets=[16, 32],
                                    batch_size=2, backend="eager", prefill=prefill,
                                    do_sample=True, temperature=1.3, top_k=0)
    assert runs["compiled"].output_ids and all(
        a.tolist() == b.tolist() for a, b in zip(runs["eager"].output_ids,
                                                 runs["compiled"].output_ids, strict=True))
    torch.manual_seed(99)
    other = nk.generate(model, tok, PROMPTS[:4], max_new_tokens=6, buckets=[16, 32], batch_size=2,
                        backend="eager", do_sample=True, temperature=1.3, top_k=0)
    assert [t.tolist() for t in other.output_ids] != [t.tolist() for t in runs["compiled"].output_ids]
