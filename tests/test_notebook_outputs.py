"""The outputs stored in the tutorial notebooks are what a reader sees on GitHub before running
anything: whole (no cell cut with "…"), free of errors, of the machine that ran them (its folders),
of the test harness (names only the test suite uses) and of raw Markdown escapes. And nbval's
sanitizer (notebooks/sanitize.cfg) masks what varies between runs and between the releases
pyproject allows, and nothing the notebooks check."""
from __future__ import annotations

import re

import nbformat
import pytest
from nbval.plugin import get_sanitize_patterns

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


def in_watch_frame(text: str) -> bool:
    """Whether ``text`` is a frame of ``neuronkit watch``: a terminal view that fits its width by
    cutting long names and reasons with "…", by design (the report holds them whole; docs/cli.md)."""
    return text.startswith("neuronkit watch ")


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
                    if what == "a cut cell (…)" and (in_event_table_context(text, match.start())
                                                      or in_watch_frame(text)):
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


def test_only_a_watch_frame_may_cut_any_cell():
    frame = "neuronkit watch logs\n2 log(s), 2 open\n| 2.7 s | 0 | forward | graph break | Attempted… |\n"
    assert in_watch_frame(frame)
    assert not in_watch_frame("a summary\n" + frame)


# ---- nbval's sanitizer --------------------------------------------------------------------------

def sanitized(text: str) -> str:
    """``text`` as nbval compares it: sanitize.cfg's pairs, read by nbval's own parser, in order."""
    config = (ROOT / "notebooks" / "sanitize.cfg").read_text(encoding="utf-8")
    for regex, replace in dict(get_sanitize_patterns(config)).items():
        text = re.sub(regex, replace, text)
    return text


# What notebook 05 printed with transformers 5.24.0 / accelerate 1.15.0 (constraints.txt) and with
# 5.25.0 / 1.16.0 (the newest pyproject allowed): the same run, in each release's words.
RELEASE_PAIRS = [
    ("  forward_with_checkpointing: a variable captured by self.self_attn.k_norm.forward: key "
     "'weight' added",
     "  forward_with_checkpointing: a variable captured by [0]]: key 'weight' added"),
    ("forward (operations.py:942)                 2       1",
     "forward (operations.py:951)                 2       1"),
    ("torch_dynamo_resume_in_forward_at_375       0       0",
     "torch_dynamo_resume_in_forward_at_381       0       0"),
]


@pytest.mark.parametrize("pinned, newest", RELEASE_PAIRS)
def test_the_sanitizer_masks_what_moves_between_releases(pinned, newest):
    assert sanitized(pinned) == sanitized(newest)


REPORT_TAIL = ("""\
total                                      36                   0       0    20.206                  27.4%
2 ranks: counts and seconds add up all ranks; the share of wall is that of the rank that compiled """
               """longest (rank 1:
  10.302 s)

Advice
======
1. [warning] graph breaks: 4 functions ran eagerly, 7 graphs split at a break on each of 2 ranks
     Dynamo met code it cannot trace. What broke: FSDP's hooks (marked torch.compiler.disable) at
     modeling_qwen3.py:375.
2. [info] compile time is 27% of the run (rank 1, the busiest of 2 ranks: 10.3 s of 37.6 s): first compiles
     Rank 1 compiled longest: 10.3 s Dynamo compile; all 2 ranks together: 20.2 s (ranks compile side
     by side, so the share is the busiest rank's). More than 20% of the wall time went into compiling,
     but every compile was a function's first graph.
""")


def test_the_sanitizer_masks_where_a_report_wraps_and_the_busiest_ranks_share():
    """The same report of another run: rank 0 compiled longest, for 19% of the wall time (an info
    without the first-compiles note), and the wrapped lines break elsewhere."""
    other = (REPORT_TAIL
             .replace("(rank 1:\n  10.302 s)", "(rank 0: 8.457\n  s)")
             .replace("What broke: FSDP's hooks (marked torch.compiler.disable) at\n     ",
                      "What broke: FSDP's hooks (marked\n     torch.compiler.disable) at ")
             .split("2. [info]")[0]
             + "2. [info] compile time is 19% of the run (rank 0, the busiest of 2 ranks: 8.5 s of "
               "44.6 s)\n     Rank 0 compiled longest: 8.5 s Dynamo compile; all 2 ranks together: "
               "16.9 s (ranks\n     compile side by side, so the share is the busiest rank's).\n")
    assert sanitized(other) == sanitized(REPORT_TAIL)


@pytest.mark.parametrize("changed", [
    ("36    ", "38    "),                                   # a count of graphs
    ("4 functions ran eagerly", "5 functions ran eagerly"),  # a finding's numbers
    ("1. [warning] graph breaks", "1. [info] graph breaks"),   # a severity other than the share's
    ("Advice\n", "Findings\n"),                              # a heading
    ("modeling_qwen3.py:375", "modeling_llama.py:375"),      # which file broke the graph
    ("on each of 2 ranks", "on each of 4 ranks"),           # how many ranks
    ("the busiest of 2 ranks", "the busiest of 4 ranks"),   # also in the share's finding
])
def test_the_sanitizer_keeps_what_the_notebooks_check(changed):
    old, new = changed
    assert old in REPORT_TAIL
    assert sanitized(REPORT_TAIL.replace(old, new, 1)) != sanitized(REPORT_TAIL)


def test_the_sanitizer_keeps_what_a_guard_says_changed():
    said = "  f: a variable captured by self.self_attn.k_norm.forward: key 'weight' added"
    assert sanitized(said) != sanitized(said.replace("'weight'", "'bias'"))
    assert sanitized(said) != sanitized(said.replace("added", "removed"))
