"""Tiny random-weight causal LMs of popular families, built from their configs (no Hub).

    model = tiny_family("mistral", tokenizer)      # sliding-window attention, window 8

Each is 2 layers, hidden 64, seeded, float32, sized to the tokenizer's vocabulary, so the
embedded tokenizer (``nk.load_tokenizer()``) drives any of them. ``sliding_window`` applies to
the families that have one (Mistral: every layer; Gemma 3: one sliding, one full layer).
"""
from __future__ import annotations

from typing import Any

from neuronkit.setup.models import pad_token_id

__all__ = ["FAMILIES", "SLIDING", "family_config", "tiny_family"]

FAMILIES: tuple[str, ...] = ("llama", "qwen3", "phi3", "mistral", "gemma3")
SLIDING: tuple[str, ...] = ("mistral", "gemma3")   # the families with sliding-window layers


def family_config(family: str, vocab_size: int, pad_id: int, eos_id: int,
                  sliding_window: int = 8) -> Any:
    """The transformers config of a tiny ``family`` model."""
    import transformers

    common: dict[str, Any] = dict(vocab_size=vocab_size, hidden_size=64, intermediate_size=128,
                                  num_hidden_layers=2, num_attention_heads=4,
                                  num_key_value_heads=2, max_position_embeddings=1024,
                                  pad_token_id=pad_id, bos_token_id=eos_id, eos_token_id=eos_id)
    if family == "llama":
        return transformers.LlamaConfig(**common)
    if family == "qwen3":
        return transformers.Qwen3Config(**common, head_dim=16)
    if family == "phi3":
        return transformers.Phi3Config(**common)
    if family == "mistral":
        return transformers.MistralConfig(**common, sliding_window=sliding_window)
    if family == "gemma3":
        return transformers.Gemma3TextConfig(**common, head_dim=16, sliding_window=sliding_window,
                                             layer_types=["sliding_attention", "full_attention"])
    raise ValueError(f"unknown family {family!r}; choose one of {', '.join(FAMILIES)}")


def tiny_family(family: str, tokenizer: Any, *, seed: int = 0, sliding_window: int = 8) -> Any:
    """A seeded random-weight ``family`` causal LM (float32, eval mode) for ``tokenizer``."""
    import torch
    from transformers import AutoModelForCausalLM, GenerationConfig

    pad_id, eos_id = pad_token_id(tokenizer), tokenizer.eos_token_id
    config = family_config(family, len(tokenizer), pad_id, eos_id, sliding_window)
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(seed)
        model = AutoModelForCausalLM.from_config(config).to(torch.float32).eval()
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=pad_id,
                                               eos_token_id=eos_id, bos_token_id=eos_id)
    return model
