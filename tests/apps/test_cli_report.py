"""`neuronkit report LOG... [--limit N] [--json] [--fail-on S] [--png P] [--chrome-trace P]`
through neuronkit.apps.cli.main."""
from __future__ import annotations

import dataclasses
import json
import re
import warnings

import pytest

from neuronkit.apps import cli
from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.views import report_facts
from neuronkit.views.charts import PNG_SIGNATURE


def write_log(path) -> CompileLog:
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 1, "device": "cpu",
                             "backend": "eager", "wall_time_s": 20.0}, path=path)
    for i, n in enumerate([16, 48, 80]):
        log.append(CompileEvent(function="forward", compile_id=f"0/{i}", started_at=50.0 + i,
                                duration_s=1.0, input_shapes={"input_ids": [2, n]},
                                kind="first" if i == 0 else "recompile", context=f"step {i}"))
    return log


def test_report_prints_tables_and_writes_png_and_trace(tmp_path, capsys):
    log_path = tmp_path / "compile-log.jsonl"
    write_log(log_path)
    png, trace = tmp_path / "out" / "timeline.png", tmp_path / "trace.json"
    rc = main(["report", str(log_path), "--png", str(png), "--chrome-trace", str(trace)])
    out = capsys.readouterr().out
    assert rc == 0
    assert out.startswith("neuronkit compile report: device cpu, backend eager, 3 events, "
                          "3.00 s Dynamo compile, wall 20.0 s")
    for heading in ("Compile events", "Per function", "Advice"):
        assert f"{heading}\n{'=' * len(heading)}" in out
    assert "(input_ids dim 1) took 3 values (16..80) -> 3 graphs" in out
    assert "compile time is 15% of the run" in out
    assert png.read_bytes().startswith(PNG_SIGNATURE) and str(png) in out
    slices = [e for e in json.loads(trace.read_text())["traceEvents"] if e["ph"] == "X"]
    assert [s["dur"] for s in slices] == [1e6] * 3 and str(trace) in out


def test_report_of_a_missing_log_is_a_clear_error(tmp_path, capsys):
    rc = main(["report", str(tmp_path / "nope.jsonl")])
    err = capsys.readouterr().err
    assert rc == 2 and "not found" in err and "nope.jsonl" in err


def test_report_of_a_foreign_file_is_a_clear_error(tmp_path, capsys):
    bad = tmp_path / "other.jsonl"
    bad.write_text('{"hello": 1}\n')
    assert main(["report", str(bad)]) == 2
    assert "not a neuronkit compile log" in capsys.readouterr().err


# ---- outputs to folders, several logs, --limit, --json, --fail-on, safety ---------------------

def test_png_and_chrome_trace_into_a_folder_use_the_log_stem(tmp_path, capsys):
    log_path = tmp_path / "rank0.jsonl"
    write_log(log_path)
    out = tmp_path / "out"
    out.mkdir()
    rc = main(["report", str(log_path), "--png", str(out), "--chrome-trace", str(out)])
    printed = capsys.readouterr()
    assert rc == 0 and "Traceback" not in printed.err
    assert (out / "rank0.timeline.png").read_bytes().startswith(PNG_SIGNATURE)
    assert json.loads((out / "rank0.trace.json").read_text())["traceEvents"]
    assert str(out / "rank0.trace.json") in printed.out
    # a folder not made yet, named with a trailing slash, is made
    assert main(["report", str(log_path), "--chrome-trace", f"{tmp_path}/new/"]) == 0
    assert (tmp_path / "new" / "rank0.trace.json").is_file()


def test_an_output_that_cannot_be_written_is_a_clear_error(tmp_path, capsys):
    log_path = tmp_path / "log.jsonl"
    write_log(log_path)
    (tmp_path / "file").write_text("x")
    rc = main(["report", str(log_path), "--chrome-trace", str(tmp_path / "file" / "t.json")])
    err = capsys.readouterr().err
    assert rc == 2 and "cannot write the Chrome trace to" in err and "Traceback" not in err
    assert main(["report", str(log_path), "--png", str(log_path)]) == 2  # never over the log
    assert "is a compile log given to read" in capsys.readouterr().err


def rank_log(path, rank: int, starts: list[float]) -> CompileLog:
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 2, "device": "cpu",
                             "backend": "eager"}, path=path)
    for i, t in enumerate(starts):
        log.append(CompileEvent(function="forward", started_at=t, duration_s=0.5, rank=rank,
                                kind="first" if i == 0 else "recompile",
                                input_shapes={"x": [1, 8 * (i + 1)]}, context=f"r{rank} s{i}"))
    return log


def test_several_logs_are_merged_in_start_time_order(tmp_path, capsys):
    rank_log(tmp_path / "rank0.jsonl", 0, [10.0, 12.0])
    rank_log(tmp_path / "rank1.jsonl", 1, [11.0, 13.0])
    assert main(["report", str(tmp_path / "rank0.jsonl"), str(tmp_path / "rank1.jsonl")]) == 0
    out = capsys.readouterr().out
    lines = out.splitlines()
    assert lines[0].endswith("4 events, 2.00 s Dynamo compile, ranks 0,1")
    assert lines[1].startswith("seconds summed over ranks 0,1; busiest rank 0: 1.00 s")
    rule = next(i for i, ln in enumerate(lines) if ln and set(ln) <= {"-", " "})
    rows = [re.split(r"\s{2,}", ln.strip()) for ln in lines[rule + 1:rule + 5]]
    assert [(r[-2], r[-1]) for r in rows] == [("r0 s0", "0"), ("r1 s0", "1"), ("r0 s1", "0"),
                                              ("r1 s1", "1")]
    # a pattern the shell did not expand is expanded; a log named twice counts once
    assert main(["report", str(tmp_path / "rank*.jsonl"), str(tmp_path / "rank0.jsonl")]) == 0
    assert "4 events" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "nothing*.jsonl")]) == 2
    assert "no compile log matches" in capsys.readouterr().err
    assert main(["report", str(tmp_path)]) == 2
    assert "is a folder: name the compile logs in it" in capsys.readouterr().err


def test_two_logs_of_the_same_rank_get_a_note(tmp_path, capsys):
    rank_log(tmp_path / "a.jsonl", 0, [1.0])
    rank_log(tmp_path / "b.jsonl", 0, [2.0])
    assert main(["report", str(tmp_path / "a.jsonl"), str(tmp_path / "b.jsonl")]) == 0
    err = capsys.readouterr().err
    assert "both hold rank 0" in err and "compare them: neuronkit diff" in err


def test_limit_shows_the_most_recent_events(tmp_path, capsys):
    rank_log(tmp_path / "log.jsonl", 0, [float(i) for i in range(60)])
    assert cli.DEFAULT_LIMIT == report_facts.DEFAULT_LIMIT
    assert main(["report", str(tmp_path / "log.jsonl")]) == 0
    assert "(10 earlier event(s) not shown: the last 50 of 60)" in capsys.readouterr().out
    assert main(["report", str(tmp_path / "log.jsonl"), "--limit", "2"]) == 0
    out = capsys.readouterr().out
    assert "(58 earlier event(s) not shown" in out and "r0 s59" in out and "r0 s57" not in out
    assert "…" not in out
    assert main(["report", str(tmp_path / "log.jsonl"), "--limit", "all"]) == 0
    assert "not shown" not in capsys.readouterr().out
    for bad in ("-1", "many"):
        with pytest.raises(SystemExit) as exc:
            main(["report", str(tmp_path / "log.jsonl"), "--limit", bad])
        assert exc.value.code == 2
        assert "--limit: expected a number of events >= 0 or 'all'" in capsys.readouterr().err


def test_json_output(tmp_path, capsys):
    log_path = tmp_path / "log.jsonl"
    write_log(log_path)
    trace = tmp_path / "t.json"
    assert main(["report", str(log_path), "--json", "--limit", "2",
                 "--chrome-trace", str(trace)]) == 0
    captured = capsys.readouterr()
    data = json.loads(captured.out)  # the notes go to stderr: stdout stays JSON
    assert list(data) == ["format", "version", "logs", "synthetic", "synthetic_reason", "device",
                          "backend", "ranks", "wall_time_s", "compile_s", "dynamo_s", "kernel_s",
                          "neff_s", "busiest_rank", "share_of_wall", "counts", "worst_severity",
                          "summary", "advice", "events"]
    assert data["synthetic"] is False and data["synthetic_reason"] is None
    assert data["logs"] == [str(log_path)] and data["format"] == "neuronkit-report"
    assert data["counts"]["events"] == 3 and data["counts"]["shown"] == 2
    assert [e["context"] for e in data["events"]] == ["step 1", "step 2"]
    assert data["advice"][0]["severity"] == "warning" and "3 graphs" in data["advice"][0]["title"]
    assert data["worst_severity"] == "warning"
    assert "Chrome trace written to" in captured.err and trace.is_file()


def test_fail_on_exits_3_at_or_above_the_severity(tmp_path, capsys):
    log_path = tmp_path / "log.jsonl"
    write_log(log_path)  # a warning (3 graphs) and an info (compile share)
    assert main(["report", str(log_path), "--fail-on", "critical"]) == 0
    assert main(["report", str(log_path), "--fail-on", "warning"]) == cli.EXIT_FINDINGS == 3
    captured = capsys.readouterr()
    assert "Compile events" in captured.out  # the report is printed all the same
    assert "1 finding(s) at or above warning (--fail-on warning): exit 3" in captured.err
    assert main(["report", str(log_path), "--json", "--fail-on", "warning"]) == 3
    with pytest.raises(SystemExit):
        main(["report", str(log_path), "--fail-on", "info"])


def test_help_documents_the_exit_codes_and_json_keys(capsys):
    for argv in (["--help"], ["report", "--help"]):
        with pytest.raises(SystemExit) as exc:
            main(argv)
        assert exc.value.code == 0
        out = capsys.readouterr().out
        assert "exit codes:" in out and "3  report --fail-on SEVERITY" in out
    assert "worst_severity" in out and "--limit N" in out and "LOG [LOG ...]" in out


def test_the_printed_report_is_120_wide_and_free_of_escapes(tmp_path, capsys):
    bad = "\x1b[2J\x1b]8;;http://evil.example\x1b\\click\x1b]8;;\x1b\\ over\rwrite \u202eexe.txt"
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 2, "device": bad,
                             "backend": bad}, path=tmp_path / "log.jsonl")
    for i in range(3):
        log.append(CompileEvent(function=f"forward{bad}" * 3, location=f"{bad}.py:1",
                                started_at=float(i), kind="first" if i == 0 else "recompile",
                                changed=bad * 4, reasons=[bad], context=bad,
                                input_shapes={bad: [1, i + 1]}, rank=i % 2))
    rank1 = CompileLog([dataclasses.replace(e, rank=5) for e in log.events],
                       header=log.header, path=tmp_path / "r5.jsonl")
    assert main(["report", str(log.path), str(rank1.path)]) == 0
    out = capsys.readouterr().out
    assert max(len(line) for line in out.splitlines()) <= 120
    assert not re.search("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", out)
    assert "click" in out and "exe.txt" in out
    assert main(["report", str(log.path), "--json"]) == 0
    raw = capsys.readouterr().out
    assert raw.isascii() and json.loads(raw)["events"][0]["context"] == bad  # escaped, lossless


def test_error_messages_are_terminal_safe(tmp_path, capsys):
    assert main(["report", str(tmp_path / "x\x1b]0;title\x07\u202e.jsonl")]) == 2
    err = capsys.readouterr().err
    assert "not found" in err and "\x1b" not in err and "\u202e" not in err


# ---- hostile logs: names and keys with escapes, numbers out of range, a closed pipe ------------
CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069"
                      "\u2028\u2029]")


def _no_constant(name: str):
    raise ValueError(f"{name} is not JSON")


def _append(path, *lines: dict) -> None:
    with path.open("a", encoding="utf-8") as fh:
        fh.writelines(json.dumps(line) + "\n" for line in lines)


def test_a_file_name_and_a_key_with_escapes_reach_no_terminal(tmp_path, capsys):
    path = tmp_path / "log\x1b]0;x\x07\u202e.jsonl"
    write_log(path)
    _append(path, {"update": 0, "\u001b]0;title\u0007": 1})
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert main(["report", str(path), "--chrome-trace", str(tmp_path / "t\x1b[31m.json")]) == 0
    captured = capsys.readouterr()
    said = captured.out + captured.err + "".join(str(w.message) for w in caught)
    assert "line 5 ('\\x1b]0;title\\x07': an update line may set only" in said
    assert not CONTROLS.search(said), repr(said)


def _out_of_range_log(path) -> None:
    write_log(path)
    good = CompileEvent(function="forward", kind="recompile", started_at=60.0, duration_s=1.0,
                        input_shapes={"input_ids": [2, 16]}).to_dict()
    _append(path, *({**good, "seq": 3 + i, **fields} for i, fields in enumerate([
        {"duration_s": 1e308}, {"started_at": 1e308}, {"started_at": -1e308},
        {"neff_compile_s": 1.7e308}, {"calls": 10**300, "kind": "eager_fallback"},
        {"input_shapes": {"input_ids": [2, 10**300]}}, {"metrics": {"x": 10**300}}])),
            {"wall_time_s": 1e308})


def test_numbers_out_of_range_never_reach_the_outputs(tmp_path, capsys):
    """Finite numbers near 1e308 once gave report --json an Infinity (not JSON), made --png and
    --chrome-trace exit 2 with matplotlib's and json's words, and ran text lines to 659 columns."""
    from neuronkit.views.charts import dashboard_chart, save_png

    path, png, trace = tmp_path / "log.jsonl", tmp_path / "t.png", tmp_path / "t.json"
    _out_of_range_log(path)
    assert main(["report", str(path), "--json", "--png", str(png), "--chrome-trace",
                 str(trace)]) == 0
    out, err = capsys.readouterr()
    assert "skipped 1 bad line: line 12 (wall_time_s" in err  # the values go, their events stay
    assert "dropped 7 bad field values of 7 events" in err and "line 5 event 3 (duration_s" in err
    data = json.loads(out, parse_constant=_no_constant)
    assert data["counts"]["events"] == 10 and data["wall_time_s"] == 20.0
    json.loads(trace.read_text(), parse_constant=_no_constant)
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert main(["report", str(path), "--limit", "all"]) == 0
    with pytest.warns(UserWarning, match="dropped 7 bad field values"):
        save_png(dashboard_chart(CompileLog.load(path)), tmp_path / "dashboard.png")
    assert max(map(len, capsys.readouterr().out.splitlines())) <= 120


def test_a_log_at_every_bound_renders_everywhere(tmp_path, capsys):
    """The bounds are where a number stops being a measurement; up to them every output works:
    JSON stays JSON, the trace and both charts draw, and nothing overflows on the way."""
    from neuronkit.events.schema import MAX_COUNT, MAX_SECONDS, MAX_TIME
    from neuronkit.views.charts import dashboard_chart, save_png

    path = tmp_path / "log.jsonl"
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 2, "device": "cpu",
                             "wall_time_s": MAX_SECONDS}, path=path)
    for i, (start, kind) in enumerate([(-MAX_TIME, "first"), (MAX_TIME, "recompile"),
                                       (0.0, "kernels"), (1.0, "eager_fallback"),
                                       (2.0, "limit_hit")]):
        log.append(CompileEvent(
            seq=MAX_COUNT - i, function="forward", started_at=start, duration_s=MAX_SECONDS,
            neff_compile_s=MAX_SECONDS, neff_cache="compiled", kind=kind, rank=MAX_COUNT,
            graph_count=MAX_COUNT, calls=MAX_COUNT, kernels=MAX_COUNT, ops={"aten::mm": MAX_COUNT},
            input_shapes={"x": [MAX_COUNT, i]}, metrics={"a": 2**63 - 1, "b": -1.7e308}))
    png, trace = tmp_path / "t.png", tmp_path / "t.json"
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # no skipped line, no overflow in numpy or matplotlib
        assert main(["report", str(path), "--json", "--png", str(png), "--chrome-trace",
                     str(trace)]) == 0
        data = json.loads(capsys.readouterr().out, parse_constant=_no_constant)
        assert main(["report", str(path), "--limit", "all"]) == 0
        text = capsys.readouterr().out
        save_png(dashboard_chart(CompileLog.load(path)), tmp_path / "dashboard.png")
    assert data["counts"]["events"] == 5
    json.loads(trace.read_text(), parse_constant=_no_constant)
    assert png.read_bytes().startswith(PNG_SIGNATURE)
    assert max(map(len, re.findall(r"[\d.,]+", text))) <= 20  # no number wider than 16 digits
    assert max(map(len, text.splitlines())) < 140  # (126: 16-digit columns keep every digit)
