"""Would ``nk.generate`` give other tokens than ``model.generate``? Checked before a batch runs.

``nk.generate`` changes two things a model may notice. It pads every batch on the left to a
bucket: a model that tells positions from the ``position_ids`` transformers derives from the
mask (Llama, Qwen, ...), or that zeroes the padded positions of its state (Mamba, Qwen3.5's
linear attention), generates the same tokens; others do not (learned or sinusoidal positions
counted from the cache: BART-style decoders; GIT, XLNet). And it gives sliding-window layers a
full-length static layer (``static_cache.py``): a model whose attention mask applies the window
generates the same tokens; one that leaves the window to its cache (Moshi, ...) does not, once a
sequence outgrows the window.

The check runs the model itself, eagerly, two greedy steps after one prompt: with its own cache,
then with ``nk.generate``'s static cache, alone and behind pad tokens (the prompt longer than the
window when the call's sequences are), and compares the logits. It runs once per model object
(and window case). Off the CPU, where every eager op shape compiles a kernel on Neuron, it is read
off the model instead: the forward takes ``position_ids``, or every layer is a masked
linear-attention state (the window case is not read off).
"""
from __future__ import annotations

import inspect
import weakref
from typing import Any

from neuronkit.workloads.generate_settings import cache_keyword
from neuronkit.workloads.static_cache import bounded_static_cache

__all__ = ["LeftPaddingError", "check_left_padding", "left_padding_verdict", "sliding_window"]

PROBE_PADS = 3            # pad tokens put before the probe prompt
PROBE_TOKENS = 6          # the probe prompt's length (more when it must outgrow a window)
_verdicts: weakref.WeakKeyDictionary[Any, dict[tuple[bool, bool], str | None]] = weakref.WeakKeyDictionary()


class LeftPaddingError(ValueError):
    """``nk.generate``'s padding or static cache changes the model's output."""


def sliding_window(model: Any) -> int | None:
    """The model's sliding (or chunked) attention window, None when it has none."""
    text = model.config.get_text_config(decoder=True)
    window = getattr(text, "sliding_window", None) or getattr(text, "attention_chunk_size", None)
    return window if isinstance(window, int) and window > 0 else None


def _tolerance(logits: Any) -> float:
    """How far two runs' logits may drift by arithmetic alone (per dtype)."""
    import torch

    rel = 1e-3 if logits.dtype in (torch.float32, torch.float64) else 5e-2
    return rel * float(logits.abs().max()) + 1e-5


def _steps(model: Any, ids: list[int], pads: int, pad_id: int, static: bool) -> Any:
    """The logits of two greedy steps after ``ids`` behind ``pads`` pad tokens, with the model's
    own cache or (``static``) ``nk.generate``'s."""
    import torch

    input_ids = torch.tensor([[pad_id] * pads + ids], dtype=torch.long, device=model.device)
    mask = torch.tensor([[0] * pads + [1] * len(ids)], dtype=torch.long, device=model.device)
    extra = {}
    if static:
        cache, _ = bounded_static_cache(model, input_ids.shape[1] + 2, refuse_unbounded=False)
        extra[cache_keyword(model)] = cache
    with torch.no_grad():
        out = model.generate(input_ids=input_ids, attention_mask=mask, max_new_tokens=2,
                             do_sample=False, disable_compile=True, output_logits=True,
                             return_dict_in_generate=True, pad_token_id=pad_id, **extra)
    return [x.float().cpu() for x in out.logits]


def _gap(a: list[Any], b: list[Any]) -> tuple[int, float] | None:
    """(step, largest difference) of the first step whose logits differ beyond arithmetic."""
    for step, (x, y) in enumerate(zip(a, b, strict=False)):
        gap = float((x - y).abs().max())
        if gap > _tolerance(x):
            return step + 1, gap
    return None


def _probe(model: Any, ids: list[int], pad_id: int, beyond_window: bool,
           padded: bool) -> str | None:
    """Why ``nk.generate``'s cache (``beyond_window``) or padding (``padded``) changes
    ``model``'s output (None: neither). A static cache the model cannot run with is left to the
    batch, which says so."""
    window = sliding_window(model) if beyond_window else None
    want = max(window + 1, PROBE_TOKENS) if window else PROBE_TOKENS
    ids = (ids * (want // max(len(ids), 1) + 1))[:want]
    own = _steps(model, ids, 0, pad_id, static=False)
    try:
        cached = _steps(model, ids, 0, pad_id, static=True) if window else own
        behind = _steps(model, ids, PROBE_PADS, pad_id, static=True) if padded else own
    except (IndexError, RuntimeError, ValueError, TypeError, AttributeError):
        return None        # the model cannot take the static cache: its batch will say so
    gap = _gap(own, cached)
    if gap is not None:
        return (f"its sliding window of {window} is kept by its cache, not its attention mask: "
                f"with the full-length static layer nk.generate gives it (a sliding layer "
                f"recompiles every token), the logits of new token {gap[0]} after a "
                f"{len(ids)}-token prompt differ by up to {gap[1]:.3g}")
    gap = _gap(own, behind)
    if gap is not None:
        return (f"left padding changes what it generates: with {PROBE_PADS} pad tokens before "
                f"a {len(ids)}-token prompt, the logits of new token {gap[0]} differ by up to "
                f"{gap[1]:.3g}")
    return None


def _read_off(model: Any) -> str | None:
    """Why left padding may change ``model``'s output, read off its code without running it
    (None: the forward takes position_ids, or every layer is a masked linear-attention state)."""
    if "position_ids" in inspect.signature(model.forward).parameters:
        return None
    kinds = set(getattr(model.config.get_text_config(decoder=True), "layer_types", None) or ())
    if kinds and kinds <= {"linear_attention"}:
        return None
    return ("left padding may change what it generates: its forward takes no position_ids "
            "(positions are counted from the cache, or a recurrent state is fed the pad tokens)")


def left_padding_verdict(model: Any, ids: list[int], pad_id: int, *, padded: bool = True,
                         longest: int = 0) -> str | None:
    """Why ``nk.generate`` would change ``model``'s output, None when it would not; kept per
    model. ``padded``: the call pads rows; ``longest``: the most positions a sequence of the call
    holds (its largest bucket plus the new tokens), checked against the sliding window."""
    window = sliding_window(model)
    beyond_window = window is not None and longest > window
    case = (padded, beyond_window)
    if not any(case):
        return None
    kept = _verdicts.setdefault(model, {})
    if case not in kept:
        kept[case] = (_probe(model, ids, pad_id, beyond_window, padded)
                      if model.device.type == "cpu" else _read_off(model) if padded else None)
    return kept[case]


def check_left_padding(model: Any, ids: list[int], pad_id: int, *, padded: bool = True,
                       longest: int = 0) -> None:
    """Raise :class:`LeftPaddingError` when ``nk.generate`` would change ``model``'s output."""
    why = left_padding_verdict(model, ids, pad_id, padded=padded, longest=longest)
    if why is None:
        return
    fix = ("keep each prompt plus max_new_tokens within the window, or call model.generate"
           if why.startswith("its sliding window") else
           "generate without padding: nk.generate(..., buckets=None, batch_size=1) (each prompt "
           "alone: one graph per prompt length), or model.generate")
    raise LeftPaddingError(f"{type(model).__name__}: {why}. nk.generate's tokens would differ "
                           f"from model.generate's; {fix}")
