"""A static cache whose graphs depend on its length only: at most a prefill and a decode graph
per length.

transformers' ``StaticCache`` gives sliding-window (and chunked-attention) layers a
``StaticSlidingWindowLayer`` that keeps its fill level in a Python int
(``cumulative_length_int``). Compiled with ``dynamic=False`` (the way Neuron compiles), Dynamo
guards on that int, so every decode step is a new graph. A plain full-length ``StaticLayer`` in
its place holds the same keys and values for every position; the model still builds its
attention mask from its own config's window, so what each token attends to, and the generated
tokens, are unchanged. The price: a sliding layer holds ``max_cache_len`` positions instead of
the window. Hybrid layers (a linear-attention state beside a sliding window) get the full-length
hybrid layer the same way.

Linear-attention and state-space layers (Qwen3.5's gated delta net, Mamba, ...) keep conv and
recurrent states of a fixed size; their only Python state is whether they hold one yet, which
is what tells a prefill from a decode step: two graphs. A cache of nothing but such layers has
no length, which transformers' chunked (compiled) prefill asks for: :class:`BoundedStaticCache`
answers 0 while it is empty. Layer kinds whose graphs cannot be shown to stay bounded (indexed
attention, unknown kinds) are refused.
"""
from __future__ import annotations

import functools
from typing import Any

__all__ = ["UnboundedCacheError", "bounded_static_cache"]

# a Python-int fill level (one graph per step), and the full-length layer that replaces it
_SLIDING = {"StaticSlidingWindowLayer": "StaticLayer",
            "LinearAttentionAndStaticSlidingWindowAttentionLayer":
                "LinearAttentionAndStaticFullAttentionLayer"}
# tensor state only (DummyLayer: shared KV, none; the linear ones: fixed-size conv/recurrent state)
_BOUNDED = ("StaticLayer", "DummyLayer", "LinearAttentionLayer",
            "LinearAttentionAndStaticFullAttentionLayer")


class UnboundedCacheError(ValueError):
    """The model's static cache has layers whose decode graphs neuronkit cannot keep bounded."""


@functools.cache
def _cache_class() -> type:
    """``StaticCache`` that has a length (0) while empty even when no layer keeps keys (one
    class per process: Dynamo guards on a cache's type)."""
    from transformers import StaticCache
    from transformers.cache_utils import CacheLayerMixin

    class BoundedStaticCache(StaticCache):
        """A ``StaticCache``; with only linear-attention layers, its length is 0 until the
        prefill fills a state (transformers' chunked prefill reads it; nothing else does)."""

        def get_seq_length(self, layer_idx: int = 0) -> int:
            if any(isinstance(layer, CacheLayerMixin) for layer in self.layers):
                return super().get_seq_length(layer_idx)
            if any(any(layer.has_previous_state.values()) for layer in self.layers
                   if hasattr(layer, "has_previous_state")):
                return super().get_seq_length(layer_idx)   # transformers' own error
            return 0

    BoundedStaticCache.__qualname__ = "BoundedStaticCache"    # named as if at module level
    return BoundedStaticCache


def _full_length(layer: Any, kind: str, max_cache_len: int) -> Any:
    """The full-length layer of ``kind`` that stands in for a sliding ``layer``."""
    from transformers import cache_utils

    cls = getattr(cache_utils, kind)
    if hasattr(layer, "number_of_states"):
        return cls(max_cache_len=max_cache_len, number_of_states=layer.number_of_states)
    return cls(max_cache_len=max_cache_len)


def bounded_static_cache(model: Any, max_cache_len: int, *,
                         refuse_unbounded: bool = True) -> tuple[Any, int]:
    """``(cache, replaced)``: a static cache for ``model`` of ``max_cache_len`` positions in
    which no layer keeps a per-step Python value, and how many sliding-window layers were
    replaced by full-length ones to make it so (see the module docstring).

    Raises :class:`UnboundedCacheError` for layer kinds it cannot vouch for (indexed attention,
    unknown kinds), naming the layer and what to do; with ``refuse_unbounded=False`` (nothing is
    compiled) they are left as they are.
    """
    try:
        cache = _cache_class()(config=model.config, max_cache_len=max_cache_len)
    except KeyError as exc:   # a layer type transformers' StaticCache has no layer for
        raise UnboundedCacheError(
            f"{type(model).__name__}: transformers' StaticCache has no layer for its layer type "
            f"{exc}, so neuronkit cannot give it a static cache; call model.generate") from exc
    replaced = 0
    for i, layer in enumerate(cache.layers):
        name = type(layer).__name__
        if name in _SLIDING:
            cache.layers[i] = _full_length(layer, _SLIDING[name], max_cache_len)
            replaced += 1
        elif name not in _BOUNDED and refuse_unbounded:
            raise UnboundedCacheError(
                f"{type(model).__name__}: cache layer {i} is a {name}, whose state neuronkit "
                f"cannot keep to one decode graph per bucket (it may change a Python value on "
                f"every step, which would recompile each token). Generate without compiling "
                f"(nk.generate(..., compile=False)), or run model.generate under a "
                f"CompileRecorder and check that the graphs stay few")
    return cache, replaced
