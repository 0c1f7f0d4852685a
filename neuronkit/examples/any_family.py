"""Any causal-LM family of the installed transformers, built tiny from its config (no Hub).

    model = tiny_causal_lm("qwen3_next", nk.load_tokenizer())

:func:`tiny_config` shrinks ``AutoConfig.for_model(model_type)`` by tables of field synonyms:
hidden 64, 2 layers (one of each kind where a model mixes layer kinds), 4 heads, 2 kv heads,
head_dim 16, ffn 128, 4 experts (top-2), small SSM states; every sub-config (text, vision,
encoder) alike. Only the fields it changes are passed to the config class, so what the class
derives (head_dim from hidden size, a layer pattern from its period) it derives again.
:func:`tiny_causal_lm` builds it seeded, float32, greedy, sized to the tokenizer.
"""
from __future__ import annotations

import copy
from typing import Any

from neuronkit.setup.models import pad_token_id

__all__ = ["NotATextDecoder", "TinyBuildError", "causal_lm_types", "first_line", "tiny_causal_lm",
           "tiny_config"]

LAYERS, HIDDEN, HEADS, KV_HEADS, HEAD_DIM, FFN = 2, 64, 4, 2, 16, 128


class TinyBuildError(RuntimeError):
    """The type cannot be built tiny from its config (``reason``: why)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class NotATextDecoder(TinyBuildError):
    """The type builds, but does not continue text from ``input_ids`` alone."""


def _named(value: int, *names: str) -> dict[str, int]:
    return dict.fromkeys(names, value)


_HEAD_COUNTS = ("num_attention_heads", "n_head", "num_heads", "n_heads", "attention_heads")
_KV_COUNTS = ("num_key_value_heads", "num_kv_heads", "kv_n_heads", "n_kv_heads",
              "multi_query_group_num", "num_query_groups", "swa_num_key_value_heads")
# Field synonyms -> the value a tiny model gets (where the default holds an int).
_SET: dict[str, int] = {
    **_named(HIDDEN, "hidden_size", "n_embd", "d_model", "dim", "embed_dim", "n_embed", "emb_dim",
             "embedding_dim", "model_dim", "hidden_dim", "embedding_size", "input_embedding_size",
             "output_embedding_size", "word_embed_proj_dim", "attention_hidden_size", "lru_width",
             "out_hidden_size", "hidden_size_global", "backbone_hidden_size", "d_embed",
             "encoder_hidden_size", "cross_attention_hidden_size", "projector_output_dim",
             "vision_output_dim", "adapter_in_dim", "adapter_input_size", "adapter_out_dim"),
    **_named(HEADS, *_HEAD_COUNTS, "decoder_attention_heads", "encoder_attention_heads",
             "num_decoder_attention_heads", "num_encoder_attention_heads", "swa_num_attention_heads",
             "conf_num_attention_heads", "linear_num_heads", "linear_num_value_heads",
             "index_n_heads"),
    **_named(KV_HEADS, *_KV_COUNTS, "linear_num_key_heads"),
    **_named(HEAD_DIM, "head_dim", "attention_head_dim", "d_head", "dim_head", "d_kv", "kv_channels",
             "swa_head_dim", "attention_head_size", "linear_key_head_dim", "linear_value_head_dim",
             "linear_head_dim", "index_head_dim", "v_head_dim", "mamba_d_head", "mamba_head_dim",
             "mamba_headdim", "d_rel"),
    **_named(FFN, "intermediate_size", "ffn_dim", "n_inner", "d_ff", "dff", "d_inner",
             "decoder_ffn_dim", "encoder_ffn_dim", "ffn_hidden_size", "dim_ff", "feed_forward_size",
             "intermediate_size_mlp", "dense_intermediate_size", "mlp_dim", "conv_output_size",
             "prompt_mid_dim"),
    **_named(32, "moe_intermediate_size", "shared_expert_intermediate_size",
             "shared_experts_intermediate_size", "shared_intermediate_size",
             "moe_shared_expert_intermediate_size", "expert_ffn_hidden_size", "q_lora_rank",
             "kv_lora_rank", "o_lora_rank", "laurel_rank", "adapter_rank"),
    **_named(8, "qk_rope_head_dim", "qk_nope_head_dim", "rotary_dim"),
    **_named(1024, "encoder_hash_byte_group_vocab"),   # BLT's hashed n-gram embeddings
    **_named(4, "num_experts", "num_local_experts", "n_routed_experts", "moe_num_experts",
             "time_step_rank", "mamba_dt_rank"),
    **_named(16, "state_size", "ssm_state_size", "mamba_d_state", "chunk_size", "mamba_chunk_size",
             "index_topk", "sliding_window_size"),
    **_named(8, "sliding_window", "attention_window_size", "attention_chunk_size",
             "local_attention_window_len"),
    **_named(2, "attn_layer_period", "expert_layer_period"),   # with offset 1: layer 1 of 2
    **_named(1, "attn_layer_offset", "expert_layer_offset"),
}
# Layer counts: 2, or one layer of each kind where a model mixes kinds.
_LAYER_COUNTS = ("num_hidden_layers", "n_layer", "num_layers", "n_layers", "decoder_layers",
                 "encoder_layers", "num_decoder_layers", "num_encoder_layers", "depth",
                 "conf_num_hidden_layers", "num_global_layers")
_PATTERNS = ("layer_types", "mlp_layer_types", "layers_block_type", "block_types")
# Lists of layer indices (a layer of a special kind): one such layer, the last.
_INDEX_LISTS = ("full_attn_idxs", "hybrid_layer_ids", "cross_attention_layers", "moe_layers",
                "ple_layer_ids", "global_attn_indexes")
# Field synonyms -> at most this (experts chosen, shared experts, groups, leading dense layers).
_AT_MOST: dict[str, int] = {
    **_named(2, "num_experts_per_tok", "num_experts_per_token", "moe_topk", "moe_top_k", "moe_k",
             "top_k"),
    **_named(1, "n_shared_experts", "num_shared_experts", "moe_num_shared_experts", "n_group",
             "topk_group", "num_expert_group", "n_groups", "mamba_n_groups", "mamba_ngroups",
             "first_k_dense_replace", "num_dense_layers", "moe_layer_start_index",
             "num_nextn_predict_layers", "num_mem_blocks", "max_window_layers",
             "index_topk_blocks"),
}
# Field synonyms -> at least this (positions).
_AT_LEAST: dict[str, int] = _named(256, "max_position_embeddings", "n_positions", "n_ctx",
                                   "max_seq_len", "max_sequence_length", "context_length",
                                   "max_target_positions", "model_max_length")
# Fields a default config leaves None that a model needs (None there is unset, not a choice).
_FILL: dict[str, int] = {"head_dim": HEAD_DIM, "num_key_value_heads": KV_HEADS, "num_experts": 4,
                         "n_routed_experts": 4, "num_experts_per_tok": 2, "indexer_n_heads": HEADS,
                         "indexer_kv_heads": 1, "indexer_head_dim": HEAD_DIM, "indexer_budget": 16,
                         "indexer_compress_ratio": 4}
# SSM (expand, heads, head size) triples: heads = expand x hidden / head size.
_SSM_HEADS = (("expand", "num_heads", "head_dim"), ("mamba_expand", "mamba_n_heads", "mamba_d_head"),
              ("expand", "mamba_num_heads", "mamba_head_dim"),
              ("mamba_expand", "n_mamba_heads", "mamba_headdim"))
_TOKENS = {"pad_token_id": "pad", "bos_token_id": "bos", "eos_token_id": "eos",
           "decoder_start_token_id": "bos", "forced_eos_token_id": "eos"}
_VOCABS = ("vocab_size", "decoder_vocab_size", "vocab_size_per_layer_input", "unpadded_vocab_size")
_ATTN = ["linear_attention", "full_attention"]
# Per-type fields ("model_type.config_type": that type's config or one of its sub-configs),
# applied after the tables; each says why.
_OVERRIDES: dict[str, dict[str, Any]] = {
    # pure Mamba by default (no attention layer: the cache has nothing to size itself by);
    # released checkpoints mix them, so one of each
    "bamba.bamba": {"attn_layer_indices": [1]},
    "granitemoehybrid.granitemoehybrid": {"layer_types": _ATTN},
    # the pattern is [[kinds, repeats]]: one global and one local layer
    "gpt_neo.gpt_neo": {"attention_types": [[["global", "local"], 1]]},
    # input + recurrent + output layers must add up to the layer count
    "dory.dory": {"num_hidden_layers": 3, "n_input_layers": 1, "n_recurrent_layers": 1,
                  "n_output_layers": 1,
                  "layer_types": ["sliding_attention", "full_attention", "sliding_attention"]},
    # the causal LM asserts is_decoder; one local and one LSH layer; axial position factors must
    # add up to the hidden size and multiply to the positions
    "reformer.reformer": {"is_decoder": True, "attn_layers": ["local", "lsh"],
                          "axial_pos_embds_dim": [32, 32], "axial_pos_shape": [16, 16],
                          "max_position_embeddings": 256},
    # the default leaves layer_types None, which the model indexes: one conv, one attention layer
    "lfm2_moe.lfm2_moe": {"layer_types": ["conv", "full_attention"]},
    # the default leaves the shared experts None, which the model multiplies by
    "dots1.dots1": {"n_shared_experts": 1},
    # hybrid layers share one transformer, tied across them: two hybrid layers to tie
    "zamba.zamba": {"num_hidden_layers": 4, "layers_block_type": ["linear_attention", "hybrid"] * 2},
    # the cache rounds the q/k width up to a multiple of 64, the layer does not: hidden 128
    "xlstm.xlstm": {"hidden_size": 128, "embedding_dim": 128},
    # the attention config (model_type "") lacks the rope_theta its model reads, and clamps q/k/v
    # by clip_qkv, which it leaves None
    "dbrx.": {"rope_theta": 10000.0, "clip_qkv": 8.0},
    # its forward sizes a cache by the top config's layer count, which only sub-configs have
    "blt.blt": {"num_hidden_layers": 2},
    # the default leaves rope_parameters empty though they are read per layer type
    "cohere_compass_text.cohere_compass_text": {"rope_parameters": {
        "full_attention": {"rope_type": "default", "rope_theta": 10000.0}}},
}
# Keywords for AutoConfig.for_model where its defaults fail their own validation.
_DEFAULTS: dict[str, dict[str, Any]] = {
    # an assistant's text layers take no per-layer inputs (its default text config has them)
    "gemma4_assistant": {"text_config": {"model_type": "gemma4_text", "hidden_size_per_layer_input": 0,
                                         "vocab_size_per_layer_input": 0}},
}
# The sub-config a type's causal-LM class is built from (not the top config).
_BUILD_FROM = {"musicgen": "decoder", "musicgen_melody": "decoder"}


def causal_lm_types() -> list[str]:
    """Every ``model_type`` the installed transformers maps to a causal-LM class."""
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    return sorted(MODEL_FOR_CAUSAL_LM_MAPPING_NAMES)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _layer_count(d: dict[str, Any]) -> int | None:
    """The layer count a config dict says (None: no layer field)."""
    counts = [d[k] for k in _LAYER_COUNTS if _is_int(d.get(k))]
    lists = [len(d[k]) for k in _PATTERNS if isinstance(d.get(k), list)]
    return (counts or lists or [None])[0]


def _per_layer_lists(d: dict[str, Any]) -> dict[str, list[Any]]:
    """The fields that hold one value per layer: the named patterns, and any list of scalars as
    long as the layer count."""
    layers = _layer_count(d)
    return {k: v for k, v in d.items() if isinstance(v, list) and v
            and (k in _PATTERNS or (layers is not None and layers > LAYERS and len(v) == layers))
            and all(not isinstance(x, (list, dict)) for x in v)}


def _shrink_layers(d: dict[str, Any]) -> None:
    """Layer counts to 2, or to the number of layer kinds when more (twice that when the last
    layers share earlier layers' KV); per-layer lists cycle through their kinds to match."""
    lists = _per_layer_lists(d)
    n = max([LAYERS, *(len(set(v)) for v in lists.values())])
    layers, shared = _layer_count(d) or 0, d.get("num_kv_shared_layers") or 0
    if 0 < shared < layers:      # a KV-making layer for each shared kind, then the sharing ones
        n, d["num_kv_shared_layers"] = 2 * n, n
    elif shared > 0:             # all layers shared (an assistant)
        d["num_kv_shared_layers"] = n
    for k, v in lists.items():
        d[k] = (list(dict.fromkeys(v)) * n)[:n]   # kinds, first seen first
    for k in _LAYER_COUNTS:
        if _is_int(d.get(k)):
            d[k] = n
    for k in _INDEX_LISTS:
        if isinstance(d.get(k), list) and d[k]:
            d[k] = [n - 1]


def _shrink_sizes(d: dict[str, Any], full: dict[str, Any]) -> None:
    """The size tables, then the sizes that must agree with others: kv heads as many as heads
    where the default has no GQA, a head_dim that is the rope dim, SSM heads filling the width."""
    for k, v in list(d.items()):
        if v is None and k in _FILL:
            v = d[k] = _FILL[k]
        if _is_int(v) and k in _SET:
            d[k] = _SET[k]
        elif _is_int(v) and k in _AT_MOST:
            d[k] = min(v, _AT_MOST[k])
        elif _is_int(v) and k in _AT_LEAST:
            d[k] = max(v, _AT_LEAST[k])
    heads = next((full[k] for k in _HEAD_COUNTS if _is_int(full.get(k))), None)
    for k in _KV_COUNTS:
        if heads is not None and full.get(k) == heads:
            d[k] = HEADS
    if _is_int(full.get("head_dim")) and full.get("head_dim") == full.get("qk_rope_head_dim"):
        d["head_dim"] = d["qk_rope_head_dim"]
    if _is_int(d.get("qk_head_dim")) and _is_int(d.get("qk_nope_head_dim")):
        d["qk_head_dim"] = d["qk_nope_head_dim"] + d["qk_rope_head_dim"]
    hidden = next((d[k] for k in ("hidden_size", "d_model") if _is_int(d.get(k))), HIDDEN)
    if _is_int(d.get("mamba_d_ssm")) and _is_int(d.get("mamba_expand")):
        d["mamba_d_ssm"] = d["mamba_expand"] * hidden
    for expand, ssm_heads, size in _SSM_HEADS:
        if all(_is_int(d.get(k)) for k in (expand, ssm_heads, size)):
            d[ssm_heads] = d[expand] * hidden // d[size]


def _per_layer_config(d: dict[str, Any], full: dict[str, Any]) -> dict[str, Any]:
    """Per-layer overrides (``per_layer_config``: layer index -> fields) for the shrunk layers:
    each new layer takes those of the first old layer of its kind, sized by the tables (a head_dim
    that differs from the config's own: twice the tiny one)."""
    old, new, overrides = full.get("layer_types"), d.get("layer_types"), full.get("per_layer_config")
    if not (isinstance(overrides, dict) and isinstance(old, list) and isinstance(new, list)):
        return {}
    by_index = {int(k): v for k, v in overrides.items()}
    out: dict[int, dict[str, Any]] = {}
    for i, kind in enumerate(new):
        source = by_index.get(old.index(kind), {})
        entry = {k: _SET[k] * (2 if k == "head_dim" and v != full.get(k) else 1)
                 if _is_int(v) and k in _SET else v for k, v in source.items()}
        heads = next((k for k in _HEAD_COUNTS if k in entry), None)
        entry.update({k: entry[heads] for k in _KV_COUNTS
                      if heads and k in entry and source[k] == source[heads]})
        if entry:
            out[i] = entry
    return {"per_layer_config": out}


def _shrink_dict(d: dict[str, Any], vocab_size: int, ids: dict[str, int]) -> None:
    """Shrink one config's fields (as a dict) in place; sub-configs are left to the caller."""
    full = copy.deepcopy(d)
    _shrink_sizes(d, full)
    _shrink_layers(d)
    if "vocab_size" in d:
        d.update({k: vocab_size for k in _VOCABS if _is_int(d.get(k)) and d[k] > 0})
        d.update({k: ids[role] for k, role in _TOKENS.items() if k in d})


def _passed(config: Any, full: dict[str, Any], d: dict[str, Any]) -> dict[str, Any]:
    """The constructor keywords of the shrunk dict ``d``: the fields changed or not at their class
    default (a parent may have set them), but not those the class derives itself (a field whose
    default is None that came out set), layer patterns excepted."""
    import dataclasses

    if not dataclasses.is_dataclass(config):
        return {k: v for k, v in d.items() if k not in full or v != full[k]}
    fields = {f.name: f for f in dataclasses.fields(config)}
    derived = {k for k, f in fields.items() if f.default is None and full.get(k) is not None
               and k not in _per_layer_lists(full)}

    def default(f: Any) -> Any:
        if f.default is not dataclasses.MISSING:
            return f.default
        return f.default_factory() if f.default_factory is not dataclasses.MISSING else None

    return {k: v for k, v in d.items() if k in fields and k not in derived
            and (v != full.get(k) or v != default(fields[k]))}


def _shrunk(config: Any, model_type: str, vocab_size: int, ids: dict[str, int]) -> Any:
    """A new config of ``config``'s class from its shrunk fields, each sub-config shrunk alike."""
    full = config.to_dict()
    d = copy.deepcopy(full)
    _shrink_dict(d, vocab_size, ids)
    kwargs = {**_passed(config, full, d), **_per_layer_config(d, full)}
    kwargs.update(_OVERRIDES.get(f"{model_type}.{config.model_type}", {}))
    for key in getattr(config, "sub_configs", {}) or {}:
        sub = getattr(config, key, None)
        if sub is not None and hasattr(sub, "to_dict"):
            kwargs[key] = _shrunk(sub, model_type, vocab_size, ids)
    return type(config)(**kwargs)


def tiny_config(model_type: str, vocab_size: int, pad_id: int, eos_id: int) -> Any:
    """``AutoConfig.for_model(model_type)`` shrunk to a tiny model of ``vocab_size`` tokens
    (bos = eos, as the embedded tokenizer has no bos)."""
    from transformers import AutoConfig

    try:
        config = _shrunk(AutoConfig.for_model(model_type, **_DEFAULTS.get(model_type, {})),
                         model_type, vocab_size,
                         {"pad": pad_id, "bos": eos_id, "eos": eos_id})
    except Exception as exc:  # a config that cannot be made, or validated once shrunk
        raise TinyBuildError(first_line(exc)) from exc
    return getattr(config, _BUILD_FROM.get(model_type, ""), config)


def first_line(exc: BaseException) -> str:
    """``Type: first line`` of an exception (a line ending in ``:`` joined to the next; for
    Dynamo's errors, what its explanation says went wrong)."""
    lines = [line.strip() for line in str(exc).strip().splitlines()] or [""]
    first = " ".join(lines[:2]) if lines[0].endswith(":") and len(lines) > 1 else lines[0]
    why = next((line for line in lines if line.startswith("Explanation:")), "")
    cause = why.rpartition("): got ")[2] if "): got " in why else why.removeprefix("Explanation: ")
    return f"{type(exc).__name__}: {first}" + (f": {cause}" if cause else "")


def _build(model_type: str, config: Any) -> Any:
    """The causal LM of ``config`` (the mapped class itself for one built from a sub-config)."""
    import transformers
    from transformers.models.auto.modeling_auto import MODEL_FOR_CAUSAL_LM_MAPPING_NAMES

    if model_type in _BUILD_FROM:
        return getattr(transformers, MODEL_FOR_CAUSAL_LM_MAPPING_NAMES[model_type])(config)
    return transformers.AutoModelForCausalLM.from_config(config)


def tiny_causal_lm(model_type: str, tokenizer: Any, *, seed: int = 0) -> Any:
    """A seeded random-weight tiny ``model_type`` causal LM (float32, eval, greedy) for
    ``tokenizer``. Raises :class:`TinyBuildError` or :class:`NotATextDecoder`."""
    import torch
    from transformers import GenerationConfig

    pad_id, eos_id = pad_token_id(tokenizer), tokenizer.eos_token_id
    config = tiny_config(model_type, len(tokenizer), pad_id, eos_id)
    try:
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(seed)
            model = _build(model_type, config).to(torch.float32).eval()
    except Exception as exc:
        raise TinyBuildError(first_line(exc)) from exc
    if model_type == "xmod":   # adapters per language: one must be chosen before any forward
        model.set_default_language(config.languages[0])
    model.generation_config = GenerationConfig(do_sample=False, pad_token_id=pad_id,
                                               eos_token_id=eos_id, bos_token_id=eos_id)
    _check_text_decoder(model, eos_id)
    return model


# Words of an error that says the forward wants more than text ids.
_OTHER_INPUTS = ("pixel_values", "input_features", "encoder_hidden_states", "audio", "codebook",
                 "image", "speech", "shared_kv", "input_values")


def _check_text_decoder(model: Any, token: int) -> None:
    """Raise :class:`NotATextDecoder` unless ``forward(input_ids, attention_mask)`` gives logits
    (a forward that fails otherwise: :class:`TinyBuildError`)."""
    import inspect

    import torch

    name = type(model).__name__
    params = inspect.signature(model.forward).parameters
    required = [n for n, p in params.items() if p.default is inspect.Parameter.empty
                and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD) and n != "input_ids"]
    if "input_ids" not in params or required:
        raise NotATextDecoder(f"{name}.forward requires {', '.join(required) or 'no input_ids'}")
    ids = torch.full((1, 4), token, dtype=torch.long)
    try:
        with torch.no_grad():
            out = model(input_ids=ids, attention_mask=torch.ones_like(ids))
    except Exception as exc:
        reason = first_line(exc)
        codebooks = getattr(model.config, "num_codebooks", None)
        if codebooks:
            raise NotATextDecoder(f"{name} reads {codebooks} audio codebooks per step, not text "
                                  f"ids ({reason})") from exc
        if any(word in reason.lower() for word in _OTHER_INPUTS):
            raise NotATextDecoder(reason) from exc
        raise TinyBuildError(f"forward: {reason}") from exc
    logits = getattr(out, "logits", None)
    if logits is None or tuple(logits.shape[:2]) != (1, 4):
        raise NotATextDecoder(f"{name} gives no per-token logits for input_ids")
