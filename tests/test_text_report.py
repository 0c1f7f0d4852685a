"""report: the event table, summary, advice text and whole report for known events."""
from __future__ import annotations

import dataclasses
import re

import pytest

from neuronkit.views import text as report
from neuronkit.advice import Advice, diagnose
from neuronkit.events import CompileEvent, CompileLog


def mismatch(name: str, old: int, new: int) -> str:
    return f"0/0: tensor 'L['{name}']' size mismatch at index 1. expected {old}, actual {new}"


def known_events(t0: float = 1000.0) -> list[CompileEvent]:
    common = {"device": "cpu", "backend": "eager", "function": "forward"}
    return [
        CompileEvent(started_at=t0, duration_s=0.25, input_shapes={"input_ids": [4, 12]},
                     kind="first", context="step 0", **common),
        CompileEvent(started_at=t0 + 1.5, duration_s=0.5, input_shapes={"input_ids": [4, 40]},
                     kind="recompile", changed="input_ids dim 1: 12 -> 40",
                     reasons=[mismatch("input_ids", 12, 40)], context="step 1", **common),
        CompileEvent(started_at=t0 + 3.0, duration_s=0.125, input_shapes={"input_ids": [4, 33]},
                     kind="recompile", changed="input_ids dim 1: 40 -> 33",
                     reasons=[mismatch("input_ids", 40, 33)], context="step 2", **common),
        CompileEvent(started_at=t0 + 9.0, duration_s=0.0, input_shapes={"input_ids": [4, 90]},
                     kind="limit_hit", changed="input_ids dim 1: 33 -> 90",
                     reasons=["torch._dynamo hit config.recompile_limit (3)"], **common),
    ]


def make_log(events: list[CompileEvent], wall: float | None = None) -> CompileLog:
    log = CompileLog()
    for e in events:
        log.append(e)
    log.wall_time_s = wall
    return log


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_event_table_columns_and_rows():
    lines = report.format_events(make_log(known_events())).splitlines()
    assert cells(lines[0]) == ["#", "t+s", "function", "kind", "changed", "first reason",
                               "compile s", "context", "rank"]
    assert set(lines[1]) <= {"-", " "}
    rows = [cells(line) for line in lines[2:6]]
    assert rows[0] == ["0", "0.00", "forward", "first", "-", "-", "0.250", "step 0", "0"]
    assert rows[1] == ["1", "1.50", "forward", "recompile", "input_ids dim 1: 12 -> 40",
                       "input_ids dim 1: 12 -> 40", "0.500", "step 1", "0"]
    assert rows[2][1] == "3.00" and rows[2][-3] == "0.125"
    # right-aligned numbers end under their header
    end = lines[0].index("compile s") + len("compile s")
    assert all(line[:end].endswith(row[6]) for line, row in zip(lines[2:6], rows, strict=True))


def test_limit_hit_is_flagged():
    text = report.format_events(make_log(known_events()))
    row = text.splitlines()[5]
    assert cells(row)[3] == f"limit_hit {report.LIMIT_FLAG}"
    assert "recompile limit hit (1x)" in text and "eagerly" in text
    assert report.LIMIT_FLAG not in report.format_events(make_log(known_events()[:3]))


def test_event_table_limit_and_bad_limit():
    text = report.format_events(make_log(known_events()), limit=2)
    assert len([ln for ln in text.splitlines() if re.match(r"\s*\d+\s", ln)]) == 2
    assert "2 more event(s) not shown" in text
    with pytest.raises(ValueError, match="limit"):
        report.format_events(make_log(known_events()), limit=-1)
    assert report.format_events(CompileLog()) == "no compile events"


def test_long_reason_is_shortened():
    event = CompileEvent(function="f", kind="recompile", reasons=["0/0: " + "x" * 200])
    row = report.format_events(make_log([event])).splitlines()[2]
    assert "…" in row and "x" * 60 not in row


def test_summary_per_function():
    text = report.format_summary(make_log(known_events(), wall=10.0))
    lines = text.splitlines()
    assert cells(lines[0]) == ["function", "graphs", "shapes", "limit hits", "failed", "compile s",
                               "mean s", "share of wall"]
    # 3 graphs, 4 distinct shapes, 1 limit hit; 0.875 s compiling, mean over graphs, 8.75% of 10 s
    assert cells(lines[2]) == ["forward", "3", "4", "1", "0", "0.875", "0.292", "8.8%"]
    assert cells(lines[3]) == ["total", "3", "1", "0", "0.875", "8.8%"]
    assert cells(report.format_summary(make_log(known_events())).splitlines()[2])[-1] == "-"


def test_advice_text_contains_the_numbers():
    text = report.format_advice(diagnose(make_log(known_events())))
    first = text.splitlines()[0]
    assert first.startswith("1. [critical]") and "recompile limit hit" in first
    assert "input_ids dim 1 took 4 values (12..90) -> 3 graphs" in text
    assert "recompile_limit = 3" in text
    assert report.format_advice([]) == "no findings"
    two = report.format_advice([Advice("a", "b", "c", "info"), Advice("d", "", "", "warning")])
    assert two.splitlines() == ["1. [info] a", "     b", "     fix: c", "2. [warning] d"]


def test_report_has_header_and_sections():
    text = report.format_report(make_log(known_events(), wall=10.0))
    assert text.splitlines()[0] == ("neuronkit compile report: device cpu, backend eager, 4 events, "
                                    "0.88 s compiling, wall 10.0 s")
    positions = [text.index(h) for h in ("Compile events\n====", "Per function\n====",
                                         "Advice\n======")]
    assert positions == sorted(positions)


def test_report_of_two_ranks():
    rank1 = [dataclasses.replace(e, rank=1, started_at=e.started_at + 0.1) for e in known_events()[:2]]
    log = CompileLog.merge([make_log(known_events()), make_log(rank1)])
    text = report.format_report(log)
    assert text.splitlines()[0].endswith("6 events, 1.62 s compiling, ranks 0,1")
    ranks = [cells(line)[-1] for line in text.splitlines()[6:12]]
    assert ranks == ["0", "1", "0", "1", "0", "0"]  # merged in start-time order
    assert "ranks compiled different graphs: rank 0: 3, rank 1: 2" in text


def test_summary_of_two_ranks_gives_the_share_per_rank():
    rank0 = make_log([dataclasses.replace(e, duration_s=3.0) for e in known_events()[:2]], wall=8.0)
    rank1 = make_log([dataclasses.replace(e, rank=1, duration_s=2.5) for e in known_events()[:2]],
                     wall=7.5)
    lines = report.format_summary(CompileLog.merge([rank0, rank1])).splitlines()
    # 11 s compiling over both ranks; rank 0 compiled 6 s of its 8 s: 75 %, not 11 / 8 = 138 %
    assert cells(lines[2]) == ["forward", "4", "2", "0", "0", "11.000", "2.750", "75.0%"]
    assert cells(lines[3]) == ["total", "4", "0", "0", "11.000", "75.0%"]
    assert lines[4].startswith("2 ranks:") and "compiled longest" in lines[4]
    assert len(report.format_summary(rank0).splitlines()) == 4  # one rank: no note


def test_event_table_and_summary_tell_same_named_functions_apart():
    events = [dataclasses.replace(e, location="/m/model.py:40") for e in known_events()[:2]]
    events.append(CompileEvent(function="forward", location="/a/ops.py:9", kind="first",
                               started_at=1005.0))
    events.append(CompileEvent(function="torch_dynamo_resume_in_forward_at_375", kind="failed",
                               started_at=1006.0, reasons=["Missing tp_iternext"]))
    log = make_log(events)
    rows = [cells(line) for line in report.format_events(log).splitlines()[2:]]
    assert [r[2] for r in rows] == ["forward (model.py:40)", "forward (model.py:40)",
                                    "forward (ops.py:9)", "torch_dynamo_re…d_at_375"]
    assert rows[3][5] == "Missing tp_iternext"
    summary = [cells(line)[0] for line in report.format_summary(log).splitlines()[2:]]
    assert summary == ["forward (model.py:40)", "forward (ops.py:9)",
                       "torch_dynamo_resume_in_…d_at_375", "total"]


def test_report_is_deterministic_for_the_same_events(tmp_path):
    a = report.format_report(make_log(known_events(t0=1000.0)))
    shifted = report.format_report(make_log(known_events(t0=5000.0)))  # another day, same run
    assert a == shifted
    log = make_log(known_events())
    path = log.save(tmp_path / "log.jsonl")
    assert report.format_report(path) == report.format_report(log)
    copies = [dataclasses.replace(e) for e in log.events]
    assert report.format_report(copies) == a
