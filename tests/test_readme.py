"""README.md is a landing page: short, its first screen holding the picture, the quickstart and the
report command, its demo and test commands where .ci/run reads them; the rest lives in docs/, and
every relative link of README.md and docs/*.md leads to a file (and heading) that exists."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.paths import ROOT

README = ROOT / "README.md"
DOCS = ROOT / "docs"
PAGES = [README, *sorted(DOCS.glob("*.md"))]
GENERATED = {DOCS / "families.md"}  # written by bench/families.py
MAX_LINES, FIRST_SCREEN = 200, 45
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")


def _prose(text: str) -> str:
    """The text without fenced code blocks and inline code (no links there)."""
    text = re.sub(r"^```.*?^```", "", text, flags=re.S | re.M)
    return re.sub(r"`[^`\n]*`", "", text)


def _slug(heading: str) -> str:
    """GitHub's anchor for a heading: lower case, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower().replace("`", ""))
    return text.replace(" ", "-")


def _anchors(path: Path) -> set[str]:
    text = re.sub(r"^```.*?^```", "", path.read_text(), flags=re.S | re.M)
    return {_slug(m) for m in re.findall(r"^#{1,6}\s+(.+?)\s*#*$", text, flags=re.M)}


def _links(page: Path) -> list[str]:
    return LINK.findall(_prose(page.read_text()))


def test_readme_is_under_200_lines():
    lines = README.read_text().splitlines()
    assert len(lines) < MAX_LINES, f"README.md has {len(lines)} lines; move detail to docs/"


def test_first_screen_has_the_picture_the_quickstart_and_the_report():
    first = "\n".join(README.read_text().splitlines()[:FIRST_SCREEN])
    assert re.search(r"!\[[^\]]+\]\(docs/dashboard\.png\)", first), "the picture, with its alt text"
    assert "import neuronkit as nk" in first
    assert re.search(r"with nk\.CompileRecorder\(\"[^\"]+\.jsonl\"\):", first)
    assert re.search(r"neuronkit report \S+\.jsonl", first)
    assert "TORCH_TRACE=" in first, "the no-install path"


def test_the_quickstart_matches_the_recorder_signature():
    """``CompileRecorder("log.jsonl")``: the first positional parameter is the log path."""
    import inspect

    from neuronkit.recorder.recorder import CompileRecorder

    first = next(iter(list(inspect.signature(CompileRecorder).parameters.values())))
    assert first.name == "log_path" and first.kind is inspect.Parameter.POSITIONAL_OR_KEYWORD


@pytest.mark.parametrize("marker", ["<!-- demo-command -->", "<!-- test-command -->"])
def test_command_markers_are_followed_by_a_bash_block(marker):
    """.ci/run reads the line after the marker's next line (awk: getline; getline)."""
    lines = README.read_text().splitlines()
    assert lines.count(marker) == 1, marker
    at = lines.index(marker)
    assert lines[at + 1] == "```bash", f"{marker} must be followed by ```bash on the next line"
    command = lines[at + 2]
    assert command.startswith("python3 -m venv .venv && ") and "constraints.txt" in command
    assert lines[at + 3] == "```", "one command line in the block"


def test_the_ci_runner_reads_the_test_command():
    ci = (ROOT / ".ci" / "run").read_text()
    assert "awk '/<!-- test-command -->/{getline; getline; print; exit}' README.md" in ci
    lines = README.read_text().splitlines()
    command = lines[lines.index("<!-- test-command -->") + 2]
    assert ".venv/bin/python -m pytest" in command and '-e ".[test]"' in command


@pytest.mark.parametrize("page", PAGES, ids=lambda p: p.relative_to(ROOT).as_posix())
def test_every_relative_link_leads_somewhere(page):
    broken = []
    for target in _links(page):
        if re.match(r"[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        path_part, _, anchor = target.partition("#")
        where = (page.parent / path_part).resolve() if path_part else page
        if not where.exists():
            broken.append(f"{target}: no {path_part}")
        elif anchor and where.suffix == ".md" and anchor not in _anchors(where):
            broken.append(f"{target}: no heading #{anchor} in {where.name}")
    assert not broken, f"{page.name}: {broken}"


@pytest.mark.parametrize("page", sorted(set(DOCS.glob("*.md")) - GENERATED),
                         ids=lambda p: p.name)
def test_each_docs_page_has_a_title_and_a_way_back(page):
    lines = page.read_text().splitlines()
    assert lines[0].startswith("# "), f"{page.name}: a one-line title first"
    assert any("](../README.md" in line for line in lines[1:4]), f"{page.name}: no link back"


def test_readme_links_every_docs_page():
    linked = {(README.parent / t.partition("#")[0]).resolve() for t in _links(README)}
    missing = [p.name for p in DOCS.glob("*.md") if p.resolve() not in linked]
    assert not missing, f"docs pages README.md does not link: {missing}"


def test_readme_says_how_a_stock_pip_gets_the_pinned_cpu_torch():
    pinned = next(line.split("==")[1].split()[0] for line in
                  (ROOT / "constraints.txt").read_text().splitlines() if line.startswith("torch=="))
    text = " ".join(README.read_text().split())
    assert (f"pip install torch=={pinned} --index-url https://download.pytorch.org/whl/cpu"
            in text)
