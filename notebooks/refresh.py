"""Re-execute the tutorial notebooks in place and tidy what they store, for maintainers.

    python notebooks/refresh.py [NOTEBOOK ...]      (default: every notebooks/0*.ipynb)

Outputs are kept (nbval checks them); saved widget state, per-cell timing metadata and
progress-bar widgets are dropped. The dashboard notebook (06) keeps its widget outputs.
"""
from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent
WIDGET = "application/vnd.jupyter.widget-view+json"


def refresh(path: Path) -> None:
    nb = nbformat.read(path, as_version=4)
    NotebookClient(nb, timeout=600, kernel_name="python3",
                   resources={"metadata": {"path": str(path.parent)}}).execute()
    nb.metadata.pop("widgets", None)
    keep_widgets = "dashboard" in path.name
    for cell in nb.cells:
        cell.metadata.pop("execution", None)
        if cell.cell_type == "code" and not keep_widgets:
            cell.outputs = [o for o in cell.outputs if WIDGET not in o.get("data", {})]
    nbformat.write(nb, path)
    print(f"refreshed {path.name}")


if __name__ == "__main__":
    paths = [Path(p) for p in sys.argv[1:]] or sorted(HERE.glob("0*.ipynb"))
    for p in paths:
        refresh(p.resolve())
