"""Where the dashboard's exports go: a file name on the server, or a link the browser saves."""
from __future__ import annotations

import base64
import os
from pathlib import Path

from neuronkit.safe import html_attr, html_text

__all__ = ["check_target", "export_target", "download_link"]


def export_target(path: str | os.PathLike[str], suffix: str, default_name: str) -> Path:
    """Where an export named ``path`` goes: ``suffix`` added unless the name already ends with
    it (``run.2024.01`` -> ``run.2024.01.jsonl``, never ``run.2024.jsonl``); a folder (an
    existing one, or a name ending in ``/``) gets ``default_name`` + ``suffix`` inside it."""
    text = os.fspath(path)
    target = Path(text).expanduser()
    if not text.strip():
        raise ValueError(f"an export needs a file name, such as {default_name}{suffix}")
    if text.endswith(("/", os.sep)) or target.is_dir():
        return target / f"{default_name}{suffix}"
    return target if target.name.endswith(suffix) else target.with_name(target.name + suffix)


def _real(path: str | os.PathLike[str]) -> Path:
    return Path(os.path.normcase(os.path.realpath(path)))


def check_target(target: Path, replayed: str, overwrite: bool) -> None:
    """Refuse (FileExistsError) an export into the replayed log (its file or its folder), ever,
    and over any other file that exists unless ``overwrite``."""
    if replayed and (_real(target) == _real(replayed) or _real(replayed) in _real(target).parents):
        raise FileExistsError(f"{target} is the replayed log ({replayed}): saving there would "
                              "replace it, and drop the lines it could not read. Nothing was "
                              "written; choose another name in 'Export to'")
    if not overwrite and target.exists():
        raise FileExistsError(f"{target} already exists: nothing was written. Choose another name "
                              "in 'Export to', or pass overwrite=True to replace it")


def download_link(label: str, file_name: str, data: bytes, mime: str) -> str:
    """An HTML link that saves ``data`` as ``file_name`` in the browser (works on Binder and in
    Voilà, where the server's disk is not the user's)."""
    href = f"data:{mime};base64,{base64.b64encode(data).decode('ascii')}"
    return (f'<a class="nk-download" download="{html_attr(file_name)}" href="{html_attr(href)}">'
            f"{html_text(label)}</a>")
