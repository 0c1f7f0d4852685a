"""The embedded tiny model: a tiny Qwen3 shipped as package data, copied once into neuronkit's
home folder and stamped, so that a changed package or recipe rebuilds it.

The model (156k parameters, 630 KB) has a byte-level BPE tokenizer and weights trained briefly on
the package's own text (by ``neuronkit/examples/train_tiny.py``), so greedy generation prints
words, without a network.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import tempfile
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # pragma: no cover
    from importlib.resources.abc import Traversable

HOME_ENV = "NEURONKIT_HOME"
TINY_NAME = "tiny-qwen3"
TINY_RECIPE = 2  # bump when the build below changes: existing builds are then rebuilt (1: random)
SHIPPED = f"data/{TINY_NAME}"  # package data written by neuronkit/examples/train_tiny.py
STAMP_FILE = "neuronkit-build.json"
PAD, EOS = "<|pad|>", "<|endoftext|>"

__all__ = ["EOS", "HOME_ENV", "PAD", "SHIPPED", "STAMP_FILE", "TINY_NAME", "TINY_RECIPE",
           "neuronkit_home", "tiny_model"]


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
    for f in _shipped_files():
        (folder / f.name).write_bytes(f.read_bytes())
    (folder / STAMP_FILE).write_text(json.dumps(_stamp(), indent=2) + "\n")


def _build(root: Path, target: Path) -> None:
    """Build ``target`` in a temporary folder beside it under a file lock, then rename it."""
    from filelock import FileLock

    root.mkdir(parents=True, exist_ok=True)
    with FileLock(str(root / f"{TINY_NAME}.lock")):
        if _is_built(target):  # another process finished it while we waited
            return
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


def tiny_model(home: str | os.PathLike | None = None) -> Path:
    """Folder of the embedded tiny Qwen3 + tokenizer; copied once from the package, then reused.

    It lives in ``<home>/tiny-qwen3`` (home: argument, ``$NEURONKIT_HOME``, or the user cache
    folder). Concurrent first calls are safe: it is built in a temporary folder beside the
    target under a file lock, then renamed into place. A home that cannot hold it (a file,
    a read-only folder) is a ``ValueError`` that says so.
    """
    root = neuronkit_home(home)
    target = root / TINY_NAME
    if _is_built(target):
        return target
    if not any(f.name == "model.safetensors" for f in _shipped_files()):
        raise FileNotFoundError(f"the tiny model's weights are missing from the package "
                                f"({_shipped()}); reinstall neuronkit")
    try:
        _build(root, target)
    except OSError as exc:
        why = "it is a file" if root.is_file() else exc.strerror or str(exc)
        raise ValueError(f"cannot write the tiny model into {root} ({why}): neuronkit's home "
                         f"must be a folder you can write; pass home= or set ${HOME_ENV} to one "
                         f"(${HOME_ENV} is {os.environ.get(HOME_ENV) or 'not set'})") from exc
    return target
