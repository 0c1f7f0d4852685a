"""What is installed here, found without importing it: a distribution's version, a module."""
from __future__ import annotations

import importlib.util
import sys
from importlib import metadata

__all__ = ["module_installed", "package_version"]


def package_version(dist: str) -> str | None:
    """Installed version of the distribution ``dist`` (e.g. ``"torch-neuronx"``), or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def module_installed(name: str) -> bool:
    """Whether ``import name`` would find a module (an entry of None in sys.modules: no)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False
