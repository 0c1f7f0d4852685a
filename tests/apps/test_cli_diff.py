"""``neuronkit diff [A] [B]``: which runs it reads, its text, --json, --html, every --fail-on gate
and exit code; the demo's naive and bucketed runs on one screen."""
from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog


def write(path: Path, *events: CompileEvent, backend: str = "inductor", when: float | None = None
          ) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    log = CompileLog(events, header={"format": FORMAT, "version": FORMAT_VERSION,
                                     "device": "cpu", "backend": backend})
    log.set_wall_time(10.0)
    log.save(path)
    log.release()
    if when is not None:
        os.utime(path, (when, when))
        os.utime(path.parent, (when, when))
    return path


def ev(shape: int = 4, state: str | None = None, dur: float = 1.0, **more: Any) -> CompileEvent:
    lookups = [{"cache": "fx_graph", "key": f"k{shape}", "state": state}] if state else []
    return CompileEvent(function="f", location="/m/model.py:3", kind="first", duration_s=dur,
                        input_shapes={"x": [shape]}, cache_key=lookups, backend="inductor", **more)


@pytest.fixture
def two(tmp_path) -> tuple[str, str]:
    a = write(tmp_path / "a.jsonl", ev(4, "hit"), ev(8, "miss"))
    b = write(tmp_path / "b.jsonl", ev(4, "miss"), ev(16, "miss", dur=3.0))
    return str(a), str(b)


def test_diff_prints_the_diff(two, capsys):
    assert main(["diff", *two]) == 0
    out = capsys.readouterr().out
    assert out.startswith("a -> b\nb compiled the same number of graphs as a: 2\n")
    assert "new in b (1):\n  f x 16, 3.00 s" in out and "gone from b (1):\n  f x 8, 1.00 s" in out
    assert "built in b, loaded in a (1):" in out


def test_json(two, capsys):
    assert main(["diff", *two, "--json"]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["format"] == "neuronkit-diff" and data["version"] == 1
    assert data["logs"] == list(two) and data["names"] == ["a", "b"]
    assert [g["input_shapes"] for g in data["new"]] == [{"x": [16]}]


@pytest.mark.parametrize("gate, code, said", [
    ("new-graphs", 1, "--fail-on new-graphs: 1 graph(s) new in b: exit 1"),
    ("builds", 1, "--fail-on builds: b built 1 graph(s) that a also had: exit 1"),
    ("slower=50", 1, "--fail-on slower=50: compile s 2.00 -> 4.00 (100% more): exit 1"),
    ("slower=100", 0, ""),
])
def test_each_gate(two, capsys, gate, code, said):
    assert main(["diff", *two, "--fail-on", gate]) == code
    err = capsys.readouterr().err
    assert (said in err) if said else err == ""


def test_gates_that_pass_and_several_gates(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", ev(4, "miss"), ev(8, "miss"))
    b = write(tmp_path / "b.jsonl", ev(4, "hit"), ev(8, "hit", dur=0.5))
    argv = ["diff", str(a), str(b), "--fail-on", "new-graphs", "--fail-on", "builds",
            "--fail-on", "slower=0"]
    assert main(argv) == 0 and capsys.readouterr().err == ""
    assert main(["diff", str(b), str(a), "--fail-on", "builds", "--fail-on", "slower=10"]) == 1
    err = capsys.readouterr().err
    assert "--fail-on builds: a built 2" in err and "--fail-on slower=10:" in err


def test_builds_of_logs_without_lookups_is_bad_input(tmp_path, capsys):
    a = write(tmp_path / "a.jsonl", ev(4), backend="eager")
    b = write(tmp_path / "b.jsonl", CompileEvent(function="f", kind="first", backend="eager",
                                                 duration_s=1.0), backend="eager")
    assert main(["diff", str(a), str(b), "--fail-on", "builds"]) == 2
    err = capsys.readouterr().err
    assert "error: --fail-on builds:" in err and "backend eager caches nothing" in err


@pytest.mark.parametrize("bad", ["slower=abc", "slower=-5", "slower", "faster=3", "builds=2"])
def test_a_bad_gate_exits_2(two, capsys, bad):
    with pytest.raises(SystemExit) as exit_:
        main(["diff", *two, "--fail-on", bad])
    assert exit_.value.code == 2 and "--fail-on" in capsys.readouterr().err


def test_a_missing_log_exits_2(two, tmp_path, capsys):
    assert main(["diff", two[0], str(tmp_path / "nope.jsonl")]) == 2
    assert "neuronkit diff: error:" in capsys.readouterr().err
    assert main(["diff", two[0], two[0]]) == 2
    assert "the same run" in capsys.readouterr().err


def test_no_path_is_the_two_latest_runs_and_one_path_is_it_vs_the_latest(tmp_path, monkeypatch, capsys):
    runs = tmp_path / "neuronkit-logs"
    write(runs / "20240101-100000" / "compile-log.jsonl", ev(1), when=1_700_000_000)
    write(runs / "20240102-100000" / "compile-log.jsonl", ev(2), when=1_700_000_100)
    monkeypatch.chdir(tmp_path)
    assert main(["diff", "--json"]) == 0
    captured = capsys.readouterr()
    assert json.loads(captured.out)["logs"] == [str(Path("neuronkit-logs") / "20240101-100000"),
                                                str(Path("neuronkit-logs") / "20240102-100000")]
    assert "comparing the two latest runs" in captured.err
    other = write(tmp_path / "other.jsonl", ev(3))
    assert main(["diff", str(other), "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["logs"][1].endswith("20240102-100000")


def test_no_path_with_one_run_exits_2(tmp_path, monkeypatch, capsys):
    write(tmp_path / "neuronkit-logs" / "20240101-100000" / "compile-log.jsonl", ev(1))
    monkeypatch.chdir(tmp_path)
    assert main(["diff"]) == 2
    assert "need two to compare" in capsys.readouterr().err


def test_html_holds_the_diff_escaped(tmp_path, capsys):
    evil = "f<script>alert(1)</script>"
    a = write(tmp_path / "a.jsonl", CompileEvent(function=evil, kind="first", duration_s=1.0))
    b = write(tmp_path / "b.jsonl", CompileEvent(function=evil, kind="first", duration_s=1.0,
                                                 input_shapes={"x": [2]}))
    page = tmp_path / "out.html"
    assert main(["diff", str(a), str(b), "--html", str(page)]) == 0
    html = page.read_text()
    assert "<h2>a vs b</h2>" in html and 'class="nk-diff"' in html
    assert "<script>" not in html and "f&lt;script&gt;" in html
    assert f"HTML report written to {page}" in capsys.readouterr().out


def test_the_help_names_the_exit_codes(capsys):
    with pytest.raises(SystemExit):
        main(["diff", "--help"])
    out = capsys.readouterr().out
    assert "exit codes:" in out and "slower=PCT" in out


@pytest.mark.slow
def test_the_demo_runs_diff_on_one_screen(no_neuron, tmp_path, capsys, monkeypatch):
    """The demo's naive vs bucketed runs (backend eager): the graphs fewer, on 24 lines of 100."""
    monkeypatch.setenv("COLUMNS", "100")
    assert main(["demo", "--log-dir", str(tmp_path)]) == 0
    capsys.readouterr()
    naive, bucketed = (CompileLog.load(tmp_path / f"{n}.jsonl") for n in ("naive", "bucketed"))
    ga, gb = (sum(e.kind in ("first", "recompile") for e in log.events) for log in (naive, bucketed))
    assert ga > gb
    assert main(["diff", str(tmp_path / "naive.jsonl"), str(tmp_path / "bucketed.jsonl")]) == 0
    out = capsys.readouterr().out
    assert f"bucketed compiled {ga - gb} graphs fewer than naive ({ga} -> {gb})" in out
    lines = out.rstrip("\n").splitlines()
    assert len(lines) <= 24 and max(map(len, lines)) <= 100
