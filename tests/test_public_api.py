"""The public surface and the layering: the facade agrees with its type-checking block, every
module names its public names in ``__all__``, no module imports another's private names, and the
package's module-level imports form no circle (the data layer imports nothing above it)."""
from __future__ import annotations

import ast
import importlib
from pathlib import Path

import neuronkit as nk

PACKAGE = Path(nk.__file__).parent
MODULES = sorted(p for p in PACKAGE.rglob("*.py") if p.name != "__main__.py")


def module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def top_level_imports(path: Path) -> list[tuple[str, list[str]]]:
    """(absolute module, names) of the module-level ``from . import`` statements, outside
    ``if TYPE_CHECKING:`` (function-level imports are deferred and allowed)."""
    tree = ast.parse(path.read_text())
    package = module_name(path) if path.name == "__init__.py" else module_name(path).rpartition(".")[0]
    out = []
    for node in tree.body:
        if isinstance(node, ast.ImportFrom) and node.level:
            base = package.split(".")
            base = base[:len(base) - node.level + 1]
            target = ".".join(base + ([node.module] if node.module else []))
            out.append((target, [a.name for a in node.names]))
    return out


def test_facade_matches_its_type_checking_block():
    tree = ast.parse((PACKAGE / "__init__.py").read_text())
    block = next(n for n in tree.body if isinstance(n, ast.If)
                 and getattr(n.test, "id", "") == "TYPE_CHECKING")
    typed = {a.name: node.module for node in block.body if isinstance(node, ast.ImportFrom)
             for a in node.names}
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
    for path in MODULES:
        for target, names in top_level_imports(path):
            private = [n for n in names if n.startswith("_") and n != "__version__"]
            assert not private, f"{module_name(path)} imports {private} from {target}"


def test_no_import_circle_and_the_data_layer_imports_nothing_above_it():
    graph = {module_name(p): {t for t, _ in top_level_imports(p)} for p in MODULES}
    assert graph["neuronkit.events.event"] == set()

    def visit(node: str, stack: list[str]) -> None:
        assert node not in stack, "import circle: " + " -> ".join(stack + [node])
        for nxt in graph.get(node, ()):
            if nxt in graph and nxt != "neuronkit":
                visit(nxt, stack + [node])

    for name in graph:
        if name != "neuronkit":
            visit(name, [])


def test_the_package_ships_its_types():
    assert (PACKAGE / "py.typed").is_file()


def test_views_and_examples_sit_on_top():
    """Only views, examples and the public widget alias import views; nothing in the core imports
    the examples (views may: the dashboard's sweep text lives there)."""
    for path in MODULES:
        name = module_name(path)
        on_top = name.startswith(("neuronkit.views", "neuronkit.examples")) or name == "neuronkit.widget"
        for target, _ in top_level_imports(path):
            if not on_top:
                assert not target.startswith(("neuronkit.views", "neuronkit.examples")), (name, target)


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
