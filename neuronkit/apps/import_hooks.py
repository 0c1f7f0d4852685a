"""Calling back once a module's first import completes: a finder first on ``sys.meta_path``
wraps the module's loader. Standard library only: the recording hook runs at interpreter start."""
from __future__ import annotations

import sys
from types import ModuleType

TYPE_CHECKING = False  # typing costs ms at every interpreter start: imported for checkers only
if TYPE_CHECKING:
    from collections.abc import Callable
    from importlib.machinery import ModuleSpec
    from typing import Any

__all__ = ["after_import"]


class _Loader:  # a loader by its methods: importlib.abc costs ~7 ms to import
    """Runs the real loader, then the callbacks waiting for the module (taken only when the
    module is executed: ``importlib.util.find_spec`` alone, as ``is_torch_available`` calls it,
    must not use them up)."""

    def __init__(self, loader: Any, name: str, finder: _AfterImport) -> None:
        self.loader, self.name, self.finder = loader, name, finder

    def create_module(self, spec: ModuleSpec) -> ModuleType | None:
        return self.loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        module.__loader__ = self.loader  # the module sees its real loader
        if module.__spec__ is not None:
            module.__spec__.loader = self.loader
        self.loader.exec_module(module)
        for callback in self.finder.waiting.pop(self.name, []):
            _run(callback, module)

    def __getattr__(self, name: str) -> Any:  # get_resource_reader, is_package, ...
        return getattr(self.loader, name)


class _AfterImport:  # a meta path finder by its find_spec method
    """Calls ``callback(module)`` right after a module's first import completes."""

    def __init__(self) -> None:
        self.waiting: dict[str, list[Callable[[ModuleType], None]]] = {}
        self._finding: set[str] = set()

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> Any:
        if name not in self.waiting or name in self._finding:
            return None
        self._finding.add(name)
        try:  # the finders after this one
            spec = next((s for f in sys.meta_path if f is not self and hasattr(f, "find_spec")
                         for s in [f.find_spec(name, path, target)] if s is not None), None)
        finally:
            self._finding.discard(name)
        if spec is None or spec.loader is None:
            return spec
        spec.loader = _Loader(spec.loader, name, self)  # type: ignore[assignment]
        return spec


_AFTER = _AfterImport()


def _run(callback: Callable[[ModuleType], None], module: ModuleType) -> None:
    try:
        callback(module)
    except Exception as exc:  # the user's program goes on, unrecorded
        print(f"neuronkit record: {callback.__name__} failed ({exc!r}); the program runs on "
              "without it", file=sys.stderr)


def after_import(name: str, callback: Callable[[ModuleType], None]) -> None:
    """``callback(module)`` once ``name`` is imported (now, if it already is)."""
    module = sys.modules.get(name)
    if module is not None:
        _run(callback, module)
        return
    _AFTER.waiting.setdefault(name, []).append(callback)
    if _AFTER not in sys.meta_path:
        sys.meta_path.insert(0, _AFTER)
