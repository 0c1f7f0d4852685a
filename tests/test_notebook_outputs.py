"""The outputs stored in the tutorial notebooks are what a reader sees on GitHub before running
anything: whole (no cell cut with "…"), free of errors, of the machine that ran them (its folders),
of the test harness (names only the test suite uses) and of raw Markdown escapes."""
from __future__ import annotations

import re

import nbformat
import pytest

from helpers.paths import ROOT

NOTEBOOKS = sorted((ROOT / "notebooks").glob("0*.ipynb"))
TEXT_TYPES = ("text/plain", "text/markdown", "text/html", "text/latex", "application/json")

FORBIDDEN = {
    "a cut cell (…)": re.compile("…"),
    "a traceback": re.compile(r"Traceback \(most recent call last\)"),
    "a machine path": re.compile(r"/work/|/root/|/home/\w|site-packages|pytest-of-"
                                 r"|/tmp/(?!neff_cache\b|local_cache\b)"),
    "a test-only name": re.compile(r"nk_slow_eager|neuron_fake|conftest|pytest"),
    "a raw Markdown escape": re.compile(r"-&gt;|\\_"),
}


def stored_texts(cell) -> list[str]:
    """Every text a code cell's stored outputs show (pictures and widget models left out)."""
    texts = []
    for out in cell.get("outputs", []):
        if out.output_type == "stream":
            texts.append(out.text)
        elif out.output_type == "error":
            texts.append("\n".join([f"{out.ename}: {out.evalue}", *out.traceback]))
        else:
            data = out.get("data", {})
            texts += [str(data[kind]) for kind in TEXT_TYPES if kind in data]
    return texts


def in_event_table_context(text: str, at: int) -> bool:
    """Whether ``at`` ends a row of an event table's ``context`` column: the one cell the table
    cuts, by design, so that each event keeps one line (the whole context is in ``--json``, the
    dashboard and ``event.context``; docs/cli.md)."""
    lines = text.splitlines(keepends=True)
    offset = 0
    header = None
    for line in lines:
        if "changed / reason" in line and line.rstrip().endswith("context"):
            header = line.rstrip().rindex("context")
        if offset <= at < offset + len(line):
            return header is not None and at - offset >= header and line.rstrip().endswith("…")
        offset += len(line)
    return False


def problems(path) -> list[str]:
    nb = nbformat.read(path, as_version=4)
    found = []
    for cell in nb.cells:
        if cell.cell_type != "code":
            continue
        if any(out.output_type == "error" for out in cell.outputs):
            found.append(f"cell {cell.get('id')}: an error output")
        for text in stored_texts(cell):
            for what, pattern in FORBIDDEN.items():
                for match in pattern.finditer(text):
                    if what == "a cut cell (…)" and in_event_table_context(text, match.start()):
                        continue
                    start = max(0, match.start() - 40)
                    excerpt = text[start:match.end() + 40].replace("\n", "\\n")
                    found.append(f"cell {cell.get('id')}: {what}: ...{excerpt}...")
    return found


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_stored_outputs_read_cleanly(path):
    found = problems(path)
    assert not found, (f"{path.name}: {len(found)} problem(s) in the stored outputs (re-run "
                       "notebooks/refresh.py after fixing the cells):\n" + "\n".join(found[:20]))


def test_only_an_event_tables_context_may_be_cut():
    table = ("#  function  changed / reason   compile s  context\n"
             "-  --------  -----------------  ---------  --------\n"
             "0  forward   x dim 1: 3 -> 7        1.000  generate…\n")
    assert in_event_table_context(table, table.rindex("…"))
    cut_reason = table.replace("x dim 1: 3 -> 7", "x dim 1: 3 -> …")
    assert not in_event_table_context(cut_reason, cut_reason.index("…"))
    assert not in_event_table_context("a summary cut…\n", 14)
