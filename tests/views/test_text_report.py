"""report: the event table, summary, advice text and whole report for known events."""
from __future__ import annotations

import dataclasses
import re

import pytest

from helpers.logs import make_log
from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.finding import Advice
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.torch_text import short_reason
from neuronkit.views import report_json, text_layout
from neuronkit.views import text as report


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


def cells(line: str) -> list[str]:
    return re.split(r"\s{2,}", line.strip())


def test_event_table_columns_and_rows():
    lines = report.format_events(make_log(known_events())).splitlines()
    # one rank: no rank column; changed and the first reason say the same: one column
    assert cells(lines[0]) == ["#", "t+s", "function", "kind", "changed / reason", "compile s",
                               "context"]
    assert set(lines[1]) <= {"-", " "}
    rows = [cells(line) for line in lines[2:6]]
    assert rows[0] == ["0", "0.00", "forward", "first", "-", "0.250", "step 0"]
    assert rows[1] == ["1", "1.50", "forward", "recompile", "input_ids dim 1: 12 -> 40", "0.500",
                       "step 1"]
    assert rows[2][1] == "3.00" and rows[2][-2] == "0.125"
    # right-aligned numbers end under their header
    end = lines[0].index("compile s") + len("compile s")
    assert all(line[:end].endswith(row[5]) for line, row in zip(lines[2:6], rows, strict=True))


def test_limit_hit_is_flagged():
    text = report.format_events(make_log(known_events()))
    row = text.splitlines()[5]
    assert cells(row)[3] == f"limit_hit {report.LIMIT_FLAG}"
    assert "recompile limit hit (1x)" in text and "eagerly" in text
    assert report.LIMIT_FLAG not in report.format_events(make_log(known_events()[:3]))


def test_event_table_limit_shows_the_most_recent_and_says_how_many_are_left_out():
    text = report.format_events(make_log(known_events()), limit=2)
    assert [cells(ln)[0] for ln in text.splitlines() if re.match(r"\s*\d+\s", ln)] == ["2", "3"]
    assert text.splitlines()[0] == "(2 earlier event(s) not shown: the last 2 of 4)"
    assert report.format_events(make_log(known_events()), limit=0) == ("4 event(s) not shown "
                                                                       "(limit 0)")
    for bad in (-1, 2.5, True, "3"):
        with pytest.raises(ValueError, match="limit must be None"):
            report.format_events(make_log(known_events()), limit=bad)
    assert report.format_events(CompileLog()) == "no compile events"


def column(text: str, header: str, key: int = 0) -> list[list[str]]:
    """The pieces of one column of a fitted table, per row: its span is the rule's dash run under
    ``header`` (the line above the rule); a row's continuation lines are blank in column ``key``."""
    lines = text.splitlines()
    rule = next(i for i, line in enumerate(lines) if set(line) <= {"-", " "})
    spans = [m.span() for m in re.finditer(r"-+", lines[rule])]
    start, end = next(span for span in spans
                      if lines[rule - 1][span[0]:span[1]].strip() == header)
    rows: list[list[str]] = []
    for line in lines[rule + 1:]:
        if line[slice(*spans[key])].strip():
            rows.append([])
        rows[-1].append(line[start:end].strip())
    return [[piece for piece in row if piece] for row in rows]


def joined(pieces: list[str], whole: str) -> bool:
    """Whether the pieces give ``whole`` back, one space dropped at most where a line wrapped."""
    at = 0
    for i, piece in enumerate(pieces):
        if i and whole.startswith(" " + piece, at):
            at += 1
        if not whole.startswith(piece, at):
            return False
        at += len(piece)
    return at == len(whole)


LONG_NAME = "Qwen3MoeForConditionalGenerationWithLongNam.forward[prefill]"
LONG_REASON = ("Dynamo could not trace a call to a builtin of a C extension that the model makes at "
               "every step of its decode loop, so it ran that step eagerly and compiled the rest "
               "of the function as two graphs again")


RESUME = "torch_dynamo_resume_in_forward_with_a_long_name_at_1234"


def test_a_long_function_name_and_reason_are_wrapped_whole_in_their_columns():
    """A class is named once above the table; a long name without one (a resume function) and
    a long reason wrap whole; the context fills the lines its row takes, cut with "…" past them."""
    assert len(LONG_NAME) == 60 and len(LONG_REASON) == 200
    events = [CompileEvent(function=LONG_NAME, kind="failed", reasons=[LONG_REASON],
                           context="generate batch 1: padded to 64, cache 128 " * 3),
              CompileEvent(function=RESUME, kind="recompile", reasons=["0/0: " + "x" * 200])]
    text = report.format_events(make_log(events))
    assert widest(text) <= text_layout.WIDTH
    assert text.splitlines()[0] == ("functions: forward = "
                                    "Qwen3MoeForConditionalGenerationWithLongNam.forward")
    functions, reasons = column(text, "function"), column(text, "changed / reason")
    assert len(functions) == len(reasons) == 2
    assert functions[0] == ["forward[prefill]"]
    assert len(functions[1]) > 1 and joined(functions[1], RESUME)  # wrapped, not cut
    assert len(reasons[0]) > 1 and joined(reasons[0], LONG_REASON)
    assert joined(reasons[1], "x" * 200)
    context = column(text, "context")[0]
    shown = "".join("".join(context).split())
    assert len(context) == len(reasons[0]) and shown.endswith("…")
    assert "".join(events[0].context.split()).startswith(shown[:-1])
    summary = report.format_summary(make_log(events))
    assert joined(column(summary, "function", key=1)[0], LONG_NAME) and widest(summary) <= 120


def test_a_long_table_past_the_exact_count_still_wraps_whole():
    n = text_layout.EXACT_ROWS + 50  # more different rows than are wrapped to choose the widths
    events = [CompileEvent(function=f"{RESUME}_{i}", kind="recompile", started_at=float(i),
                           changed=f"{LONG_REASON} {i}", context=f"generate batch {i}",
                           input_shapes={"x": [1, i]}) for i in range(n)]
    text = report.format_events(make_log(events))
    assert widest(text) <= 120 and "…" not in text
    functions, reasons = column(text, "function"), column(text, "changed / reason")
    assert len(functions) == len(reasons) == n
    assert all(joined(f, e.function) and joined(r, e.changed)
               for f, r, e in zip(functions, reasons, events, strict=True))


def test_pieces_wrap_at_spaces_and_marks_and_lose_nothing():
    assert text_layout.pieces("Qwen3ForCausalLM.forward[prefill]", 24) == [
        "Qwen3ForCausalLM.forward", "[prefill]"]
    assert text_layout.pieces("forward (modeling_qwen3.py:440)", 24) == [
        "forward", "(modeling_qwen3.py:440)"]
    assert text_layout.pieces("input_ids dim 1: 15 -> 51", 40) == ["input_ids dim 1: 15 -> 51"]
    assert text_layout.pieces("x" * 10, 4) == ["xxxx", "xxxx", "xx"]
    assert text_layout.pieces("dim.1->5", 7) == ["dim.", "1->5"]  # an arrow stays whole
    for width in range(1, 70):
        for text in (LONG_NAME, LONG_REASON, "a  b\tc\x1b[2J d"):
            parts = text_layout.pieces(text, width)
            assert all(0 < len(p) <= width for p in parts)
            assert joined(parts, text_layout.clean(text)), (text, width, parts)


def test_narrowing_keeps_rows_short():
    """The text columns give up the characters that add the fewest lines: 16 rows of a real
    generate take two lines each, not three or four (under the legend that names the class)."""
    events = [CompileEvent(function=f"Qwen3ForCausalLM.forward[{'prefill' if i % 2 else 'decode'}]",
                           kind="recompile", started_at=float(i), input_shapes={"x": [1, i]},
                           changed="cache.layers[0].keys dim 2: 47 -> 83 (and 3 more inputs alike)",
                           context=f"generate batch {i}: padded to 64, cache 128")
              for i in range(16)]
    lines = report.format_events(make_log(events)).splitlines()
    assert widest("\n".join(lines)) <= 120 and len(lines) == 1 + 2 + 16 * 2


def test_summary_per_function():
    text = report.format_summary(make_log(known_events(), wall=10.0))
    lines = text.splitlines()
    assert cells(lines[0]) == ["function", "graphs", "shapes", "limit hits", "failed", "Dynamo s",
                               "mean s", "share of wall"]
    # 3 graphs, 4 distinct shapes, 1 limit hit; 0.875 s compiling, mean over graphs, 8.75% of 10 s
    assert cells(lines[2]) == ["forward", "3", "4", "1", "0", "0.875", "0.292", "8.8%"]
    assert cells(lines[3]) == ["total", "3", "1", "0", "0.875", "8.8%"]
    assert cells(report.format_summary(make_log(known_events())).splitlines()[2])[-1] == "-"


def test_advice_text_contains_the_numbers():
    text = report.format_advice(diagnose(make_log(known_events())))
    first = text.splitlines()[0]
    assert first.startswith("1. [critical]") and "recompile limit hit" in first
    assert "the sequence length (input_ids dim 1) took 4 values (12..90) -> 3 graphs" in text
    assert "recompile_limit = 3" in text
    assert report.format_advice([]) == "no findings"
    two = report.format_advice([Advice("a", "b", "c", "info"), Advice("d", "", "", "warning")])
    assert two.splitlines() == ["1. [info] a", "     b", "     fix: c", "2. [warning] d"]


def test_report_has_header_and_sections():
    text = report.format_report(make_log(known_events(), wall=10.0))
    assert text.splitlines()[0] == ("neuronkit compile report: device cpu, backend eager, 4 events, "
                                    "0.88 s Dynamo compile, wall 10.0 s")
    positions = [text.index(h) for h in ("Compile events\n====", "Per function\n====",
                                         "Advice\n======")]
    assert positions == sorted(positions)


def test_report_of_two_ranks():
    rank1 = [dataclasses.replace(e, rank=1, started_at=e.started_at + 0.1) for e in known_events()[:2]]
    log = CompileLog.merge([make_log(known_events()), make_log(rank1)])
    text = report.format_report(log)
    lines = text.splitlines()
    assert lines[0].endswith("6 events, 1.62 s Dynamo compile, ranks 0,1")
    # the sum over ranks and the busiest rank's seconds told apart (rank 0: 0.25 + 0.5 + 0.125)
    assert lines[1].startswith("seconds summed over ranks 0,1; busiest rank 0: 0.88 s")
    rule = next(i for i, line in enumerate(lines) if line and set(line) <= {"-", " "})
    ranks = [cells(line)[-1] for line in lines[rule + 1:rule + 7]]
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
                                    "forward (ops.py:9)", "torch_dynamo_resume_in_forward_at_375"]
    assert rows[3][4] == "Missing tp_iternext"
    summary = [cells(line)[0] for line in report.format_summary(log).splitlines()[2:]]
    assert summary == ["forward (model.py:40)", "forward (ops.py:9)",
                       "torch_dynamo_resume_in_forward_at_375", "total"]


def test_report_is_deterministic_for_the_same_events(tmp_path):
    a = report.format_report(make_log(known_events(t0=1000.0)))
    shifted = report.format_report(make_log(known_events(t0=5000.0)))  # another day, same run
    assert a == shifted
    log = make_log(known_events(), wall=60.0)  # closed: a log saved without one reads as killed
    path = log.save(tmp_path / "log.jsonl")
    assert report.format_report(path) == report.format_report(log)
    copies = [dataclasses.replace(e) for e in log.events]
    assert report.format_report(copies) == a


# ---- width, merged columns, limits, terminal safety, JSON data ---------------------------------

PLACE = "/opt/venv/lib/python3.11/site-packages/transformers/models/qwen3/modeling_qwen3.py:440"
WORST_KINDS = ["first", "recompile", "limit_hit", "failed", "eager_fallback", "kernels",
               "graph_break"]


def worst_case_log(n: int = 70) -> CompileLog:
    """Every column at its widest: NEFF fields (an unknown cache state), forecast kernels, a limit
    hit, 64 ranks, long names in long places, long changes, reasons and context, six-digit seqs,
    a day of offsets, long header fields."""
    events = [CompileEvent(
        seq=100_000 + i, function="torch_dynamo_resume_in_forward_with_a_long_name_at_1234"
        if i % 2 else "forward", location=PLACE if i % 3 else f"/b/{i % 2}/modeling.py:9",
        started_at=1000.0 + 86_400 * (i > 0) + i, duration_s=1234.5, kind=kind,
        input_shapes={"input_ids": [8, 1000 + i]},
        changed="cache.layers[0].keys dim 2: 1023 -> 1024 " * 3,
        reasons=["0/0: " + "L['self'].config.some_setting == 12345 " * 6],
        context="generate batch 12 of 100, bucket 4096, request " * 3, rank=i % 64,
        neff_compile_s=12345.6 if kind in ("first", "recompile") else None,
        neff_cache="not-a-state", kernels=12345, forecast=True, calls=999)
        for i, kind in enumerate(WORST_KINDS * (n // len(WORST_KINDS)))]
    header = {"format": "neuronkit-compile-log", "version": 2, "device": "neuron " * 20,
              "backend": "neuronx " * 20, "wall_time_s": 99999.0}
    return CompileLog(events, header=header)


def widest(text: str) -> int:
    return max(len(line) for line in text.splitlines())


def test_every_text_view_fits_120_columns_at_its_widest():
    log = worst_case_log()
    full = report.format_report(log, limit=None)
    assert widest(full) <= text_layout.WIDTH == 120
    for text in (report.format_events(log), report.format_summary(log),
                 report.format_advice(diagnose(log))):
        assert widest(text) <= 120
    events = report.format_events(log)
    # the labels and columns that exist are kept within the width
    assert "kernels x12345 (forecast)" in events and f"limit_hit {report.LIMIT_FLAG}" in events
    assert "12345.6 not built" in events and "NEFF s" in events
    assert cells(events.splitlines()[0])[-1] == "rank"
    header = full.split("\n\n", 1)[0]  # wrapped: long device and backend names
    assert header.startswith("neuronkit compile report: device neuron") and "…" not in header
    assert "device " + "neuron " * 19 + "neuron, backend" in " ".join(header.split())  # whole
    head, note = header.rsplit("\n", 1)  # then which seconds are whose
    assert " ".join(head.split()).endswith(", ranks 0-63")
    assert note.startswith("seconds summed over ranks 0-63; ")
    plain = report.format_report(make_log(known_events(), wall=10.0))
    assert widest(plain) <= 120 and "…" not in plain


def test_clock_offsets_name_their_hosts_whole_and_count_the_rest():
    host = "ip-172-31-44-201.us-west-2.compute.internal-trn1-node-"
    log = make_log(known_events())
    log.header["clock_offsets"] = {f"{host}{i}": 0.5 * i for i in range(10)}
    header = report.format_report(log).split("\n\n", 1)[0]
    assert widest(header) <= 120 and "…" not in header
    flat = "".join(header.split())
    assert all(f"{host}{i}+{0.5 * i:.3f}s" in flat for i in range(8))
    assert f"{host}8" not in flat and "and 2 more taken off its times" in " ".join(header.split())


def test_a_long_advice_title_is_wrapped_within_the_width():
    text = report.format_advice([Advice("x" * 300 + " tail", "d " * 200, "f " * 100, "warning")])
    assert widest(text) <= 120 and text.startswith("1. [warning] xxx")
    assert all(line.startswith("   ") for line in text.splitlines()[1:])


SCALAR = "0/1: L['self'].step == 3  # an int"


def test_changed_and_reason_are_one_column_and_both_shown_when_they_differ():
    events = [CompileEvent(function="f", kind="recompile", changed="input_ids dim 1: 3 -> 5",
                           reasons=[mismatch("input_ids", 3, 5)]),
              CompileEvent(function="f", kind="recompile", changed="step: 3 -> 4",
                           reasons=[SCALAR]),
              CompileEvent(function="f", kind="failed", reasons=["Missing tp_iternext"])]
    lines = report.format_events(make_log(events)).splitlines()
    assert cells(lines[0])[4] == "changed / reason" and "first reason" not in lines[0]
    assert [cells(line)[4] for line in lines[2:]] == [
        "input_ids dim 1: 3 -> 5", f"step: 3 -> 4; {short_reason(SCALAR, 200)}",
        "Missing tp_iternext"]


def test_the_rank_column_shows_only_with_several_ranks():
    one = report.format_events(make_log(known_events()))
    assert "rank" not in one.splitlines()[0]
    solo = make_log([dataclasses.replace(e, rank=3) for e in known_events()])
    assert "rank" not in report.format_events(solo).splitlines()[0]
    assert report.format_report(solo).splitlines()[0].endswith(", rank 3")
    rank1 = [dataclasses.replace(e, rank=1) for e in known_events()[:2]]
    merged = CompileLog.merge([make_log(known_events()), make_log(rank1)])
    assert cells(report.format_events(merged).splitlines()[0])[-1] == "rank"


def many_events(n: int) -> list[CompileEvent]:
    return [CompileEvent(function="forward", kind="first" if i == 0 else "recompile",
                         started_at=float(i), duration_s=0.5, input_shapes={"x": [1, i % 7 + 1]},
                         changed=f"x dim 1: {i} -> {i + 1}", context=f"step {i}")
            for i in range(n)]


def test_the_report_shows_the_most_recent_50_events_by_default():
    assert report.DEFAULT_LIMIT == 50
    text = report.format_report(make_log(many_events(120)))
    section = text.split("Compile events\n==============\n", 1)[1].split("\n\n", 1)[0]
    lines = section.splitlines()
    assert lines[0] == "(70 earlier event(s) not shown: the last 50 of 120)"
    assert [cells(line)[0] for line in lines[3:]] == [str(i) for i in range(70, 120)]
    assert "120 events" in text.splitlines()[0]  # the header and summary count every event
    summary = text.split("Per function\n============\n")[1].splitlines()
    assert cells(summary[2])[:2] == ["forward", "120"]
    assert len(report.format_report(make_log(many_events(120)), limit=None).splitlines()) > 120


def test_a_limited_report_formats_only_the_shown_events_and_summarises_once(monkeypatch):
    log = make_log(many_events(2000))
    formatted: list[str] = []
    summaries: list[int] = []
    real_input_name, real_summary = report.input_name, CompileLog.summary

    def counting_input_name(text: str) -> str:
        formatted.append(text)
        return real_input_name(text)

    def counting_summary(self: CompileLog) -> list:
        summaries.append(1)
        return real_summary(self)

    monkeypatch.setattr(report, "input_name", counting_input_name)
    monkeypatch.setattr(CompileLog, "summary", counting_summary)
    monkeypatch.setattr(report, "diagnose", lambda log: pytest.fail("advice was given"))
    text = report.format_report(log, limit=5, advice=[])
    assert len(formatted) == 5 and len(summaries) == 1 and "no findings" in text
    formatted.clear()
    report.format_events(log, limit=7)
    assert len(formatted) == 7


def test_report_data_has_stable_keys_and_raw_values():
    log = make_log(known_events(), wall=10.0)
    data = report_json.report_data(log, limit=2)
    assert list(data) == ["format", "version", "logs", "synthetic", "synthetic_reason", "device",
                          "backend", "ranks", "wall_time_s", "compile_s", "dynamo_s", "kernel_s",
                          "neff_s", "busiest_rank", "share_of_wall", "counts", "worst_severity",
                          "summary", "advice", "events"]
    assert (data["format"], data["version"]) == ("neuronkit-report", 1)
    assert data["counts"] == {"events": 4, "shown": 2, "not_shown": 2, "graphs": 3,
                              "kinds": {"first": 1, "recompile": 2, "limit_hit": 1},
                              "advice": {s: sum(a.severity == s for a in diagnose(log))
                                         for s in ("critical", "warning", "info")}}
    assert data["worst_severity"] == "critical" and data["ranks"] == [0]
    assert data["compile_s"] == 0.875 and data["share_of_wall"] == pytest.approx(0.0875)
    assert set(data["advice"][0]) == {"severity", "title", "detail", "fix", "numbers"}
    assert [e["seq"] for e in data["events"]] == [2, 3]
    assert data["events"][0]["t_s"] == 3.0 and data["events"][0]["label"] == "forward"
    assert set(data["summary"][0]) >= {"function", "graphs", "distinct_shapes", "limit_hits",
                                       "failed", "compile_s", "neff_s", "mean_s", "share_of_wall"}


HOSTILE = ["\x1b[2Jwiped", "\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\",
           "over\rwrite", "\u202eexe.txt\u202c", "\u2066iso\u2069", "bell\x07\x00", "\x9b2J"]
FORBIDDEN = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                       "\u2066-\u2069\u2028\u2029]")


def hostile_log() -> CompileLog:
    bad = "".join(HOSTILE)
    events = [CompileEvent(seq=i, function=f"f{bad}", location=f"{bad}.py:{i}", kind=kind,
                           device=bad, backend=bad, started_at=float(i), changed=bad,
                           reasons=[bad], context=bad, input_shapes={bad: [1, i]}, rank=i % 2,
                           neff_cache=bad if i % 3 else None, neff_compile_s=1.0)
              for i, kind in enumerate(["first", "recompile", "recompile", "limit_hit",
                                        "failed", "kernels", "graph_break"])]
    events.append(CompileEvent(seq=7, function="g", kind=bad, context=bad))  # type: ignore[arg-type]
    return CompileLog(events, header={"format": "neuronkit-compile-log", "version": 2,
                                      "device": bad, "backend": bad, "wall_time_s": 9.0})


def test_values_from_the_log_are_printed_without_controls_or_escapes():
    log = hostile_log()
    findings = diagnose(log) + [Advice(f"t{HOSTILE[0]}", HOSTILE[1], HOSTILE[2], "info")]
    for text in (report.format_report(log, limit=None, advice=findings),
                 report.format_events(log), report.format_summary(log),
                 report.format_advice(findings)):
        assert not FORBIDDEN.search(text), FORBIDDEN.findall(text)
        assert "wiped" in text and "click" in text  # shown, without the escapes
    assert "exe.txt" in report.format_events(log)


def test_an_empty_log_reports_no_events():
    text = report.format_report(CompileLog())
    assert "0 events" in text.splitlines()[0] and "no compile events" in text
    data = report_json.report_data(CompileLog())
    assert data["counts"]["events"] == 0 and data["events"] == [] and data["ranks"] == []


def test_text_cuts_do_not_move_with_the_times_measured():
    """A longer time offset (9.99 s vs 1234.56 s) must not narrow the text columns: notebooks
    compare their stored tables with fresh ones, numbers masked and spaces collapsed."""
    import re

    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.views.text import format_events

    def masked(last_start: float) -> str:
        log = CompileLog()
        for i, start in enumerate((0.0, last_start)):
            log.append(CompileEvent(function="MistralForCausalLM.forward[decode]", kind="recompile",
                                    started_at=start, duration_s=1.0, context="generate",
                                    changed="a Python int/flag changed: " + "x" * 120,
                                    input_shapes={"x": [1, i]}))
        text = re.sub(r"-{3,}", "---", re.sub(r"\d+\.\d+", "<n>", format_events(log)))
        return re.sub(r" +", " ", text)  # as notebooks/sanitize.cfg masks them

    assert masked(9.99) == masked(1234.56)
