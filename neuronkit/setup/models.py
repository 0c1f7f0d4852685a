"""Load models explicitly onto the device neuronkit chose, and build the embedded tiny model.

``device_map="auto"`` does not see Neuron (accelerate has no neuron branch), so the whole model
would land on CPU without a word. ``load_model`` always passes an explicit ``device_map`` and
then checks that every parameter and buffer really sits on the intended device.

``tiny_model()`` copies a tiny Qwen3 (156k parameters, 630 KB) shipped with the package: a
byte-level BPE tokenizer and weights trained briefly on the package's own text (by
``neuronkit/examples/train_tiny.py``), so greedy generation prints words, without a network.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import shutil
import tempfile
import warnings
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

from neuronkit.setup.decode_graphs import warn_if_full
from neuronkit.setup.device import detect, resolve_device

if TYPE_CHECKING:  # pragma: no cover
    from importlib.resources.abc import Traversable

    import torch
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

HOME_ENV = "NEURONKIT_HOME"
TINY_NAME = "tiny-qwen3"
TINY_RECIPE = 2  # bump when the build below changes: existing builds are then rebuilt (1: random)
SHIPPED = f"data/{TINY_NAME}"  # package data written by neuronkit/examples/train_tiny.py
STAMP_FILE = "neuronkit-build.json"
PAD, EOS = "<|pad|>", "<|endoftext|>"
DTYPES = ("bfloat16", "float32", "float16", "auto")

__all__ = ["load_model", "load_tokenizer", "check_placement", "tiny_model", "neuronkit_home",
           "pad_token_id", "PlacementReport", "ModelNotFoundError", "CorruptWeightsError",
           "DeviceMapWarning", "PlacementWarning", "PadTokenWarning", "quiet_progress",
           "EOS", "PAD"]


class DeviceMapWarning(UserWarning):
    """``device_map="auto"`` was passed; neuronkit replaced it with an explicit device."""


class PlacementWarning(UserWarning):
    """Some parameters or buffers are not on the device the model was loaded for."""


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


# --------------------------------------------------------------------------- the tiny model

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


def neuronkit_home(home: str | os.PathLike | None = None) -> Path:
    """``home``, else ``$NEURONKIT_HOME``, else the user cache folder for neuronkit."""
    if home is None:
        home = os.environ.get(HOME_ENV)
    if not home:
        import platformdirs

        home = platformdirs.user_cache_dir("neuronkit")
    return Path(home).expanduser()


def _shipped() -> Traversable:
    """The trained tiny model shipped as package data (see ``neuronkit/examples/train_tiny.py``)."""
    return resources.files("neuronkit").joinpath(SHIPPED)


def _shipped_files() -> list[Traversable]:
    """The shipped files, by name (none when the folder is missing)."""
    folder = _shipped()
    if not folder.is_dir():
        return []
    return sorted((f for f in folder.iterdir() if f.is_file()), key=lambda f: f.name)


def _stamp() -> dict[str, Any]:
    digest = hashlib.sha256()
    for f in _shipped_files():
        digest.update(f.name.encode() + b"\0" + f.read_bytes())
    return {"recipe": TINY_RECIPE, "shipped_sha256": digest.hexdigest()[:16]}


def _is_built(folder: Path) -> bool:
    try:
        stamp = json.loads((folder / STAMP_FILE).read_text())
    except (OSError, ValueError):
        return False
    return stamp == _stamp() and (folder / "model.safetensors").is_file()


def _build_into(folder: Path) -> None:
    """Copy the shipped tokenizer, config, trained weights and generation config into
    ``folder``, then stamp it."""
    files = _shipped_files()
    if not any(f.name == "model.safetensors" for f in files):
        raise FileNotFoundError(f"the tiny model's weights are missing from the package "
                                f"({_shipped()}); reinstall neuronkit")
    for f in files:
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / STAMP_FILE).write_text(json.dumps(_stamp(), indent=2) + "\n")


def tiny_model(home: str | os.PathLike | None = None) -> Path:
    """Folder of the embedded tiny Qwen3 + tokenizer; copied once from the package, then reused.

    It lives in ``<home>/tiny-qwen3`` (home: argument, ``$NEURONKIT_HOME``, or the user cache
    folder). Concurrent first calls are safe: it is built in a temporary folder beside the
    target under a file lock, then renamed into place.
    """
    from filelock import FileLock

    root = neuronkit_home(home)
    target = root / TINY_NAME
    if _is_built(target):
        return target
    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{TINY_NAME}.lock")):
        if _is_built(target):  # another process finished it while we waited
            return target
        for leftover in root.glob(f".{TINY_NAME}-*"):  # from a build that was killed
            shutil.rmtree(leftover, ignore_errors=True)
        tmp = Path(tempfile.mkdtemp(prefix=f".{TINY_NAME}-", dir=root))
        try:
            _build_into(tmp)
            tmp.chmod(0o755)  # mkdtemp makes it private; the model is not secret
            if target.exists():  # stale or incomplete build from an older recipe
                old = Path(tempfile.mkdtemp(prefix=f".{TINY_NAME}-old-", dir=root))
                os.replace(target, old / TINY_NAME)
                shutil.rmtree(old, ignore_errors=True)
            os.replace(tmp, target)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    return target


# --------------------------------------------------------------------------- placement

@dataclass
class PlacementReport:
    """Where a model's parameters and buffers are, against where they should be."""

    device: str
    checked: int = 0
    stragglers: dict[str, str] = field(default_factory=dict)  # tensor name -> its device

    @property
    def ok(self) -> bool:
        return not self.stragglers

    def __str__(self) -> str:
        if self.ok:
            return f"placement ok: all {self.checked} parameters and buffers are on {self.device}"
        shown = [f"  {name} on {dev}" for name, dev in list(self.stragglers.items())[:10]]
        more = len(self.stragglers) - len(shown)
        if more:
            shown.append(f"  ... and {more} more")
        return (f"placement: {len(self.stragglers)} of {self.checked} parameters/buffers are not "
                f"on {self.device}:\n" + "\n".join(shown))


def _parse_device(device) -> tuple[str, int | None]:
    """("neuron", 1) from "neuron:1" or a torch.device; works without torch-neuronx installed."""
    kind, _, index = str(device).partition(":")
    if not kind or (index and not index.isdigit()):
        raise ValueError(f"not a device: {device!r}; use e.g. 'neuron', 'neuron:0', 'cpu'")
    return kind, int(index) if index else None


def _matches(actual, want: tuple[str, int | None]) -> bool:
    kind, index = want
    return actual.type == kind and (index is None or (actual.index or 0) == index)


def check_placement(model: torch.nn.Module, device: str | torch.device | None = None
                    ) -> PlacementReport:
    """Check that every parameter and buffer of ``model`` is on ``device``.

    ``device`` is a string or ``torch.device``; without an index (``"neuron"``) any index
    matches. ``None`` means the device holding most of the tensors.
    """
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    if device is None:
        counts: dict[str, int] = {}
        for _, t in tensors:
            counts[t.device.type] = counts.get(t.device.type, 0) + t.numel()
        device = max(counts, key=lambda kind: counts[kind]) if counts else "cpu"
    want = _parse_device(device)
    stragglers = {name: str(t.device) for name, t in tensors if not _matches(t.device, want)}
    return PlacementReport(device=str(device), checked=len(tensors), stragglers=stragglers)


# --------------------------------------------------------------------------- loading

class ModelNotFoundError(FileNotFoundError):
    """A model or tokenizer was neither a local folder nor reachable on the Hugging Face Hub."""


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


def _a_file(what: str, name: str) -> ModelNotFoundError:
    """A file was passed where the folder holding config.json (or the tokenizer) belongs."""
    local = Path(name).expanduser().resolve()
    marker = "config.json" if what == "model" else "tokenizer_config.json"
    hint = (f" ({local.parent} holds a {marker}: pass that folder)"
            if (local.parent / marker).is_file() else "")
    return ModelNotFoundError(
        f"cannot load {what} {name!r}: {local} is a file, not a folder{hint}. Fix: pass the "
        f"folder holding {marker} (the folder save_pretrained wrote), a Hub name, or None for "
        "the embedded tiny model.")


def _not_found(what: str, name: str, exc: Exception) -> ModelNotFoundError:
    local = Path(name).expanduser()
    if local.is_file():
        return _a_file(what, name)
    if local.is_dir():
        tried = f"the local folder {local.resolve()} exists but could not be loaded as a {what}"
    else:
        tried = (f"no local folder {local.resolve()} exists, and the Hugging Face Hub lookup "
                 f"for {name!r} failed (offline, or no such repository)")
    return ModelNotFoundError(
        f"cannot load {what} {name!r}: {tried}. Underlying error: {type(exc).__name__}: "
        f"{str(exc).splitlines()[0] if str(exc) else ''}\nFix: pass an existing folder that "
        "save_pretrained wrote, a Hub name reachable from here, or None for the embedded "
        "tiny model (nk.tiny_model()).")


class CorruptWeightsError(OSError):
    """A weights file of the model could not be read: truncated, or not a safetensors file."""


def _weights_folder(source: str, cache_dir: Any = None) -> Path | None:
    """The local folder holding ``source``'s weights: the folder itself, or the Hub cache's
    snapshot of the repository (None when neither is known)."""
    local = Path(source).expanduser()
    if local.is_dir():
        return local
    try:
        from huggingface_hub import try_to_load_from_cache

        cached = try_to_load_from_cache(source, "config.json", cache_dir=cache_dir)
    except Exception:  # not a valid repository name, or no cache
        return None
    return Path(cached).parent if isinstance(cached, str) else None


def _unreadable(path: Path) -> str | None:
    """Why the safetensors file ``path`` cannot be opened (None: it opens)."""
    from safetensors import safe_open

    try:
        with safe_open(str(path), framework="pt") as f:
            f.keys()
    except Exception as exc:  # SafetensorError, OSError: whatever keeps it from loading
        return f"{type(exc).__name__}: {exc}"
    return None


def _corrupt_weights(exc: Exception, source: str, cache_dir: Any = None
                     ) -> CorruptWeightsError | None:
    """A :class:`CorruptWeightsError` naming the weights files that do not open, when reading
    weights is what failed (safetensors' error names no file); else None."""
    if type(exc).__name__ != "SafetensorError":
        return None
    folder = _weights_folder(source, cache_dir)
    broken = {} if folder is None else \
        {f: why for f in sorted(folder.glob("*.safetensors")) if (why := _unreadable(f))}
    detail = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    if not broken:
        where = f" in {folder}" if folder is not None else ""
        return CorruptWeightsError(
            f"cannot load model {source!r}: a safetensors weights file{where} is corrupt or "
            f"truncated ({detail}). Fix: save the model again (model.save_pretrained) or, for a "
            f"Hub model, remove its copy from the Hugging Face cache (`hf cache rm "
            f"model/{source}`) so that the next load downloads it again.")
    files = "; ".join(f"{f} ({why.splitlines()[0]})" for f, why in broken.items())
    hub = not Path(source).expanduser().is_dir()
    fix = (f"remove the repository from the Hugging Face cache (`hf cache rm model/{source}`) "
           "and load again to download it afresh" if hub else
           "write the folder again with model.save_pretrained(...), or copy the file(s) again "
           "from where they came from (an interrupted download or copy truncates them)")
    return CorruptWeightsError(
        f"cannot load model {source!r}: {len(broken)} weights file(s) are corrupt or truncated: "
        f"{files}. Fix: {fix}.")


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
    warnings.warn(f"{why}. neuronkit passes the explicit device_map={device!r} instead. Fix: "
                  f"{fix}.", DeviceMapWarning, stacklevel=3)


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
    device_map = kw.pop("device_map", None)
    if type(device_map).__name__ == "device":  # a torch.device
        device_map = str(device_map)
    distributed = kw.get("distributed_config") is not None
    if distributed and device_map is not None:
        raise ValueError("device_map and distributed_config cannot be combined (transformers "
                         "places the shards itself); drop device_map")
    if device_map == "auto":
        # detect() directly: resolve_device(None) would add a DeviceFallbackWarning on top of
        # the DeviceMapWarning below, which already says what happened
        target = detect().device if device in (None, "auto") else resolve_device(device)
        _device_map_auto(target, strict)
        device_map = target
    elif isinstance(device_map, str):
        target = resolve_device(device_map if device is None else device)
        if device is not None and device_map != target:
            raise ValueError(f"device={device!r} and device_map={device_map!r} disagree; "
                             "pass only one")
    elif device_map is None:
        target = resolve_device(device)
        device_map = None if distributed else target
    else:  # an explicit per-module mapping: the caller decides, nothing single to check
        target = None
    if device_map is not None:
        kw["device_map"] = device_map
    source = _source(name_or_path)
    if Path(source).expanduser().is_file():
        raise _a_file("model", source)
    if Path(source).is_dir() and not (Path(source) / "config.json").is_file():
        raise ModelNotFoundError(f"cannot load model {source!r}: the folder exists but has no "
                                 "config.json. Fix: pass the folder model.save_pretrained() wrote")
    try:
        with quiet_progress(_small_local(source)):
            model = AutoModelForCausalLM.from_pretrained(source, dtype=torch_dtype, **kw)
    except OSError as exc:
        raise _not_found("model", source, exc) from exc
    except Exception as exc:
        broken = _corrupt_weights(exc, source, kw.get("cache_dir"))
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
        raise _a_file("tokenizer", source)
    try:
        return AutoTokenizer.from_pretrained(source)
    except OSError as exc:
        raise _not_found("tokenizer", source, exc) from exc
