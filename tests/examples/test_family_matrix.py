"""The family matrix (bench/families.py) on a fixed subset: tiny models of six causal-LM types
built from their configs, nk.generate against plain model.generate (the sliding-window families:
tests/workloads/test_families.py). Plus the tiny builder's
field synonyms and the Markdown writer, which need no model."""
from __future__ import annotations

import pytest

from neuronkit.examples.any_family import NotATextDecoder, tiny_causal_lm, tiny_config
from neuronkit.examples.family_check import (
    OUTCOMES,
    SIX_PROMPTS,
    FamilyOutcome,
    check_family,
    markdown_report,
)

# rotary, learned positions (two ways), mixture of experts, fused qkv, parallel attention
HOLDS = ("llama", "gpt2", "opt", "qwen2_moe", "phi3", "falcon")


@pytest.mark.slow
@pytest.mark.parametrize("model_type", HOLDS)
def test_family_holds(model_type, tok, compiler_reset):
    row = check_family(model_type, tokenizer=tok)
    assert (row.outcome, row.reason) == ("holds", ""), row
    assert 1 <= row.graphs <= row.planned_graphs == 4   # 2 buckets x (prefill + decode)


def test_six_prompts_span_both_buckets(tok):
    lengths = [len(tok(p)["input_ids"]) for p in SIX_PROMPTS]
    assert sum(n <= 16 for n in lengths) == 3 and sum(16 < n <= 32 for n in lengths) == 3


@pytest.mark.parametrize("model_type, fields", [
    ("gpt2", {"n_embd": 64, "n_layer": 2, "n_head": 4, "n_inner": None, "n_positions": 1024}),
    ("llama", {"hidden_size": 64, "num_hidden_layers": 2, "num_attention_heads": 4,
               "num_key_value_heads": 4, "head_dim": 16, "intermediate_size": 128}),
    ("bart", {"d_model": 64, "decoder_layers": 2, "encoder_layers": 2, "decoder_ffn_dim": 128,
              "encoder_ffn_dim": 128, "decoder_attention_heads": 4}),
    ("qwen2_moe", {"num_experts": 4, "num_experts_per_tok": 2, "moe_intermediate_size": 32,
                   "shared_expert_intermediate_size": 32, "num_key_value_heads": 4}),
    ("mistral", {"num_key_value_heads": 2, "head_dim": 16}),    # GQA kept where the default has it
    ("mamba2", {"hidden_size": 64, "expand": 2, "head_dim": 16, "num_heads": 8, "n_groups": 1,
                "state_size": 16, "chunk_size": 16}),
    ("xlnet", {"d_model": 64, "n_layer": 2, "n_head": 4, "d_inner": 128}),
])
def test_tiny_config_shrinks_every_synonym(model_type, fields):
    config = tiny_config(model_type, 512, 0, 1)
    assert {k: getattr(config, k) for k in fields} == fields
    text = config.get_text_config(decoder=True)
    assert (text.vocab_size, text.pad_token_id, text.eos_token_id) == (512, 0, 1)


def test_tiny_config_keeps_one_layer_of_each_kind():
    """Hybrid patterns keep each kind: Qwen3.5's linear and full attention, Gemma 3's sliding and
    full layers (its text config, inside the multimodal one), Nemotron-H's four block kinds."""
    assert tiny_config("qwen3_5", 512, 0, 1).get_text_config().layer_types == [
        "linear_attention", "full_attention"]
    gemma = tiny_config("gemma3", 512, 0, 1)
    assert gemma.text_config.layer_types == ["sliding_attention", "full_attention"]
    assert gemma.text_config.max_position_embeddings >= 256
    assert gemma.vision_config.hidden_size == 64 and gemma.vision_config.num_hidden_layers == 2
    nemotron = tiny_config("nemotron_h", 512, 0, 1)
    assert sorted(nemotron.layers_block_type) == sorted(set(nemotron.layers_block_type))
    assert nemotron.num_hidden_layers == len(nemotron.layers_block_type) == 4


def test_audio_codebook_decoder_is_not_a_text_decoder(tok):
    with pytest.raises(NotATextDecoder, match="codebooks"):
        tiny_causal_lm("musicgen", tok)


def test_markdown_report_escapes_and_totals():
    rows = [FamilyOutcome("b_type", "BForCausalLM", "refused", "no | way\nsecond line", 0, 0, 1.0),
            FamilyOutcome("a_type", "AForCausalLM", "holds", "", 4, 4, 2.0),
            FamilyOutcome("c_type", "CForCausalLM", "refused", "x" * 300, 0, 0, 1.0),
            FamilyOutcome("d_type", "?", "crashes", "timed out after 180 s", 0, 0, 180.0)]
    text = markdown_report(rows, versions={"transformers": "5.24.0", "torch": "2.13"},
                           date="2026-01-01", settings={"device": "CPU, not Neuron"})
    assert text.startswith("# ") and "transformers 5.24.0" in text and "2026-01-01" in text
    assert "- holds: 1 — " in text and "- refused: 2 — " in text and "- crashes: 1 — " in text
    assert "- differs: 0 — " in text and all(f"- {o}: " in text for o in OUTCOMES)
    table = [line for line in text.splitlines() if line.startswith("| ") and "_type" in line]
    assert [line.split(" | ")[0] for line in table] == ["| a_type", "| b_type", "| c_type", "| d_type"]
    assert "no \\| way |" in table[1] and "second line" not in text
    assert all(line.count(" | ") == 4 for line in table)       # no cell broke the table
    assert "x" * 159 + "…" in table[2] and "x" * 160 not in table[2]
