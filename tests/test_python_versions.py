"""Neuron 2.33 runs Python 3.12-3.14; CI here has only 3.11. What can be checked on 3.11 is checked:
the source compiles with every warning an error (an invalid escape such as ``"\\d"`` is a
DeprecationWarning on 3.11 and a SyntaxWarning from 3.12), and no module, function or argument
that 3.12, 3.13 or 3.14 removed (or changed the meaning of) is used. The lists follow the
"What's New" pages of those releases; they are what an AST can see, not a 3.12 run."""
from __future__ import annotations

import ast
import json
import warnings
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SOURCES = sorted(p for folder in ("neuronkit", "tests", "bench", "notebooks", "binder")
                 for p in (ROOT / folder).rglob("*.py") if ".ipynb_checkpoints" not in p.parts)

REMOVED_MODULES = {  # 3.12: distutils, imp, asyncore, asynchat, smtpd; 3.13: PEP 594's dead batteries
    "distutils", "imp", "asyncore", "asynchat", "smtpd", "aifc", "audioop", "cgi", "cgitb",
    "chunk", "crypt", "imghdr", "mailcap", "msilib", "nis", "nntplib", "ossaudiodev", "pipes",
    "sndhdr", "spwd", "sunau", "telnetlib", "uu", "xdrlib", "lib2to3"}
REMOVED_NAMES = {  # (module, name): removed in 3.12-3.14, or deprecated there with a new meaning
    ("ast", "Num"), ("ast", "Str"), ("ast", "Bytes"), ("ast", "NameConstant"),
    ("ast", "Ellipsis"),                                        # removed in 3.14
    ("pkgutil", "find_loader"), ("pkgutil", "get_loader"),      # removed in 3.14
    ("datetime", "utcnow"), ("datetime", "utcfromtimestamp"),   # deprecated in 3.12
    ("typing", "ByteString"),                                   # removed in 3.14
    ("locale", "getdefaultlocale"),                             # deprecated, removal planned
    ("unittest", "makeSuite"), ("unittest", "findTestCases"),   # removed in 3.13
    ("importlib", "find_loader"), ("configparser", "SafeConfigParser"),  # removed in 3.12
    ("ssl", "wrap_socket"), ("asyncio", "get_child_watcher"),   # removed in 3.12 / 3.14
    ("sys", "getcheckinterval"), ("gettext", "lgettext"), ("re", "template")}


def _code(path: Path) -> str:
    return path.read_text(encoding="utf-8")


def _notebook_code() -> list[tuple[str, str]]:
    cells = []
    for nb in sorted((ROOT / "notebooks").glob("*.ipynb")):
        for i, cell in enumerate(json.loads(nb.read_text(encoding="utf-8"))["cells"]):
            if cell["cell_type"] == "code":
                source = "".join(cell["source"])
                lines = [line for line in source.splitlines()
                         if not line.lstrip().startswith(("%", "!"))]  # IPython magics
                cells.append((f"{nb.name} cell {i}", "\n".join(lines)))
    return cells


@pytest.mark.parametrize("path", SOURCES, ids=lambda p: str(p.relative_to(ROOT)))
def test_compiles_with_warnings_as_errors(path):
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        compile(_code(path), str(path), "exec", dont_inherit=True)


def test_notebook_code_compiles_with_warnings_as_errors():
    bad = []
    for where, source in _notebook_code():
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            try:
                compile(source, where, "exec", dont_inherit=True)
            except SyntaxError as exc:  # a cell with top-level await is not ours to judge
                if "await" not in str(exc):
                    bad.append(f"{where}: {exc}")
            except Warning as exc:
                bad.append(f"{where}: {exc}")
    assert bad == []


def _uses(tree: ast.AST) -> list[str]:
    found = []
    aliases: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                aliases[alias.asname or alias.name.split(".")[0]] = alias.name
                if alias.name.split(".")[0] in REMOVED_MODULES:
                    found.append(f"import {alias.name}")
        elif isinstance(node, ast.ImportFrom) and node.module:
            top = node.module.split(".")[0]
            if top in REMOVED_MODULES:
                found.append(f"from {node.module} import ...")
            found += [f"from {node.module} import {a.name}" for a in node.names
                      if (node.module, a.name) in REMOVED_NAMES]
        elif isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
            module = aliases.get(node.value.id, node.value.id)
            if (module, node.attr) in REMOVED_NAMES:
                found.append(f"{node.value.id}.{node.attr} (line {node.lineno})")
        elif isinstance(node, ast.Attribute) and node.attr in ("utcnow", "utcfromtimestamp"):
            found.append(f"datetime.{node.attr} (line {node.lineno})")
    return found


def test_nothing_that_python_312_to_314_removed_is_used():
    bad = {str(p.relative_to(ROOT)): found for p in SOURCES
           if (found := _uses(ast.parse(_code(p))))}
    bad.update({where: found for where, source in _notebook_code()
                if (found := _uses(ast.parse(source)))})
    assert bad == {}


def test_the_check_can_fail():
    tree = ast.parse("import imp\nimport ast as a\nx = a.Num\nimport datetime\n"
                     "datetime.datetime.utcnow()\nfrom pkgutil import find_loader\n")
    assert len(_uses(tree)) == 4
    with pytest.raises((Warning, SyntaxError)), warnings.catch_warnings():
        warnings.simplefilter("error")
        compile('x = "\\d"', "<test>", "exec", dont_inherit=True)
