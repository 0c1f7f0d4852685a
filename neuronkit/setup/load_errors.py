"""Why a model or tokenizer did not load, as errors that name the path and the fix: no such
folder or Hub name, a file where the model's folder belongs, a weights file that does not open."""
from __future__ import annotations

from pathlib import Path
from typing import Any

__all__ = ["CorruptWeightsError", "ModelNotFoundError", "check_model_folder",
           "corrupt_weights_error", "file_not_folder_error", "not_found_error"]


class ModelNotFoundError(FileNotFoundError):
    """A model or tokenizer was neither a local folder nor reachable on the Hugging Face Hub."""


class CorruptWeightsError(OSError):
    """A weights file of the model could not be read: truncated, or not a safetensors file."""


def file_not_folder_error(what: str, name: str) -> ModelNotFoundError:
    """A file was passed where the folder holding config.json (or the tokenizer) belongs."""
    local = Path(name).expanduser().resolve()
    marker = "config.json" if what == "model" else "tokenizer_config.json"
    hint = (f" ({local.parent} holds a {marker}: pass that folder)"
            if (local.parent / marker).is_file() else "")
    return ModelNotFoundError(
        f"cannot load {what} {name!r}: {local} is a file, not a folder{hint}. Fix: pass the "
        f"folder holding {marker} (the folder save_pretrained wrote), a Hub name, or None for "
        "the embedded tiny model.")


def check_model_folder(source: str) -> None:
    """Raise before loading when ``source`` is a file, or a folder without config.json."""
    if Path(source).expanduser().is_file():
        raise file_not_folder_error("model", source)
    if Path(source).is_dir() and not (Path(source) / "config.json").is_file():
        raise ModelNotFoundError(f"cannot load model {source!r}: the folder exists but has no "
                                 "config.json. Fix: pass the folder model.save_pretrained() wrote")


def not_found_error(what: str, name: str, exc: Exception) -> ModelNotFoundError:
    """``from_pretrained`` raised OSError for ``name``: say whether a local folder or the Hub
    was tried."""
    local = Path(name).expanduser()
    if local.is_file():
        return file_not_folder_error(what, name)
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


def corrupt_weights_error(exc: Exception, source: str, cache_dir: Any = None
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
