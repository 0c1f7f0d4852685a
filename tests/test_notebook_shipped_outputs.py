"""The outputs notebooks print from the data shipped beside them (``notebooks/data/``) are what
that data gives today, number for number. nbval's sanitizer masks decimals and percentages (they
vary from run to run for a live model), so it cannot catch a stored summary of a sample log that
drifted from the log: this test re-runs the cells tagged ``shipped-data`` (markers as data, as
nbval's own) in notebook order, in one namespace per notebook (after the imports of the cells above them),
in ``notebooks/``, and compares
their printed text with the stored text exactly."""
from __future__ import annotations

import ast
import contextlib
import io

import nbformat
import pytest

from helpers.paths import ROOT

TAG = "shipped-data"
NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))


def tagged(path) -> list:
    nb = nbformat.read(path, as_version=4)
    return [c for c in nb.cells if c.cell_type == "code" and TAG in c.metadata.get("tags", [])]


def imports_before(path, cell) -> str:
    """The import statements of the code cells above ``cell`` (what its names come from)."""
    nb = nbformat.read(path, as_version=4)
    found = []
    for c in nb.cells:
        if c.get("id") == cell.get("id"):
            break
        if c.cell_type != "code" or c.source.lstrip().startswith("%%"):
            continue
        python = "\n".join(ln for ln in c.source.splitlines() if not ln.lstrip().startswith("%"))
        tree = ast.parse(python)
        found += [ast.unparse(n) for n in tree.body if isinstance(n, (ast.Import, ast.ImportFrom))]
    return "\n".join(found)


def stored_stdout(cell) -> str:
    return "".join(o.text for o in cell.outputs
                   if o.output_type == "stream" and o.name == "stdout")


def test_the_shipped_sample_cells_are_tagged():
    """The cells the issue named: notebook 01's summary of the Neuron sample, notebook 06's
    summary and advice (the compile share) of the replayed sample."""
    sources = {p.name[:2]: "\n".join(c.source for c in tagged(p)) for p in NOTEBOOKS}
    assert "format_summary(sample)" in sources["01"]
    assert "format_summary(replay.log)" in sources["06"]
    assert "nk.diagnose(replay.log)" in sources["06"]


@pytest.mark.parametrize("path", [p for p in NOTEBOOKS if tagged(p)], ids=lambda p: p.name[:2])
def test_stored_outputs_are_what_the_shipped_data_give(path, monkeypatch):
    monkeypatch.chdir(path.parent)
    namespace: dict = {"__name__": "__main__"}
    cells = tagged(path)
    exec(imports_before(path, cells[0]), namespace)
    for cell in cells:
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            exec(compile(cell.source, f"{path.name}:{cell.get('id')}", "exec"), namespace)
        if "nbval-ignore-output" in cell.metadata.get("tags", []):
            continue
        assert out.getvalue() == stored_stdout(cell), (
            f"{path.name} cell {cell.get('id')}: the stored output is not what the shipped data "
            f"give today; re-run python notebooks/refresh.py {path.name}")
