"""The package's layout tells its story: folders by layer, imports one way (import-linter's layers
contract, counting imports in functions and under TYPE_CHECKING), few flat modules, no module or
function too long to read, and docs/layout.md naming every folder and module as they are."""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import neuronkit as nk

PACKAGE = Path(nk.__file__).parent
ROOT = PACKAGE.parent
FOLDERS = sorted(p.parent for p in PACKAGE.glob("*/__init__.py"))
MAX_FLAT, MAX_MODULE_LINES, MAX_FUNCTION_LINES = 8, 400, 100


def test_at_most_eight_flat_modules():
    flat = sorted(p.name for p in PACKAGE.glob("*.py"))
    assert len(flat) <= MAX_FLAT, flat


def test_no_module_over_400_lines():
    long = {str(p.relative_to(ROOT)): n for p in PACKAGE.rglob("*.py")
            if (n := len(p.read_text().splitlines())) > MAX_MODULE_LINES}
    assert long == {}


def test_no_function_over_100_lines():
    long = {}
    for path in PACKAGE.rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                lines = node.end_lineno - node.lineno + 1
                if lines > MAX_FUNCTION_LINES:
                    long[f"{path.relative_to(ROOT)}:{node.lineno} {node.name}"] = lines
    assert long == {}


def test_each_folder_says_what_lives_there_and_holds_no_code():
    for folder in FOLDERS:
        tree = ast.parse((folder / "__init__.py").read_text())
        doc = ast.get_docstring(tree)
        assert doc and "TODO" not in doc, f"{folder.name}/__init__.py says nothing"
        assert len(tree.body) == 1, f"{folder.name}/__init__.py holds code besides its docstring"


def test_layers_contract_is_kept_and_counts_every_import():
    """lint-imports (import-linter) checks the layers contract of pyproject.toml; its settings
    leave no import out."""
    pyproject = (ROOT / "pyproject.toml").read_text()
    assert "exclude_type_checking_imports = false" in pyproject
    assert "ignore_imports" not in pyproject
    layers = re.search(r'type = "layers"\s*layers = \[(.*?)\]', pyproject, re.S)
    assert layers is not None
    named = re.findall(r'"neuronkit\.(\w+)"', layers.group(1))
    # every folder has its place, and the one flat module below them all
    assert sorted(named) == sorted([*(f.name for f in FOLDERS), "safe"])
    done = subprocess.run([str(Path(sys.executable).with_name("lint-imports"))], cwd=ROOT,
                          capture_output=True, text=True)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]


def layout_bullets() -> dict[str, str]:
    """docs/layout.md (linked from README): each bullet's first word (``setup/``,
    ``apps/dashboard/``, ``top level``) -> the bullet's text."""
    text = (ROOT / "docs" / "layout.md").read_text()
    block = text.split("<!-- layout -->", 1)[1].split("<!-- /layout -->", 1)[0]
    bullets = {}
    for item in re.split(r"\n- ", "\n" + block.strip()):
        if item.strip():
            head, _, body = item.partition(" — ")
            bullets[head.strip().strip("`")] = body
    return bullets


def test_docs_layout_names_every_folder_and_module_as_they_are():
    bullets = layout_bullets()
    folders = {f"{f.relative_to(PACKAGE).as_posix()}/": f for f in PACKAGE.rglob("__init__.py")
               for f in [f.parent] if f != PACKAGE}
    assert set(bullets) == {"top level", *folders}
    for head, body in bullets.items():
        where = PACKAGE if head == "top level" else folders[head]
        named = set(re.findall(r"`([\w]+\.py)`", body))
        present = {p.name for p in where.glob("*.py")} - ({"__init__.py"} if where != PACKAGE else set())
        assert named == present, f"docs/layout.md {head}: missing {present - named}, stale {named - present}"
