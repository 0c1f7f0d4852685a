"""A static KV cache whose decode graph depends on its length only: one graph per length.

transformers' ``StaticCache`` gives sliding-window (and chunked-attention) layers a
``StaticSlidingWindowLayer`` that keeps its fill level in a Python int
(``cumulative_length_int``). Compiled with ``dynamic=False`` (the way Neuron compiles), Dynamo
guards on that int, so every decode step is a new graph. A plain full-length ``StaticLayer`` in
its place holds the same keys and values for every position; the model still builds its
attention mask from its own config's window, so what each token attends to, and the generated
tokens, are unchanged. The price: a sliding layer holds ``max_cache_len`` positions instead of
the window. Layer kinds whose decode graph cannot be shown to stay bounded are refused.
"""
from __future__ import annotations

from typing import Any

__all__ = ["UnboundedCacheError", "bounded_static_cache"]

_SLIDING = ("StaticSlidingWindowLayer",)      # a Python-int fill level: one graph per step
_BOUNDED = ("StaticLayer", "DummyLayer")      # tensor state only (DummyLayer: shared KV, none)


class UnboundedCacheError(ValueError):
    """The model's static cache has layers whose decode graphs neuronkit cannot keep bounded."""


def bounded_static_cache(model: Any, max_cache_len: int, *,
                         refuse_unbounded: bool = True) -> tuple[Any, int]:
    """``(cache, replaced)``: a ``StaticCache`` for ``model`` of ``max_cache_len`` positions in
    which every attention layer is a full ``StaticLayer``, and how many sliding-window layers were
    replaced to make it so (see the module docstring).

    Raises :class:`UnboundedCacheError` for layer kinds it cannot vouch for (linear attention,
    recurrent or indexed state), naming the layer and what to do; with
    ``refuse_unbounded=False`` (nothing is compiled) they are left as they are.
    """
    from transformers import StaticCache
    from transformers.cache_utils import StaticLayer

    cache = StaticCache(config=model.config, max_cache_len=max_cache_len)
    replaced = 0
    for i, layer in enumerate(cache.layers):
        name = type(layer).__name__
        if name in _SLIDING:
            cache.layers[i] = StaticLayer(max_cache_len=max_cache_len)
            replaced += 1
        elif name not in _BOUNDED and refuse_unbounded:
            raise UnboundedCacheError(
                f"{type(model).__name__}: cache layer {i} is a {name}, whose state neuronkit "
                f"cannot keep to one decode graph per bucket (it may change a Python value on "
                f"every step, which would recompile each token). Generate without compiling "
                f"(nk.generate(..., compile=False)), or run model.generate under a "
                f"CompileRecorder and check that the graphs stay few")
    return cache, replaced

