"""``nk.pipeline``: transformers' pipeline, the page's second way in, on an explicit device.

(The module is ``pipelines``, as in transformers, so that importing it never shadows the
``nk.pipeline`` function.)"""
from __future__ import annotations

import warnings
from typing import Any

from neuronkit.setup.device import resolve_device

__all__ = ["pipeline"]


def pipeline(task: str, model: Any = None, **kw):
    """``transformers.pipeline`` on an explicit device, never left to automatic placement.

    A loaded model keeps its own device; a name or folder goes to the device ``nk.detect()``
    chooses (``"neuron"`` on Trainium), or to ``device=`` if given. ``device_map="auto"``
    (which does not see Neuron) is replaced by that explicit device, with a warning.
    """
    import transformers

    requested = kw.pop("device", None)
    device_map = kw.pop("device_map", None)
    loaded = model is not None and not isinstance(model, str) and hasattr(model, "device")
    if type(device_map).__name__ == "device":  # a torch.device
        device_map = str(device_map)
    if device_map is not None and not isinstance(device_map, str):
        raise TypeError(f"device_map must be one device such as 'neuron' or 'cpu' (or 'auto'), "
                        f"got {type(device_map).__name__} {device_map!r:.60}; pipeline places the "
                        "whole model on one device. For a per-module map, load the model with "
                        "nk.load_model(..., device_map={...}) and pass the model")
    if device_map is not None and device_map != "auto":
        if requested is not None:
            raise ValueError("pass device= or device_map=, not both")
        requested = device_map
    if loaded:
        device = str(model.device)
        kind = str(requested).partition(":")[0]
        if requested not in (None, "auto") and kind != model.device.type:
            raise ValueError(f"the model is loaded on {device} but device={requested!r} was "
                             "asked; load it there (nk.load_model(..., device=...)) or drop "
                             "device=")
    else:
        device = resolve_device(requested)
    if device_map == "auto":
        warnings.warn(f"device_map='auto' does not see Neuron devices; using the explicit "
                      f"device={device!r} instead", UserWarning, stacklevel=2)
    return transformers.pipeline(task, model=model, device=device, **kw)
