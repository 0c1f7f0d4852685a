"""The traffic reader of ``neuronkit buckets``: JSONL, CSV, compile logs, and hostile files."""
from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.workloads.traffic import MAX_TOKENS, SHOWN_BAD, read_traffic


def _jsonl(tmp_path: Path, lines: list[str | bytes], name: str = "t.jsonl") -> Path:
    path = tmp_path / name
    path.write_bytes(b"\n".join(x if isinstance(x, bytes) else x.encode() for x in lines) + b"\n")
    return path


def test_jsonl_pairs_and_header(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, ['{"header": "synthetic", "synthetic": true}',
                             '{"prompt_tokens": 12, "output_tokens": 3, "synthetic": true}',
                             "", '{"prompt_tokens": 40}'])
    t = read_traffic(path)
    assert (t.prompt, t.output, t.total, t.bad) == ([12, 40], [3, 0], [15, 40], 0)


def test_prompt_text_needs_a_tokenizer(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, ['{"prompt": "a b c", "output": "d e"}', '{"prompt_tokens": 5}'])
    t = read_traffic(path)
    assert t.prompt == [5] and t.bad == 1 and "--tokenizer" in t.bad_lines[0]
    words = read_traffic(path, tokenize=lambda s: len(s.split()))
    assert words.prompt == [3, 5] and words.output == [2, 0]


def test_hostile_lines_are_counted_named_and_skipped(tmp_path: Path) -> None:
    bad = ['{"prompt_tokens": -4}', '{"prompt_tokens": 0}', '{"prompt_tokens": 1e400}',
           '{"prompt_tokens": 12.0}', '{"prompt_tokens": true}', '{"prompt_tokens": "12"}',
           f'{{"prompt_tokens": {MAX_TOKENS + 1}}}', '{"prompt_tokens": ' + "9" * 5000 + "}",
           b"\x00\xff\xfe\x89PNG junk", "[1, 2]", '{"output_tokens": 3}', "not json",
           '{"prompt_tokens": 7, "output_tokens": -1}']
    path = _jsonl(tmp_path, ['{"prompt_tokens": 100, "output_tokens": 1}', *bad,
                             '{"prompt_tokens": 200, "output_tokens": 2}'])
    t = read_traffic(path)
    assert t.prompt == [100, 200] and t.output == [1, 2]
    assert t.bad == len(bad) and len(t.bad_lines) == SHOWN_BAD
    assert t.bad_lines[0].startswith("line 2: ") and "-4" in t.bad_lines[0]
    assert f"and {len(bad) - SHOWN_BAD} more" in t.bad_text()
    assert all(len(line) < 200 for line in t.bad_lines)  # a 5000-digit number is not echoed


def test_a_20_mb_line_is_refused_without_parsing(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, ['{"prompt_tokens": 9}', b'{"prompt_tokens": "' + b"x" * 20_000_000
                             + b'"}', '{"prompt_tokens": 8}'])
    start = time.perf_counter()
    t = read_traffic(path)
    assert time.perf_counter() - start < 10
    assert t.prompt == [9, 8] and t.bad == 1 and "longer than" in t.bad_lines[0]


def test_nothing_usable_is_a_clear_error(tmp_path: Path) -> None:
    path = _jsonl(tmp_path, [b"\x00\x01\x02", '{"prompt_tokens": -1}'])
    with pytest.raises(ValueError, match="no usable request lengths.*2 bad line"):
        read_traffic(path)
    empty = _jsonl(tmp_path, [""], "empty.jsonl")
    with pytest.raises(ValueError, match="no usable request lengths"):
        read_traffic(empty)


def test_csv_column(tmp_path: Path) -> None:
    path = tmp_path / "t.csv"
    path.write_text("id,prompt_len,output_tokens\n1,30,4\n2,x,4\n3,-2,1\n4,50,6\n5,60\n")
    t = read_traffic(path, column="prompt_len")
    assert t.form == "csv" and t.prompt == [30, 50] and t.output == [4, 6] and t.bad == 3
    with pytest.raises(ValueError, match="no column 'prompt_tokens'"):
        read_traffic(path)


def test_compile_log_of_generate_calls(tmp_path: Path) -> None:
    events = [CompileEvent(seq=i, function="forward", context=ctx) for i, ctx in enumerate(
        ["generate batch 1: bucket 64, cache 72", "generate batch 2: length 17, cache 25", "other"])]
    path = CompileLog(events).save(tmp_path / "log.jsonl")
    t = read_traffic(path)
    assert t.form == "log" and t.prompt == [64, 17] and t.output == [8, 8] and "per graph" in t.note


def test_shipped_sample_is_labelled_synthetic() -> None:
    path = Path(__file__).resolve().parents[2] / "notebooks" / "data" / "sample_traffic.jsonl"
    first = json.loads(path.read_text().splitlines()[0])
    assert "SYNTHETIC" in first["header"]
    t = read_traffic(path)
    assert len(t.prompt) == 10_000 and t.bad == 0 and max(t.prompt) > 10 * sorted(t.prompt)[5000]
