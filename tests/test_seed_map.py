"""docs/seed-map.md, "the source page, line by line" (linked from README): every code line of the
Trainium page has a notebook cell that runs it. Each row's *runs as* code must be in a code cell
of the notebook it names, and the rows must cover every code line of the page's examples."""
from __future__ import annotations

import re

import nbformat
import pytest

from helpers.paths import ROOT

SEED_MAP = (ROOT / "docs" / "seed-map.md").read_text()
# the page's code, line by line (its Python blocks and its shell command)
PAGE_LINES = [
    "import torch",
    "print(torch.neuron.is_available(), torch.neuron.device_count())",
    "from transformers import AutoModelForCausalLM, AutoTokenizer",
    'tokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen3-0.6B")',
    'model = AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-0.6B", dtype="bfloat16", '
    'device_map="neuron")',
    'inputs = tokenizer("The French Bread Law states", return_tensors="pt")',
    "output = model.generate(**inputs, do_sample=False, max_new_tokens=50, "
    'cache_implementation="static")',
    "print(tokenizer.decode(output[0], skip_special_tokens=True))",
    "from transformers import TrainingArguments",
    'TrainingArguments(output_dir="./outputs", bf16=True)',
    'TrainingArguments(output_dir="./outputs", bf16=True, torch_compile=True)',
    "from transformers import AutoModelForCausalLM, DistributedConfig",
    'AutoModelForCausalLM.from_pretrained("Qwen/Qwen3-1.7B", dtype=torch.bfloat16, '
    "distributed_config=DistributedConfig(tp_size=2, fsdp_size=2))",
    "torchrun --nproc_per_node=4 train.py",
]


def rows() -> list[tuple[str, str, str]]:
    """(the page's code, notebook number, runs as) for each row of the table."""
    table = SEED_MAP.split("<!-- seed-map -->", 1)[1].split("<!-- /seed-map -->", 1)[0]
    out = []
    for line in table.strip().splitlines()[2:]:
        cells = [c.strip() for c in line.strip().strip("|").split(" | ")]
        out.append((cells[0], cells[1], cells[2]))
    return out


def spans(markdown: str) -> list[str]:
    return re.findall(r"`([^`]+)`", markdown)


def flat(code: str) -> str:
    return " ".join(code.split()).replace("( ", "(").replace(" )", ")")


def test_every_code_line_of_the_page_has_a_row():
    covered = {flat(span) for page, _, _ in rows() for span in spans(page)}
    missing = [line for line in PAGE_LINES
               if not any(flat(line) in span or span in flat(line) and len(span) > 20
                          for span in covered) and flat(line) not in covered]
    assert not missing, f"page lines without a notebook cell in docs/seed-map.md: {missing}"


@pytest.mark.parametrize("page, notebook, runs_as", rows(), ids=lambda v: v[:40])
def test_each_row_runs_in_its_notebook(page, notebook, runs_as):
    [path] = sorted((ROOT / "notebooks").glob(f"{notebook}_*.ipynb"))
    code = "\n".join(flat(c.source) for c in nbformat.read(path, as_version=4).cells
                     if c.cell_type == "code")
    for span in spans(runs_as):
        assert flat(span) in code, f"{path.name} has no code cell with {span!r}"
