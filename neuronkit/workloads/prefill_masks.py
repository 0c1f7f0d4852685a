"""The attention masks ``nk.generate`` hands the model: kept tensors, so a batch without padding
shares the padded batches' compiled prefill graph (:func:`prefill_masks`), and with no query row
fully masked, so a left-pad row cannot turn into NaN on Neuron (:func:`attended_rows`)."""
from __future__ import annotations

import contextlib
import functools
from typing import Any, Callable, Iterator

__all__ = ["attended_rows", "every_row_attends", "prefill_masks", "wrapped_method"]


def _all_positions(batch_idx, head_idx, q_idx, kv_idx):
    """A mask function that masks nothing (see :func:`prefill_masks`)."""
    return kv_idx >= 0


@contextlib.contextmanager
def prefill_masks(model, on: bool):
    """While ``on``: the prefill's attention masks are always tensors. transformers drops them
    when no row is padded (None: SDPA's ``is_causal``, or no padding multiply for the
    linear-attention layers), its prefill being uncompiled; compiled, a batch without padding
    would then be one more graph. An and-mask that masks nothing keeps the attention mask, a mask
    of ones the linear-attention one (their consumers multiply the states by it), values
    unchanged. The model's ``create_masks_for_generate`` and ``prepare_inputs_for_generation``
    are wrapped, on the instance, for the call."""
    if not on:
        yield
        return
    from transformers.masking_utils import create_masks_for_generate

    def masks_kept(original: Callable, **kwargs: Any) -> Any:
        embeds = kwargs.get("inputs_embeds")
        if embeds is not None and embeds.shape[1] > 1:  # a prefill: more than one new position
            kwargs.setdefault("and_mask_function", _all_positions)
        return original(**kwargs)

    def inputs_kept(original: Callable, *args: Any, **kwargs: Any) -> Any:
        return _recurrent_masks_kept(original(*args, **kwargs))

    with wrapped_method(model, "create_masks_for_generate", masks_kept, create_masks_for_generate), \
            wrapped_method(model, "prepare_inputs_for_generation", inputs_kept):
        yield


@contextlib.contextmanager
def attended_rows(model) -> Iterator[None]:
    """While open: no query row of the attention masks ``model.generate`` builds is fully masked
    (:func:`every_row_attends`), on every device, prefill and decode, compiled or not.

    With a static cache transformers builds every step's mask in ``prepare_inputs_for_generation``
    through ``create_masks_for_generate`` (transformers generation/utils.py:736), wrapped on the
    instance. On Neuron any mask sends SDPA past the NKI flash kernel to a decomposition without a
    safe softmax (``ndb/decompositions.py:383``, ``:451-461``, ``:312-315``): a row of all ``-inf``
    is ``exp(-inf - -inf)`` = NaN, and a NaN value times a zero weight spreads it to the real rows
    in the next layer. A left-pad query row is such a row (its causal keys are all padding)."""
    from transformers.masking_utils import create_masks_for_generate

    def rows_attended(original: Callable, *args: Any, **kwargs: Any) -> Any:
        return every_row_attends(original(*args, **kwargs))

    with wrapped_method(model, "create_masks_for_generate", rows_attended, create_masks_for_generate):
        yield


def every_row_attends(masks: Any) -> Any:
    """``masks`` (one mask or a dict of them) with each fully masked query row of a 4-D boolean
    (SDPA) mask let attend to every position: transformers' own fix for torch < 2.5's SDPA
    (``causal_mask |= torch.all(~causal_mask, dim=-1, keepdim=True)``, the ``allow_torch_fix``
    of transformers 4.5x ``sdpa_mask``). Only pad rows are fully masked; their outputs reach no
    real row (pad keys stay masked for real queries, in the prefill and every decode step), so
    the real rows' tokens are unchanged. Float (eager) masks, flex ``BlockMask``s, 2-D padding
    masks and None pass as they are."""
    import torch

    if isinstance(masks, dict):
        return {k: every_row_attends(v) for k, v in masks.items()}
    if not isinstance(masks, torch.Tensor) or masks.dtype != torch.bool or masks.ndim != 4:
        return masks
    return masks | ~masks.any(dim=-1, keepdim=True)


@contextlib.contextmanager
def wrapped_method(model: Any, name: str, wrapper: Callable, default: Any = None) -> Iterator[None]:
    """``model.<name>`` (else ``default``) replaced, on the instance, by ``wrapper(original,
    ...)`` while open; nothing done where there is no such callable."""
    had = name in vars(model)
    original = getattr(model, name, default)
    if not callable(original):
        yield
        return
    setattr(model, name, functools.partial(wrapper, original))
    try:
        yield
    finally:
        if had:
            setattr(model, name, original)
        else:
            delattr(model, name)


_RECURRENT = ("linear_attention", "conv")   # the keys of linear-attention (padding) masks


def _recurrent_masks_kept(inputs: Any) -> Any:
    """A prefill's model inputs with the linear-attention (recurrent) padding mask a tensor of
    ones where transformers left none (no row padded). Decode steps are left as they are."""
    ids, cache = inputs.get("input_ids"), inputs.get("cache", inputs.get("past_key_values"))
    linear = getattr(cache, "is_linear", None)
    if ids is None or ids.ndim != 2 or ids.shape[1] == 1 or not linear or not any(linear):
        return inputs
    import torch

    mask = inputs.get("attention_mask")
    ones = torch.ones(ids.shape, dtype=torch.long, device=ids.device)
    if isinstance(mask, dict):
        inputs["attention_mask"] = {k: ones if v is None and k in _RECURRENT else v
                                    for k, v in mask.items()}
    elif mask is None and all(linear):       # only linear layers: the mask is the 2-D one
        inputs["attention_mask"] = ones
    return inputs
