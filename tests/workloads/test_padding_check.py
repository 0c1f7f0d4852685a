"""The left-padding check refuses what would change the tokens, and nothing else: rounding (judged
in the model's own dtype, at its logits' scale and depth) and near-ties at a first token never
refuse; a pick that changes beyond rounding, or logits that move far past it, still do.

Where padded and unpadded runs round differently depends on the CPU's kernels (on this machine's
they are often bit-identical): ``rounds_differently`` makes every run round its own way, as the
machine did on which Qwen3-0.6B in bf16 was refused. Tiny seeded random-weight models.
"""
from __future__ import annotations

import pytest
import torch

import neuronkit as nk
from neuronkit.workloads import padding_check
from neuronkit.workloads.padding_check import PROBE_PADS, PROBE_TOKENS, left_padding_verdict

PROMPTS = ["the cat", "the cat sat on a mat while rain fell over the quiet hills and rivers ran",
           "quiet hills", "rain fell over quiet hills and the sea was calm that day"]


def qwen3(tok, *, layers: int, dtype: torch.dtype, **sizes):
    """A seeded random-weight Qwen3 of ``layers`` layers (hidden 64 unless ``sizes`` say)."""
    import transformers
    from transformers import AutoModelForCausalLM, GenerationConfig

    config = transformers.Qwen3Config(**{
        "vocab_size": len(tok), "hidden_size": 64, "intermediate_size": 128,
        "num_hidden_layers": layers, "num_attention_heads": 4, "num_key_value_heads": 2,
        "head_dim": 16, "pad_token_id": tok.pad_token_id, "eos_token_id": tok.eos_token_id,
        "bos_token_id": tok.eos_token_id, **sizes})
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=dtype).eval()
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=config.pad_token_id,
                                               eos_token_id=config.eos_token_id)
    return model


def rounds_differently(model, seed: int = 0) -> list:
    """Re-round every decoder layer's output after up to half a rounding step of noise, new on
    each call: the arithmetic of kernels that round another way for another shape."""
    gen = torch.Generator().manual_seed(seed)
    eps = torch.finfo(model.dtype).eps

    def hook(module, args, out):
        h = out[0] if isinstance(out, tuple) else out
        noise = (torch.rand(h.shape, generator=gen) * 2 - 1) * (eps / 2)
        h = (h.float() * (1 + noise)).to(h.dtype)
        return (h, *out[1:]) if isinstance(out, tuple) else h

    return [layer.register_forward_hook(hook) for layer in model.model.layers]


def probe_ids(tok) -> list[int]:
    ids = tok("the cat sat on a mat while rain fell")["input_ids"][:PROBE_TOKENS]
    assert len(ids) == PROBE_TOKENS and tok.pad_token_id not in ids
    return ids


def padded_prefill(kwargs, pad_id: int) -> bool:
    """Whether a forward is the first step of a prompt behind pad tokens (no probe prompt holds
    the pad token)."""
    ids = kwargs["input_ids"]
    return ids.shape[1] > 1 and bool((ids == pad_id).any())


def largest_gap(model, ids, pad_id) -> tuple[float, float]:
    """(largest logit difference, largest logit) of the probe's runs alone and behind pads, on
    the same tokens."""
    own = padding_check._steps(model, ids, 0, pad_id, static=False)
    behind = padding_check._steps(model, ids, PROBE_PADS, pad_id, static=True, forced=own.tokens)
    gaps = [float((x - y).abs().max()) for x, y in zip(own.logits, behind.logits, strict=True)]
    return max(gaps), max(float(x.abs().max()) for x in own.logits)


@pytest.mark.slow
def test_a_deep_bf16_model_that_rounds_differently_generates_with_buckets(tok, compiler_reset):
    model = qwen3(tok, layers=28, dtype=torch.bfloat16)
    rounds_differently(model)
    res = nk.generate(model, tok, PROMPTS, max_new_tokens=3, buckets=[16, 32], batch_size=2,
                      compile=False)
    assert {len(tok(p)["input_ids"]) > 16 for p in PROMPTS} == {True, False}   # both buckets
    for prompt, ids in zip(PROMPTS, res.output_ids, strict=True):
        assert ids.tolist()[:len(tok(prompt)["input_ids"])] == tok(prompt)["input_ids"]
    gap, top = largest_gap(model, probe_ids(tok), tok.pad_token_id)
    assert gap > 1e-3 * top        # more than float32 rounding: a float32 judgement refuses it


def tie_broken_by_padding(tok, nudge) -> tuple:
    """A float32 model whose top two first tokens tie exactly, and the tie broken by
    ``nudge(logits)``: the top token ahead alone, the runner-up behind pads. (model, ids, top,
    runner-up)."""
    model = qwen3(tok, layers=2, dtype=torch.float32, tie_word_embeddings=False)
    ids = probe_ids(tok)
    with torch.no_grad():
        logits = model(torch.tensor([ids])).logits[0, -1]
        first, second = logits.topk(2).indices.tolist()
        model.lm_head.weight[second] = model.lm_head.weight[first]
    lead = nudge(logits)

    def broken(module, args, kwargs, out):
        if kwargs["input_ids"].shape[1] > 1:                                # the first token
            padded = padded_prefill(kwargs, tok.pad_token_id)
            out.logits[0, -1, second if padded else first] += lead
        return out

    model.register_forward_hook(broken, with_kwargs=True)
    return model, ids, first, second


def test_a_near_tie_at_the_first_token_is_not_refused(tok):
    """Rounding that breaks a tie the other way behind pads gives the second step another
    token to follow; fed the same token, the second step's logits agree."""
    step = torch.finfo(torch.float32).eps                                   # one rounding step
    model, ids, first, second = tie_broken_by_padding(
        tok, lambda logits: step * max(1.0, float(logits.abs().max())))
    assert left_padding_verdict(model, ids, tok.pad_token_id) is None
    own = padding_check._steps(model, ids, 0, tok.pad_token_id, static=False)
    behind = padding_check._steps(model, ids, PROBE_PADS, tok.pad_token_id, static=True)
    assert (own.tokens[0], behind.tokens[0]) == (first, second)            # the tie went apart


def test_a_pick_that_changes_beyond_rounding_is_refused(tok):
    """The same tie broken by far less than the logits' spread, far more than rounding: the
    tokens change, so it is refused."""
    model, ids, first, second = tie_broken_by_padding(
        tok, lambda logits: 1e-3 * float(logits.std()))
    why = left_padding_verdict(model, ids, tok.pad_token_id)
    assert why is not None and f"new token 1 would be {second}, not {first}" in why, why
    with pytest.raises(nk.LeftPaddingError, match=f"Qwen3ForCausalLM: left padding changes .*"
                                                  f"would be {second}, not {first}.*buckets=None"):
        nk.generate(model, tok, PROMPTS[:2], max_new_tokens=2, buckets=[16, 32], compile=False)


def test_a_bf16_model_whose_positions_left_padding_shifts_is_still_refused(tok):
    from neuronkit.examples.any_family import tiny_causal_lm

    model = tiny_causal_lm("bart", tok).to(torch.bfloat16)   # learned positions from the cache
    why = left_padding_verdict(model, probe_ids(tok), tok.pad_token_id)
    assert why is not None and why.startswith("left padding changes what it generates"), why
    assert "rounding in bfloat16" in why


@pytest.mark.slow
def test_the_qwen3_0_6b_config_in_bf16_passes_even_where_runs_round_differently():
    import transformers
    from transformers import AutoModelForCausalLM

    config = transformers.Qwen3Config(    # Qwen/Qwen3-0.6B's config.json, random weights
        vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28,
        num_attention_heads=16, num_key_value_heads=8, head_dim=128, tie_word_embeddings=True,
        rope_theta=1000000, max_position_embeddings=40960, rms_norm_eps=1e-6,
        bos_token_id=151643, eos_token_id=151645)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(0)
        model = AutoModelForCausalLM.from_config(config, dtype=torch.bfloat16).eval()
    ids, pad_id = [785, 8251, 7578, 389, 264, 5517], 151643
    rounds_differently(model)     # here its runs are bit-identical otherwise
    assert left_padding_verdict(model, ids, pad_id) is None
    gap, top = largest_gap(model, ids, pad_id)
    assert gap > 1e-3 * top        # more than float32 rounding: a float32 judgement refuses it


@pytest.mark.slow
def test_inkling_text_generates_with_buckets_and_the_same_tokens(tok, compiler_reset):
    """nk.generate's static cache changes its arithmetic a little (the full-length layer standing
    in for its sliding one gets no window mask at prefill; a decode step's relative-position bias
    reads a position the cache update has already advanced). With random weights its logits move
    some 1e-5 where they spread 7e-3 and keep their order: not refused, plain generate's tokens."""
    from neuronkit.examples.any_family import tiny_causal_lm

    model = tiny_causal_lm("inkling_text", tok)
    assert max(len(tok(p)["input_ids"]) for p in PROMPTS) + 4 > padding_check.sliding_window(model)
    res = nk.generate(model, tok, PROMPTS, max_new_tokens=4, buckets=[16, 32], batch_size=2,
                      compile=False)
    for prompt, ids in zip(PROMPTS, res.output_ids, strict=True):
        enc = tok(prompt, return_tensors="pt")
        with torch.no_grad():
            plain = model.generate(**enc, max_new_tokens=4, do_sample=False)[0].tolist()
        assert ids.tolist() == plain, prompt
