"""Load models and tokenizers explicitly onto the device neuronkit chose.

``device_map="auto"`` does not see Neuron (accelerate has no neuron branch), so the whole model
would land on CPU without a word. ``load_model`` always passes an explicit ``device_map`` and
then checks that every parameter and buffer really sits on the intended device.
"""
from __future__ import annotations

import contextlib
import os
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronkit.setup.decode_graphs import warn_if_full
from neuronkit.setup.device import detect, resolve_device
from neuronkit.setup.load_errors import (
    check_model_folder,
    corrupt_weights_error,
    file_not_folder_error,
    not_found_error,
)
from neuronkit.setup.placement import PlacementWarning, check_placement
from neuronkit.setup.tiny import tiny_model

if TYPE_CHECKING:  # pragma: no cover
    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

DTYPES = ("bfloat16", "float32", "float16", "auto")

# check_placement, PlacementReport, PlacementWarning, tiny_model, neuronkit_home, EOS, PAD and the
# two errors live in placement.py, tiny.py and load_errors.py; they stay importable from here
__all__ = ["load_model", "load_tokenizer", "pad_token_id", "DeviceMapWarning", "PadTokenWarning",
           "quiet_progress"]


class DeviceMapWarning(UserWarning):
    """``device_map="auto"`` was passed; neuronkit replaced it with an explicit device."""


class PadTokenWarning(UserWarning):
    """The tokenizer has no pad token; its eos token pads instead."""


def pad_token_id(tokenizer: Any, *, warn: bool = False) -> int:
    """The id to pad with: the tokenizer's pad token, else its eos token (with a
    :class:`PadTokenWarning` when ``warn``). Raises when it has neither."""
    pad = getattr(tokenizer, "pad_token_id", None)
    if pad is not None:
        return int(pad)
    eos = getattr(tokenizer, "eos_token_id", None)
    if eos is None:
        raise ValueError("the tokenizer has neither a pad nor an eos token; set "
                         "tokenizer.pad_token = ... first")
    if warn:
        warnings.warn(f"the tokenizer has no pad token; padding with its eos token "
                      f"{getattr(tokenizer, 'eos_token', None)!r} (id {eos}). Set "
                      "tokenizer.pad_token to silence this.", PadTokenWarning, stacklevel=3)
    return int(eos)


@contextlib.contextmanager
def quiet_progress(quiet: bool = True):
    """Hide transformers' progress bars (a bar for a sub-second load is noise on stderr)."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    if quiet and was:
        hf_logging.disable_progress_bar()
    try:
        yield
    finally:
        if quiet and was:
            hf_logging.enable_progress_bar()


def _resolve_dtype(dtype):
    import torch

    if isinstance(dtype, torch.dtype):
        return dtype
    if isinstance(dtype, str) and dtype in DTYPES:
        return dtype if dtype == "auto" else getattr(torch, dtype)
    raise ValueError(f"unknown dtype {dtype!r}; use one of {', '.join(map(repr, DTYPES))} "
                     "or a torch.dtype such as torch.bfloat16")


def _source(name_or_path) -> str:
    return str(tiny_model()) if name_or_path is None else os.fspath(name_or_path)


def _small_local(source: str, limit_mb: float = 100.0) -> bool:
    """A local folder whose weights load in well under a second (no progress bar needed)."""
    folder = Path(source)
    if not folder.is_dir():
        return False
    size = sum(f.stat().st_size for f in folder.glob("*.safetensors"))
    return size < limit_mb * 2**20


def _device_map_auto(device: str, strict: bool) -> None:
    """Warn that ``device_map="auto"`` is replaced by ``device``; with ``strict``, refuse it, on
    every machine (a script that passes it then fails on the laptop, not later on Trainium)."""
    if detect().neuron_available:
        why = ("device_map='auto' does not see Neuron devices (accelerate's memory planner has "
               "no neuron branch): the whole model would silently stay on CPU")
        fix = "pass device_map='neuron' (or device='neuron')"
    else:
        why = ("device_map='auto' was passed; it cannot place anything on Neuron (none found "
               "here, and accelerate would ignore it anyway), so it would mean CPU")
        fix = "drop device_map and use device=... instead"
    if strict:
        raise ValueError(f"strict=True refuses device_map='auto': {why}. Fix: {fix}, or drop "
                         f"strict=True to have neuronkit replace it with device_map={device!r} "
                         "and warn.")
    # stacklevel 4: the warning points at the caller of load_model (via _plan_placement)
    warnings.warn(f"{why}. neuronkit passes the explicit device_map={device!r} instead. Fix: "
                  f"{fix}.", DeviceMapWarning, stacklevel=4)


def _plan_placement(device: str | None, device_map: Any, distributed: bool,
                    strict: bool) -> tuple[str | None, Any]:
    """(the device every tensor must end on, or None: nothing single to check; the device_map
    to pass ``from_pretrained``, or None) from load_model's ``device`` and ``device_map``."""
    if type(device_map).__name__ == "device":  # a torch.device
        device_map = str(device_map)
    if distributed and device_map is not None:
        raise ValueError("device_map and distributed_config cannot be combined (transformers "
                         "places the shards itself); drop device_map")
    if device_map == "auto":
        # detect() directly: resolve_device(None) would add a DeviceFallbackWarning on top of
        # the DeviceMapWarning below, which already says what happened
        target = detect().device if device in (None, "auto") else resolve_device(device)
        _device_map_auto(target, strict)
        return target, target
    if isinstance(device_map, str):
        target = resolve_device(device_map if device is None else device)
        if device is not None and device_map != target:
            raise ValueError(f"device={device!r} and device_map={device_map!r} disagree; "
                             "pass only one")
        return target, device_map
    if device_map is None:
        target = resolve_device(device)
        return target, None if distributed else target
    return None, device_map  # an explicit per-module mapping: the caller decides


def load_model(name_or_path: str | os.PathLike | None = None, device: str | None = None,
               dtype: str | torch.dtype = "bfloat16", *, strict: bool = False,
               **kw: Any) -> PreTrainedModel:
    """``AutoModelForCausalLM.from_pretrained`` with an explicit device and a placement check.

    ``name_or_path``: folder or Hub name (None: the embedded tiny model). ``device``: as
    ``resolve_device`` (None: neuron, else cuda, else cpu). ``dtype``: "bfloat16", "float32",
    "float16", "auto" or a torch.dtype. ``strict=True`` raises instead of warning about
    ``device_map="auto"`` (on every machine, Neuron or not) and misplaced parameters. Other
    keywords go to ``from_pretrained``; with ``distributed_config`` no device_map is passed
    (transformers places the shards). A file instead of the model's folder, and a weights file
    that does not open (:class:`CorruptWeightsError`), raise errors naming the path.
    Returns the model in eval mode.
    """
    from transformers import AutoModelForCausalLM

    torch_dtype = _resolve_dtype(dtype)
    distributed = kw.get("distributed_config") is not None
    target, device_map = _plan_placement(device, kw.pop("device_map", None), distributed, strict)
    if device_map is not None:
        kw["device_map"] = device_map
    source = _source(name_or_path)
    check_model_folder(source)
    try:
        with quiet_progress(_small_local(source)):
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kw)
    except OSError as exc:
        raise not_found_error("model", source, exc) from exc
    except Exception as exc:
        broken = corrupt_weights_error(exc, source, kw.get("cache_dir"))
        if broken is None:
            raise
        raise broken from exc
    if target is not None and not distributed:
        report = check_placement(model, target)
        if not report.ok:
            if strict:
                raise RuntimeError(str(report))
            warnings.warn(str(report), PlacementWarning, stacklevel=2)
    warn_if_full(model)
    return model.eval()


def load_tokenizer(name_or_path: str | os.PathLike | None = None) -> PreTrainedTokenizerBase:
    """``AutoTokenizer.from_pretrained`` (None: the embedded tiny model's tokenizer)."""
    from transformers import AutoTokenizer

    source = _source(name_or_path)
    if Path(source).expanduser().is_file():
        raise file_not_folder_error("tokenizer", source)
    try:
        return AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        raise not_found_error("tokenizer", source, exc) from exc
