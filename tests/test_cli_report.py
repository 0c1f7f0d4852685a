"""`neuronkit report LOG --png F --chrome-trace F` through neuronkit.views.cli.main."""
from __future__ import annotations

import json

from neuronkit.views.charts import PNG_SIGNATURE
from neuronkit.views.cli import main
from neuronkit.events import CompileEvent, CompileLog


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
                          "3.00 s compiling, wall 20.0 s")
    for heading in ("Compile events", "Per function", "Advice"):
        assert f"{heading}\n{'=' * len(heading)}" in out
    assert "input_ids dim 1 took 3 values (16..80) -> 3 graphs" in out
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
