"""Your model or the embedded one: a Hub name where the Hub answers, said plainly otherwise.

    choice = nk.model_or_tiny("Qwen/Qwen3-0.6B")
    print(choice.note)                       # where the model comes from
    model = nk.load_model(choice.path, device=nk.detect().device)

Without network, transformers retries a Hub lookup for about a minute before it gives up, so
the Hub is asked once, with a short timeout, before anything is loaded.
"""
from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlparse

from neuronkit.setup.tiny import tiny_model

__all__ = ["ModelChoice", "hub_reachable", "model_or_tiny"]

OFFLINE_FLAGS = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE")


def hub_reachable(timeout: float = 3.0) -> bool:
    """Whether the Hugging Face Hub (``$HF_ENDPOINT``, default huggingface.co) accepts a
    connection within ``timeout`` seconds; False at once when ``HF_HUB_OFFLINE`` is set."""
    if any(os.environ.get(flag, "").strip().lower() in ("1", "true", "yes", "on")
           for flag in OFFLINE_FLAGS):
        return False
    url = urlparse(os.environ.get("HF_ENDPOINT") or "https://huggingface.co")
    port = url.port or (443 if url.scheme == "https" else 80)
    try:
        with socket.create_connection((url.hostname or "huggingface.co", port), timeout=timeout):
            return True
    except OSError:  # no DNS, refused, timed out
        return False


@dataclass(frozen=True)
class ModelChoice:
    """What to load: ``path`` (a folder or a Hub name), ``source`` (``"local folder"``,
    ``"Hugging Face Hub"`` or ``"embedded tiny model"``) and a sentence saying so."""

    path: str
    source: str
    note: str


def model_or_tiny(name: str | os.PathLike[str], timeout: float = 3.0) -> ModelChoice:
    """``name`` when it is a local folder or the Hub is reachable; else the embedded tiny Qwen3
    (``nk.tiny_model()``), with a note that says which and why."""
    text = os.fspath(name).strip()
    if not text:
        raise ValueError("name is empty: pass a Hub name such as 'Qwen/Qwen3-0.6B' or a folder "
                         "that save_pretrained wrote")
    if Path(text).expanduser().is_dir():
        return ModelChoice(str(Path(text).expanduser()), "local folder",
                           f"using the local folder {Path(text).name!r}")
    if hub_reachable(timeout):
        return ModelChoice(text, "Hugging Face Hub", f"using {text!r} from the Hugging Face Hub")
    return ModelChoice(str(tiny_model()), "embedded tiny model",
                       f"the Hugging Face Hub is not reachable from here, so {text!r} cannot be "
                       "downloaded: using the embedded tiny Qwen3 instead (same code path; "
                       "with the Hub, the same cells load your model)")
