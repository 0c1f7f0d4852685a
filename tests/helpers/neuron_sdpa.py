"""A CPU stand-in for native torch-neuronx's attention: ``F.scaled_dot_product_attention`` replaced
by the decomposition Neuron compiles when a mask is given, which has no safe softmax.

What it copies (torch-neuronx snapshot, ``ndb/`` = torch_neuronx/neuron_dynamo_backend/):

- ``csrc/aten/SdpBackendSelection.cpp:28-48``: a 4-D query, key and value on Neuron take the
  ``overrideable`` backend, i.e. ``aten._scaled_dot_product_fused_attention_overrideable``.
  PyTorch's ``scaled_dot_product_attention`` (aten/src/ATen/native/transformers/attention.cpp,
  ``case SDPBackend::overrideable``) first turns a boolean mask into an additive one
  (``convert_boolean_attn_mask``: ``-inf`` where False, 0 where True).
- ``ndb/decompositions.py:378-385``: the NKI flash kernel only when ``attn_bias is None`` (and
  tile-aligned lengths); any mask falls back (``ndb/decompositions.py:451-461``, with
  ``enable_gqa=True``) to ``scaled_dot_product_attention_decomposition``
  (``ndb/decompositions.py:254-329``), copied below line by line: the scores, the causal
  ``masked_fill``, the mask, then a plain ``exp(s - max) / sum``. A row whose every score is
  ``-inf`` gives ``max = -inf``, ``-inf - -inf = NaN``: a NaN row, where torch's own math kernel
  gives zeros (its safe softmax).

With no mask the flash kernel may run instead; it has no masked rows either, so the stand-in runs
the same decomposition for every call. The eager MLIR path (``tn/python_ops/torch_mlir/ops/
scaled_dot_product_attention.py:49-81``) is the same arithmetic (``logits + attn_bias``, then
``exp(l - max) / sum``).
"""
from __future__ import annotations

import contextlib
import math
from typing import Iterator

import torch

__all__ = ["neuron_sdpa", "neuron_sdpa_decomposition"]


def _additive(mask: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    """PyTorch's ``convert_boolean_attn_mask``: a boolean mask as ``-inf`` / 0, others as given."""
    if mask.dtype != torch.bool:
        return mask
    return torch.where(mask.logical_not(), float("-inf"), torch.zeros((), dtype=dtype))


def neuron_sdpa_decomposition(query: torch.Tensor, key: torch.Tensor, value: torch.Tensor,
                              attn_mask: torch.Tensor | None = None, dropout_p: float = 0.0,
                              is_causal: bool = False, scale: float | None = None,
                              enable_gqa: bool = False) -> torch.Tensor:
    """``F.scaled_dot_product_attention`` as Neuron's decomposition computes it (no safe softmax)."""
    if dropout_p:
        raise NotImplementedError("the stand-in copies the inference path only (dropout_p=0)")
    if attn_mask is not None:
        attn_mask = _additive(attn_mask, query.dtype)
    # ndb/decompositions.py:283-327 from here on (dropout and the LSE left out)
    B, q_heads, L, E = query.shape
    _, kv_heads, S, _ = key.shape
    if q_heads > kv_heads and q_heads % kv_heads == 0:   # enable_gqa=True: ndb/...:460
        repeat_factor = q_heads // kv_heads
        key = key.repeat_interleave(repeat_factor, dim=1)
        value = value.repeat_interleave(repeat_factor, dim=1)
    if scale is None:
        scale = 1.0 / math.sqrt(E)
    scores = torch.matmul(query, key.transpose(-2, -1)) * scale
    if is_causal:
        causal_mask = torch.triu(scores.new_ones(L, S, dtype=torch.bool), diagonal=S - L + 1)
        scores = scores.masked_fill(causal_mask, float("-inf"))
    if attn_mask is not None:
        if attn_mask.dtype == torch.bool:
            scores = scores.masked_fill(~attn_mask, float("-inf"))
        else:
            scores = scores + attn_mask
    max_scores = torch.max(scores, dim=-1, keepdim=True)[0]
    exp_scores = torch.exp(scores - max_scores)
    sum_exp = torch.sum(exp_scores, dim=-1, keepdim=True)
    attn_weights = exp_scores / sum_exp
    return torch.matmul(attn_weights, value)


@contextlib.contextmanager
def neuron_sdpa() -> Iterator[None]:
    """While open, ``torch.nn.functional.scaled_dot_product_attention`` is the Neuron decomposition.

    transformers' SDPA attention (``transformers/integrations/sdpa_attention.py``,
    ``sdpa_attention_forward``) looks the function up on ``torch.nn.functional`` at each call, so
    eager forwards and graphs Dynamo traces while this is open (call ``torch.compiler.reset()``
    around it) both run the stand-in. The mask reaches it as on Neuron: transformers passes no
    ``enable_gqa`` with a mask (``use_gqa_in_sdpa``), so it repeats or packs the KV heads itself."""
    original = torch.nn.functional.scaled_dot_product_attention
    torch.nn.functional.scaled_dot_product_attention = neuron_sdpa_decomposition
    try:
        yield
    finally:
        torch.nn.functional.scaled_dot_product_attention = original
