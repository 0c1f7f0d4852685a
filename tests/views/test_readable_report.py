"""A report you can read: one line per event where the names allow (short function names, the
class named once above the table), only the changed / reason column wrapping, the context cut
past its row's lines, the table as wide as the terminal; `neuronkit watch` keeps the phase."""
from __future__ import annotations

import io
import re

from rich.console import Console

import neuronkit as nk
from helpers.logs import make_log
from neuronkit.apps import watch as watch_module
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog
from neuronkit.views import text as report
from neuronkit.views import text_layout
from neuronkit.views.table_cells import fit_label, name_legend, short_names

CLASS = "Qwen3MoeForConditionalGenerationWithALongName"
PLACE = "transformers/models/qwen3_moe/modeling_qwen3_moe.py:700"
LENGTHS = [137, 115, 47, 104, 114, 124, 126, 3, 107, 31, 117]  # the demo's naive prompts


def generate_events(lengths: list[int] = LENGTHS, name: str = CLASS) -> list[CompileEvent]:
    """A prefill and a decode graph per prompt length, as a generate() without buckets compiles
    them (each names the prompt length that changed and its batch)."""
    events = []
    for n, (old, new) in enumerate(zip([None, *lengths], lengths, strict=False)):
        for phase in ("prefill", "decode"):
            events.append(CompileEvent(
                function=f"{name}.forward[{phase}]", location=PLACE, started_at=1000.0 + n,
                duration_s=0.75, kind="first" if old is None else "recompile",
                changed="" if old is None else f"input_ids dim 1: {old} -> {new}",
                context=f"generate batch {n}: length {new}, cache {new + 32}",
                input_shapes={"input_ids": [1, new if phase == "prefill" else 1]}))
    return events


def table_of(text: str) -> list[str]:
    """The lines of an event table from its header on (the legend above it left out)."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "})
    return lines[rule - 1:]


def test_a_prefill_decode_pair_with_a_long_class_takes_one_line_each_at_120_columns():
    text = report.format_events(make_log(generate_events([137, 115])))
    table = table_of(text)
    assert len(table) == 2 + 4  # header, rule, one line per event
    assert max(map(len, text.splitlines())) <= 120
    assert text.count(CLASS) == 1  # named once, above the table
    assert text.splitlines()[0] == f"functions: forward = {CLASS}.forward (modeling_qwen3_moe.py:700)"
    rows = [re.split(r"\s{2,}", line.strip()) for line in table[2:]]
    assert [row[2] for row in rows] == ["forward[prefill]", "forward[decode]"] * 2
    assert rows[2][4] == "input_ids dim 1: 137 -> 115"


def test_the_naive_demo_run_takes_a_line_per_event_at_100_and_120_columns():
    events = generate_events()
    assert len(events) == 22
    for width in (100, 120):
        text = report.format_events(make_log(events), width=width)
        assert max(map(len, text.splitlines())) <= width
        assert len(table_of(text)) == 2 + 22, text
        assert len(text.splitlines()) <= 22 + 4  # and the legend (two lines at 100)


def test_only_the_reason_wraps_and_the_context_is_cut_past_its_rows_lines():
    long_reason = "a Python int changed: " + "L['self'].config.setting == 12345 " * 6
    events = [CompileEvent(function=f"{CLASS}.forward[decode]", location=PLACE,
                           kind="recompile", changed=long_reason,
                           context="request 7 · generate batch 3: length 115, cache 147 " * 4),
              CompileEvent(function=f"{CLASS}.forward[prefill]", location=PLACE, kind="first",
                           context="request 8 · generate batch 4: length 115, cache 147 " * 4)]
    table = table_of(report.format_events(make_log(events)))
    header = table[0]
    function, context = header.index("function"), header.index("context")
    reason, seconds = header.index("changed / reason"), header.index("compile s")
    first = [line for line in table[2:] if line[:3].strip() in ("", "0")]
    assert len(first) > 1  # the long reason wraps ...
    assert all(not line[function:reason].strip() for line in first[1:])  # ... the name does not
    assert all(line[context:].strip() for line in first)  # the context fills the row's lines
    assert first[-1].endswith("…") and len(table) == 2 + len(first) + 1
    assert table[-1][context:].strip().endswith("…")  # one line: cut at once
    assert table[-1][seconds:context].strip() == "0.000"


def test_a_huge_field_costs_no_more_than_a_long_one(monkeypatch):
    read: list[int] = []
    real = text_layout.terminal_safe

    def counting(value):
        read.append(len(str(value)))
        return real(value)

    monkeypatch.setattr(text_layout, "terminal_safe", counting)
    huge = "x dim 1: 1 -> 2; " * 200_000
    event = CompileEvent(function=f"{CLASS}.forward[decode]", kind="recompile", changed=huge,
                         reasons=["r" * 3_000_000], context="c " * 1_000_000)
    text = report.format_events(make_log([event]))
    assert max(read) <= 4 * text_layout.CELL_CHARS  # only the start of a field is read
    assert len(text) < 4 * text_layout.CELL_CHARS and "…" in text
    assert max(map(len, text.splitlines())) <= 120


def test_short_names_keep_names_apart_and_the_legend_names_each_class_once():
    labels = [f"{CLASS}.forward[prefill]", f"{CLASS}.forward[decode]", "LlamaModel.forward",
              "LlamaForCausalLM.forward", "Trainer.training_step", "forward (ops.py:9)",
              "forward (model.py:40)", "torch_dynamo_resume_in_forward_at_375"]
    short = short_names(labels)
    assert short[f"{CLASS}.forward[prefill]"] == "Qwen3MoeForConditionalGenerationWithALongName" \
        ".forward[prefill]"  # a plain `forward` is here too: the class stays
    assert short["LlamaModel.forward"] == "LlamaModel.forward"  # two classes' forward: whole
    assert short["Trainer.training_step"] == "training_step"
    assert short["torch_dynamo_resume_in_forward_at_375"] == "torch_dynamo_resume_in_forward_at_375"
    alone = short_names(labels[:2] + labels[4:5])
    assert alone[labels[0]] == "forward[prefill]" and alone[labels[1]] == "forward[decode]"
    legend = name_legend({(label, PLACE if "forward" in label else "/x/trainer.py:3"): label
                          for label in labels[:2] + labels[4:5]}, alone)
    assert legend == [f"forward = {CLASS}.forward (modeling_qwen3_moe.py:700)",
                      "training_step = Trainer.training_step (trainer.py:3)"]


def test_a_cut_name_keeps_its_phase():
    assert fit_label("forward[decode]", 24) == "forward[decode]"
    cut = fit_label("torch_dynamo_resume_in_forward_with_a_long_name_at_1234[decode]", 24)
    assert len(cut) == 24 and cut.endswith("…[decode]")
    assert fit_label("f" * 40 + "[" + "p" * 40 + "]", 16) == "f" * 15 + "…"  # no phase of ours


def test_hostile_names_in_the_legend_are_terminal_safe():
    events = [CompileEvent(function="Evil\x1b[2J\u202eCls.forward[prefill]", kind="first",
                           location="\x1b]8;;http://e.x\x07m.py:1")]
    text = report.format_events(make_log(events))
    assert text.startswith("functions: forward = Evil")
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e]", text)


def test_the_table_follows_a_narrower_terminal(monkeypatch):
    class Tty(io.StringIO):
        def isatty(self) -> bool:
            return True

    assert text_layout.terminal_width(io.StringIO()) == 120  # a pipe, a file: the stored width
    for columns, width in (("100", 100), ("300", 120), ("20", text_layout.NARROWEST)):
        monkeypatch.setenv("COLUMNS", columns)
        assert text_layout.terminal_width(Tty()) == width
    text = report.format_report(make_log(generate_events()), width=100)
    events = text.split("Compile events\n==============\n", 1)[1].split("\n\n", 1)[0]
    assert max(map(len, events.splitlines())) <= 100 and len(table_of(events)) == 2 + 22


def watch_text(folder, width: int) -> str:
    log = CompileLog(header={"format": FORMAT, "version": FORMAT_VERSION, "rank": 0,
                             "device": "cpu", "backend": "eager"},
                     path=folder / "node.rank0.jsonl")
    for event in generate_events([137, 115]):
        log.append(event)
    follower = nk.follow(folder)
    follower.poll()
    console = Console(record=True, width=width, file=io.StringIO())
    console.print(watch_module.render(follower, now=2000.0))
    return console.export_text()


def test_watch_keeps_prefill_and_decode_apart_at_80_columns(tmp_path):
    for width in (80, 140):
        text = watch_text(tmp_path, width)
        rows = [line for line in text.split("Latest events", 1)[1].splitlines()
                if "recompile" in line or "first" in line]
        assert len(rows) == 4
        assert ["forward[prefill]" in r for r in rows] == [True, False, True, False], text
        assert ["forward[decode]" in r for r in rows] == [False, True, False, True], text
        assert max(map(len, text.splitlines())) <= width
        assert f"functions: forward = {CLASS}.forward" in " ".join(text.split())


def test_the_recorded_changed_texts_of_the_demo_fit_one_line_each():
    """The texts a recording writes (every dim a prompt length moved, each named once) shown as
    the first dim and how many more moved; the shape guard against the other variant's graph
    (``input_ids dim 1: 1 -> 115``) is not repeated after them; a variant's first graph of a
    code that held graphs says so instead of quoting that guard."""
    prefill = CompileEvent(
        function=f"{CLASS}.forward[prefill]", location=PLACE, kind="recompile", started_at=1.0,
        changed="input_ids dim 1: 137 -> 115 (with position_ids dim 1 and attention_mask"
                "['full_attention'] dim 2); attention_mask['full_attention'] dim 3: 169 -> 147",
        reasons=["0/1: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 1, actual 115"])
    decode = CompileEvent(
        function=f"{CLASS}.forward[decode]", location=PLACE, kind="first", started_at=0.5,
        reasons=["0/0: tensor 'kwargs['input_ids']' size mismatch at index 1. expected 137, actual 1"],
        metrics={"code_graphs_before": 1})
    table = table_of(report.format_events(make_log([decode, prefill])))
    assert len(table) == 2 + 2
    assert "first of its variant; the code held 1 graph" in table[2] and "137" not in table[2]
    assert "input_ids dim 1: 137 -> 115 (+3 dims)" in table[3]
    assert table[3].count("input_ids") == 1 and "1 -> 115" not in table[3]
