"""Would ``nk.generate`` give other tokens than ``model.generate``? Checked before a batch runs.

``nk.generate`` changes two things a model may notice. It pads every batch on the left to a
bucket: a model that tells positions from the ``position_ids`` transformers derives from the
mask (Llama, Qwen, ...), or that zeroes the padded positions of its state (Mamba, Qwen3.5's
linear attention), generates the same tokens; others do not (learned or sinusoidal positions
counted from the cache: BART-style decoders; GIT, XLNet). And it gives sliding-window layers a
full-length static layer (``static_cache.py``): a model whose attention mask applies the window
generates the same tokens; one that leaves the window to its cache (Moshi, ...) does not, once a
sequence outgrows the window.

The check runs the model itself, eagerly, two greedy steps after one prompt with its own cache,
then with ``nk.generate``'s static cache, alone and behind pad tokens (the prompt longer than the
window when the call's sequences are), fed the first run's tokens (teacher forcing: a near-tie
at the first step cannot change what the second compares). It refuses what generate would pick
differently: another top token where the first run's lead was beyond rounding, or logits moved
beyond rounding and 7.5% of their spread. Rounding is judged in the dtype the model gave its
logits in (bf16, fp16, fp32; generate converts them to float32), at their scale and depth: two
steps of eps at the largest logit (at least 1) for two layers, times sqrt(layers / 2) deeper.
It runs once per model object (and window case). Off the CPU, where every eager op shape
compiles a kernel on Neuron, it is read off the model instead: the forward takes
``position_ids``, or every layer is a masked linear-attention state (the window case is not
read off).
"""
from __future__ import annotations

import inspect
import math
import weakref
from typing import Any, NamedTuple

from neuronkit.workloads.generate_settings import cache_keyword
from neuronkit.workloads.static_cache import bounded_static_cache

__all__ = ["LeftPaddingError", "check_left_padding", "left_padding_verdict", "sliding_window"]

PROBE_PADS = 3            # pad tokens put before the probe prompt
PROBE_TOKENS = 6          # the probe prompt's length (more when it must outgrow a window)
PROBE_STEPS = 2           # new tokens compared
ROUNDING = 2              # rounding steps (eps x the logits' scale) two runs' logits may drift
                          # apart in a 2-layer model; x sqrt(layers / 2) deeper (28: 7.5)
SPREAD = 0.075            # logits moved past rounding and this part of their std: a change
_verdicts: weakref.WeakKeyDictionary[Any, dict[tuple[bool, bool], str | None]] = weakref.WeakKeyDictionary()


class LeftPaddingError(ValueError):
    """``nk.generate``'s padding or static cache changes the model's output."""


def sliding_window(model: Any) -> int | None:
    """The model's sliding (or chunked) attention window, None when it has none."""
    text = model.config.get_text_config(decoder=True)
    window = getattr(text, "sliding_window", None) or getattr(text, "attention_chunk_size", None)
    return window if isinstance(window, int) and window > 0 else None


class _Run(NamedTuple):
    """One probe run: the new tokens generate picked and their raw logits (float32, one row per
    token), and the dtype they were computed in (the coarser of the forward's logits, before
    generate converts them, and the model's parameters)."""
    tokens: list[int]
    logits: list[Any]
    dtype: Any


def _forcing(tokens: list[int], start: int) -> Any:
    """A logits processor that makes generate pick ``tokens``, one per step, after ``start``
    positions (the raw logits it records are the model's own)."""
    import torch
    from transformers import LogitsProcessor

    class _Forced(LogitsProcessor):
        def __call__(self, input_ids: Any, scores: Any) -> Any:
            step = min(input_ids.shape[1] - start, len(tokens) - 1)
            picked = torch.full_like(scores, float("-inf"))
            picked[:, tokens[step]] = 0.0
            return picked

    return _Forced()


def _steps(model: Any, ids: list[int], pads: int, pad_id: int, static: bool,
           forced: list[int] | None = None) -> _Run:
    """``PROBE_STEPS`` greedy steps after ``ids`` behind ``pads`` pad tokens, with the model's own
    cache or (``static``) ``nk.generate``'s; ``forced``: the tokens to feed instead of its picks
    (teacher forcing: both runs see the same tokens)."""
    import torch
    from transformers import LogitsProcessorList

    input_ids = torch.tensor([[pad_id] * pads + ids], dtype=torch.long, device=model.device)
    mask = torch.tensor([[0] * pads + [1] * len(ids)], dtype=torch.long, device=model.device)
    extra: dict[str, Any] = {}
    if static:
        cache, _ = bounded_static_cache(model, input_ids.shape[1] + PROBE_STEPS,
                                        refuse_unbounded=False)
        extra[cache_keyword(model)] = cache
    if forced:
        extra["logits_processor"] = LogitsProcessorList([_forcing(forced, input_ids.shape[1])])
    dtypes: list[Any] = []          # generate hands out float32 logits: the model's own dtype
    hook = model.register_forward_hook(
        lambda _m, _a, out: dtypes.append(getattr(getattr(out, "logits", None), "dtype", None)))
    try:
        with torch.no_grad():
            out = model.generate(input_ids=input_ids, attention_mask=mask,
                                 max_new_tokens=PROBE_STEPS, do_sample=False,
                                 disable_compile=True, output_logits=True,
                                 return_dict_in_generate=True, pad_token_id=pad_id, **extra)
    finally:
        hook.remove()
    floats = [d for d in (*dtypes, getattr(model, "dtype", None))
              if isinstance(d, torch.dtype) and d.is_floating_point]
    coarsest = max(floats, key=lambda d: torch.finfo(d).eps, default=torch.float32)
    return _Run(out.sequences[0, input_ids.shape[1]:].tolist(),
                [x[0].float().cpu() for x in out.logits], coarsest)


def _rounding_steps(model: Any) -> float:
    """How many rounding steps two runs of ``model`` may drift apart: rounding errors add up
    like a random walk over its layers."""
    layers = getattr(model.config.get_text_config(decoder=True), "num_hidden_layers", None)
    layers = layers if isinstance(layers, int) and layers > 2 else 2
    return ROUNDING * math.sqrt(layers / 2)


def _step_differs(x: Any, y: Any, dtype: Any, steps: float, step: int) -> str | None:
    """Why new token ``step``'s logits ``y`` are not ``x`` up to rounding in ``dtype`` (None:
    they are). Rounding moves a logit by up to ``steps`` steps of ``dtype`` at the logits' scale
    (their largest magnitude, at least 1). Another top token is a change unless the plain run's
    top two were within twice that (a near-tie); logits moved past that and past ``SPREAD`` of
    their standard deviation are a change whatever the picks."""
    import torch

    finfo = torch.finfo(dtype)
    kept = torch.isfinite(x) & (x.abs() < finfo.max / 2)      # masked vocabulary entries aside
    if not bool(kept.any()):
        return None
    xs, ys = x[kept], y[kept]
    drift = steps * finfo.eps * max(float(xs.abs().max()), 1.0)
    gap = float((xs - ys).abs().max())
    gap = gap if gap == gap else float("inf")                  # NaN: a logit went non-finite
    rounding = f"rounding in {str(dtype).removeprefix('torch.')} (up to {drift:.3g} a logit)"
    pick, other = int(x.argmax()), int(y.argmax())
    if pick != other:
        top = x.topk(2).values
        lead = float(top[0] - top[1])
        if lead > 2 * drift:
            return (f"new token {step} would be {other}, not {pick}, which led by {lead:.3g}: "
                    f"more than {rounding} can overturn; its logits differ by up to {gap:.3g}")
    spread = SPREAD * float(xs.std()) if xs.numel() > 1 else 0.0
    if gap > max(drift, spread):
        return (f"the logits of new token {step} differ by up to {gap:.3g}: more than {rounding} "
                f"and {SPREAD:.1%} of their spread ({spread:.3g})")
    return None


def _differs(plain: _Run, other: _Run, steps: float) -> str | None:
    """Why ``other`` (run on ``plain``'s tokens) would not generate what ``plain`` did, judged
    step by step in the coarser of the two runs' dtypes, ``steps`` rounding steps apart at most
    (None: it would)."""
    import torch

    dtype = max(plain.dtype, other.dtype, key=lambda d: torch.finfo(d).eps)
    for step, (x, y) in enumerate(zip(plain.logits, other.logits, strict=False)):
        why = _step_differs(x, y, dtype, steps, step + 1)
        if why is not None:
            return why
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
        cached = _steps(model, ids, 0, pad_id, static=True, forced=own.tokens) if window else own
        behind = (_steps(model, ids, PROBE_PADS, pad_id, static=True, forced=own.tokens)
                  if padded else own)
    except (IndexError, RuntimeError, ValueError, TypeError, AttributeError):
        return None        # the model cannot take the static cache: its batch will say so
    steps = _rounding_steps(model)
    why = _differs(own, cached, steps)
    if why is not None:
        return (f"its sliding window of {window} is kept by its cache, not its attention mask: "
                f"with the full-length static layer nk.generate gives it (a sliding layer "
                f"recompiles every token), after a {len(ids)}-token prompt {why}")
    why = _differs(own, behind, steps)
    if why is not None:
        return (f"left padding changes what it generates: with {PROBE_PADS} pad tokens before "
                f"a {len(ids)}-token prompt, {why}")
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
