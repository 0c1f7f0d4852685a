"""No query row of the masks nk.generate hands the model is fully masked, so a left-padded batch
gives the unpadded tokens under native Neuron's masked attention (emulated on CPU by
``helpers.neuron_sdpa``: the decomposition without a safe softmax, where such a row is NaN)."""
from __future__ import annotations

import pytest
import torch
from transformers import LogitsProcessor

import neuronkit as nk
from helpers.neuron_sdpa import neuron_sdpa, neuron_sdpa_decomposition
from neuronkit.workloads.padding_check import left_padding_verdict
from neuronkit.workloads.prefill_masks import every_row_attends

PROMPTS = ["the cat", "the cat sat on a mat while rain fell"]    # 4 and 16 tokens: bucket 16
NEW = 4


class NaNWatch(LogitsProcessor):
    """Counts generate steps whose logits (the real rows' last positions) hold a NaN."""

    def __init__(self) -> None:
        self.steps = self.nan_steps = 0

    def __call__(self, input_ids, scores):
        self.steps += 1
        self.nan_steps += int(torch.isnan(scores).any())
        return scores


@pytest.fixture(scope="module")
def model(tiny_model_path):
    """Its own model: the left-padding verdict nk.generate keeps per model stays in this module."""
    return nk.load_model(tiny_model_path, device="cpu", dtype="float32")


def unpadded(model, tok, prompt: str, new: int = NEW) -> list[int]:
    """Plain greedy ``model.generate`` on the prompt alone (torch's own SDPA, no padding)."""
    enc = tok(prompt, return_tensors="pt")
    with torch.no_grad():
        return model.generate(**enc, max_new_tokens=new, do_sample=False)[0].tolist()


def test_the_emulation_turns_a_fully_masked_row_into_nan():
    q, k, v = (torch.randn(1, 2, 3, 4) for _ in range(3))
    mask = torch.tensor([[False, False, False], [True, False, False], [True, True, True]])
    ours = neuron_sdpa_decomposition(q, k, v, attn_mask=mask[None, None])
    torchs = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask[None, None])
    assert torch.isnan(ours[:, :, 0]).all() and not torch.isnan(torchs).any()  # safe softmax: 0
    torch.testing.assert_close(ours[:, :, 1:], torchs[:, :, 1:])
    with neuron_sdpa():
        assert torch.nn.functional.scaled_dot_product_attention is neuron_sdpa_decomposition
    assert torch.nn.functional.scaled_dot_product_attention is not neuron_sdpa_decomposition


@pytest.mark.parametrize("prefill", ["compiled", "eager"])
def test_a_left_padded_batch_gives_the_unpadded_tokens_under_neuron_attention(
        model, tok, prefill, compiler_reset):
    lengths = [len(tok(p)["input_ids"]) for p in PROMPTS]
    assert lengths[0] < lengths[1] <= 16                  # one bucket, the short row left-padded
    expected = [unpadded(model, tok, p) for p in PROMPTS]
    # on Neuron the padding probe is read off the model, not run (padding_check.py): taken here
    # outside the stand-in, so that the batch itself runs under it (the next test runs the probe)
    assert left_padding_verdict(model, tok(PROMPTS[0])["input_ids"], tok.pad_token_id) is None
    watch = NaNWatch()
    with neuron_sdpa():
        res = nk.generate(model, tok, PROMPTS, max_new_tokens=NEW, buckets=[16], batch_size=2,
                          backend="eager", prefill=prefill, logits_processor=[watch])
    assert res.timings[0].rows == 2 and res.timings[0].bucket == 16   # one padded batch of two
    assert watch.steps == NEW and watch.nan_steps == 0
    assert [ids.tolist() for ids in res.output_ids] == expected


def test_the_padding_probe_passes_under_neuron_attention(tiny_model_path, tok):
    """On CPU nk.generate runs its left-padding probe (one padded row) before the call: with the
    call's masks it sees no NaN and lets the padded batch run."""
    fresh = nk.load_model(tiny_model_path, device="cpu", dtype="float32")   # no verdict kept yet
    with neuron_sdpa():
        res = nk.generate(fresh, tok, PROMPTS, max_new_tokens=2, buckets=[16], batch_size=2,
                          compile=False)
    assert [ids.tolist() for ids in res.output_ids] == [unpadded(fresh, tok, p, 2) for p in PROMPTS]


def test_the_masks_generate_builds_have_no_fully_masked_row(model, tok):
    """Every 4-D mask of the call, prefill and decode: each query row attends somewhere, and a
    real query never attends a pad key."""
    seen: list[tuple[torch.Tensor, torch.Tensor]] = []
    plain = model.prepare_inputs_for_generation

    def spy(*args, **kwargs):
        inputs = plain(*args, **kwargs)
        if args[0].shape[0] == 2:                          # the call's batch, not the 1-row probe
            masks = inputs["attention_mask"]               # one per layer kind (Qwen3: a dict)
            seen.extend((m, kwargs["attention_mask"])      # each 4-D mask, and the 2-D one
                        for m in (masks.values() if isinstance(masks, dict) else [masks]))
        return inputs

    model.prepare_inputs_for_generation = spy
    try:
        nk.generate(model, tok, PROMPTS, max_new_tokens=NEW, buckets=[16], batch_size=2,
                    compile=False)
    finally:
        del model.prepare_inputs_for_generation
    prefills = [m for m, _ in seen if m.shape[2] > 1]
    assert len(prefills) == 1 and len(seen) == NEW
    for mask, padding in seen:
        assert mask.dtype == torch.bool and mask.ndim == 4
        assert mask.any(dim=-1).all()                      # no fully masked query row
        pad_keys = padding[:, None, None, :] == 0          # (rows, 1, 1, positions so far)
        real_queries = padding[:, None, -mask.shape[2]:, None] == 1
        assert not (mask[..., :padding.shape[1]] & pad_keys & real_queries).any()
    assert (seen[0][1] == 0).any()                          # the short row was padded


def test_every_row_attends_changes_only_fully_masked_rows():
    mask = torch.tensor([[False, False, False], [True, False, False], [False, True, True]])
    fixed = every_row_attends(mask[None, None])
    assert fixed[0, 0, 0].all() and torch.equal(fixed[0, 0, 1:], mask[1:])
    additive = torch.zeros(1, 1, 3, 3)
    two_d = torch.ones(1, 3, dtype=torch.long)
    out = every_row_attends({"full_attention": mask[None, None], "linear_attention": two_d,
                             "eager": additive, "none": None})
    assert out["full_attention"][0, 0, 0].all()
    assert out["linear_attention"] is two_d and out["eager"] is additive and out["none"] is None
