"""The package's import graph read from its source with ``ast``: every ``import`` statement,
at module level, inside functions and under ``if TYPE_CHECKING:`` alike.

    python tests/helpers/import_graph.py neuronkit     # modules, arrows, circles, rooms
"""
from __future__ import annotations

import ast
import sys
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Import:
    """One import of a package module by another: where, and the names it takes."""

    source: str
    target: str
    line: int
    names: tuple[str, ...]


def modules(package: Path) -> dict[str, Path]:
    """Dotted module name -> file, for every ``.py`` file under ``package``."""
    out = {}
    for path in sorted(package.rglob("*.py")):
        parts = list(path.relative_to(package.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _absolute(node: ast.ImportFrom, module: str, is_package: bool) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".") if is_package else module.split(".")[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


def imports(package: Path) -> list[Import]:
    """Every import of one module of ``package`` by another (``from a import b`` of a submodule
    ``a.b`` counts as an import of ``a.b``)."""
    known = modules(package)
    found = []
    for name, path in known.items():
        tree = ast.parse(path.read_text(), str(path))
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                targets = [(a.name, ()) for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                base = _absolute(node, name, path.name == "__init__.py")
                targets = [(f"{base}.{a.name}", ()) if f"{base}.{a.name}" in known
                           else (base, (a.name,)) for a in node.names]
            else:
                continue
            for target, names in targets:
                while target and target not in known:
                    target = target.rpartition(".")[0]
                if target and target != name:
                    found.append(Import(name, target, node.lineno, names))
    return found


def graph(package: Path) -> dict[str, set[str]]:
    """Module -> the modules it imports."""
    out: dict[str, set[str]] = {name: set() for name in modules(package)}
    for imp in imports(package):
        out[imp.source].add(imp.target)
    return out


def circles(edges: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected groups of more than one module (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in edges.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                found.append(sorted(group))

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(edges):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    """A module's folder under the package (``neuronkit.log.reader`` -> ``log``), or the module
    itself for a flat one."""
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else parts[0]


if __name__ == "__main__":
    root = Path(sys.argv[1] if len(sys.argv) > 1 else "neuronkit")
    edges = graph(root)
    rooms = {(room(a), room(b)) for a, targets in edges.items() for b in targets if room(a) != room(b)}
    print(f"{len(edges)} modules, {sum(map(len, edges.values()))} import arrows, "
          f"{len({room(m) for m in edges})} rooms with {len(rooms)} arrows between them")
    for group in circles(edges):
        print("circle:", " -> ".join(group))
