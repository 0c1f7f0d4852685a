"""The public surface and the imports: the facade agrees with its type-checking block, every module
names its public names in ``__all__``, no module imports another's private names, and the
package's imports, every one of them counted, form no circle."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import neuronkit as nk
from helpers import import_graph

PACKAGE = Path(nk.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def test_facade_matches_its_type_checking_block():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {a.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             and node.level for a in node.names}  # the package's own names (typing's Any aside)
    exports = {name: module for name, module in nk._EXPORTS.items()}
    assert typed == exports
    for name, module in exports.items():
        value = getattr(nk, name)
        mod = importlib.import_module(f"neuronkit.{module}")
        assert value is getattr(mod, name) and name in mod.__all__, name


def test_every_module_declares_its_public_names():
    for path in MODULES:
        mod = importlib.import_module(module_name(path))
        if path.name == "__init__.py" and path.parent != PACKAGE:
            continue  # sub-package docstrings; their modules declare
        assert hasattr(mod, "__all__"), f"{module_name(path)} has no __all__"
        missing = [n for n in mod.__all__ if not hasattr(mod, n)]
        assert not missing, f"{module_name(path)}.__all__ names missing {missing}"


def test_no_private_name_crosses_a_module():
    """Counting every import (in functions and under TYPE_CHECKING too)."""
    for imp in import_graph.imports(PACKAGE):
        private = [n for n in imp.names if n.startswith("_") and n != "__version__"]
        assert not private, f"{imp.source}:{imp.line} imports {private} from {imp.target}"


def test_no_import_circle_counting_every_import():
    """An ast count of every import statement (module level, inside functions, under
    TYPE_CHECKING) finds no circle; the package facade (``neuronkit/__init__``) is left out: it
    names every public module for type checkers and nothing imports it."""
    edges = import_graph.graph(PACKAGE)
    assert not [m for m, targets in edges.items() if "neuronkit" in targets], "a module imports the facade"
    assert import_graph.circles(edges) == []


def test_the_circle_check_can_fail(tmp_path):
    (tmp_path / "pkg").mkdir()
    (tmp_path / "pkg" / "__init__.py").write_text("")
    (tmp_path / "pkg" / "a.py").write_text("def f():\n    from pkg import b\n")
    (tmp_path / "pkg" / "b.py").write_text("from typing import TYPE_CHECKING\n"
                                            "if TYPE_CHECKING:\n    from pkg.a import f\n")
    assert import_graph.circles(import_graph.graph(tmp_path / "pkg")) == [["pkg.a", "pkg.b"]]


def test_the_events_layer_imports_nothing_else_of_neuronkit():
    edges = import_graph.graph(PACKAGE)
    for module in (m for m in edges if m.startswith("neuronkit.events")):
        assert {t for t in edges[module] if not t.startswith("neuronkit.events")} == set(), module


def test_the_package_ships_its_types():
    assert (PACKAGE / "py.typed").is_file()


def test_only_apps_import_the_examples():
    """The examples sit outside the library core: of the layers, only apps may import them (the
    layers contract in pyproject.toml, run by lint-imports, orders all the others)."""
    for imp in import_graph.imports(PACKAGE):
        if imp.target.startswith("neuronkit.examples"):
            assert imp.source.startswith(("neuronkit.apps", "neuronkit.examples")), imp


def test_the_agreed_public_paths_still_import():
    from neuronkit.apps.dashboard.widget import RecompileDashboard as Real
    from neuronkit.widget import RecompileDashboard

    assert RecompileDashboard is Real


def test_no_public_name_is_shadowed_by_its_module():
    """Importing every module first (as a user's ``from neuronkit.x import y`` does) leaves each
    facade name the function or class, never a submodule of the same name."""
    import subprocess
    import sys

    modules = sorted(set(nk._EXPORTS.values()))
    code = ("import importlib, types\n"
            f"for m in {modules!r}: importlib.import_module('neuronkit.' + m)\n"
            "import neuronkit as nk\n"
            "bad = [n for n in nk._EXPORTS if isinstance(getattr(nk, n), types.ModuleType)]\n"
            "assert not bad, f'module shadows the public name: {bad}'\n")
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-2000:]


def test_compile_config_and_max_neff_builds_are_public():
    """``nk.compile_config(backend=None, *, dynamic=False)`` and ``max_neff_builds`` of budgets."""
    import inspect

    params = inspect.signature(nk.compile_config).parameters
    assert "compile_config" in nk.__all__ and list(params) == ["backend", "dynamic"]
    assert params["backend"].default is None and params["dynamic"].default is False
    assert params["dynamic"].kind is inspect.Parameter.KEYWORD_ONLY
    budget = inspect.signature(nk.compile_budget).parameters["max_neff_builds"]
    assert budget.default is None and budget.kind is inspect.Parameter.KEYWORD_ONLY
