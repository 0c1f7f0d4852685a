"""Which run a command reads: no path is the latest run here (``neuronkit-logs/<date>-<time>`` or
``compile-log.jsonl``), a folder of runs is its latest, a folder of separate logs is listed and
refused, by one rule (``log/runs.py``) that report, watch, ``open_log`` and ``nk.follow`` share;
``neuronkit cache`` on a fresh machine; the help of ``demo`` and ``report``; README's newcomer path:
``neuronkit record -- python script.py`` then ``neuronkit report``."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import neuronkit as nk
from neuronkit.apps import record as record_module
from neuronkit.apps.cli import build_parser, main
from neuronkit.apps.record import record
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.runs import RECORD_HINT, classify, describe

HINT = "neuronkit record -- python your_script.py"


def write_log(path: Path, functions: tuple[str, ...] = ("f",), rank: int | None = None,
              when: float | None = None) -> Path:
    """A closed log of one first compile per function; ``when``: its (and its folder's) mtime."""
    path.parent.mkdir(parents=True, exist_ok=True)
    header = {"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu", "backend": "eager"}
    log = CompileLog(header=header if rank is None else {**header, "rank": rank}, path=path)
    for i, name in enumerate(functions):
        log.append(CompileEvent(function=name, kind="first", started_at=100.0 + i, duration_s=1.0))
    log.set_wall_time(10.0)
    log.release()
    if when is not None:
        os.utime(path, (when, when))
        os.utime(path.parent, (when, when))
    return path


def two_runs(root: Path) -> tuple[Path, Path]:
    """neuronkit-logs with an older run (function "old") and a newer one (function "new")."""
    older, newer = root / "neuronkit-logs" / "20240101-100000", root / "neuronkit-logs" / "20240102-100000"
    write_log(older / "node.pid11.jsonl", ("old",), when=1_000_000.0)
    write_log(newer / "node.rank0.jsonl", ("new",), rank=0, when=2_000_000.0)
    write_log(newer / "node.rank1.jsonl", ("new",), rank=1, when=2_000_000.0)
    os.utime(newer, (2_000_000.0, 2_000_000.0))
    return older, newer


# ---- no path: the latest run here -----------------------------------------------------------

def test_report_with_no_path_and_nothing_here_says_what_to_run(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("neuronkit report: error: no run to read here") and HINT in err
    assert "Traceback" not in err and RECORD_HINT == HINT
    assert main(["watch", "--once"]) == 2
    assert "neuronkit watch: error: no run to read here" in capsys.readouterr().err


def test_report_with_no_path_reads_the_latest_run_and_says_which(tmp_path, monkeypatch, capsys):
    _, newer = two_runs(tmp_path)
    monkeypatch.chdir(tmp_path)
    assert main(["report", "--json"]) == 0
    out, err = capsys.readouterr()
    data = json.loads(out)                                   # stdout stays one JSON object
    assert data["logs"] == ["neuronkit-logs/20240102-100000"] and data["counts"]["events"] == 2
    assert {e["function"] for e in data["events"]} == {"new"} and data["ranks"] == [0, 1]
    assert err.splitlines() == ["neuronkit report: no path given: reading the latest run, "
                                "neuronkit-logs/20240102-100000 (2 rank logs); 1 earlier run(s) "
                                "in neuronkit-logs"]
    assert main(["report"]) == 0                             # text: the note on stderr too
    out, err = capsys.readouterr()
    assert out.startswith("neuronkit compile report") and "reading the latest run" in err


def test_compile_log_jsonl_is_read_when_it_is_the_newest(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    write_log(tmp_path / "compile-log.jsonl", ("mine",), when=3_000_000.0)
    assert main(["report", "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["logs"] == ["compile-log.jsonl"] and "no runs in neuronkit-logs" in err
    two_runs(tmp_path)
    assert main(["report", "--json"]) == 0                   # newer than both runs: still it
    out, err = capsys.readouterr()
    assert json.loads(out)["logs"] == ["compile-log.jsonl"] and "newer than the runs" in err
    os.utime(tmp_path / "compile-log.jsonl", (500.0, 500.0))
    assert main(["report", "--json"]) == 0                   # older: the latest run
    assert json.loads(capsys.readouterr().out)["logs"] == ["neuronkit-logs/20240102-100000"]


def test_a_folder_of_runs_reads_its_latest_and_names_the_others(tmp_path, capsys):
    older, newer = two_runs(tmp_path)
    runs = tmp_path / "neuronkit-logs"
    assert main(["report", str(runs), "--json"]) == 0
    out, err = capsys.readouterr()
    assert json.loads(out)["logs"] == [str(newer)]
    assert (f"neuronkit report: {runs} is a folder of 2 run(s): reading the latest, {newer} "
            f"(2 rank logs); the others, newest first: {older} (1 process log)") in err
    assert main(["watch", str(runs), "--once"]) == 0
    out, err = capsys.readouterr()
    assert f"reading the latest, {newer}" in err and "Ranks" in out
    with pytest.raises(ValueError, match=r"is a folder of 2 runs, newest first: .*20240102"):
        nk.open_log(runs)                                    # the API asks: it names them
    with pytest.raises(ValueError, match=r"Name one, e\.g\. .*20240102-100000"):
        nk.follow(runs)


def test_the_latest_run_with_no_log_yet_is_said(tmp_path, monkeypatch, capsys):
    two_runs(tmp_path)
    (tmp_path / "neuronkit-logs" / "20240103-100000").mkdir()  # record made it; nothing compiled
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 2
    err = capsys.readouterr().err
    assert "reading the latest run, neuronkit-logs/20240103-100000 (no log yet); 2 earlier" in err
    assert "holds no compile log" in err and HINT in err


# ---- one rule for a folder: report, watch, open_log and nk.follow ----------------------------

def test_a_folder_of_separate_logs_is_listed_not_merged(tmp_path, capsys):
    """``neuronkit demo --log-dir DIR`` writes DIR/naive.jsonl and DIR/bucketed.jsonl: two runs."""
    write_log(tmp_path / "naive.jsonl", ("forward",) * 3)
    write_log(tmp_path / "bucketed.jsonl", ("forward",))
    for command in (["report", str(tmp_path)], ["watch", str(tmp_path), "--once"]):
        assert main(command) == 2, command
        err = capsys.readouterr().err
        assert f"neuronkit {command[0]}: error: {tmp_path} is a folder" in err
        assert "are separate runs" in err and "bucketed.jsonl, naive.jsonl" in err
        assert f"Name one, e.g. {tmp_path / 'bucketed.jsonl'}" in err
    with pytest.raises(ValueError, match=r"separate runs.*bucketed\.jsonl, naive\.jsonl"):
        nk.follow(tmp_path)
    assert main(["report", str(tmp_path / "naive.jsonl")]) == 0   # one named: read


def test_a_log_that_appears_beside_the_followed_one_is_refused_at_the_next_poll(tmp_path):
    write_log(tmp_path / "naive.jsonl")
    follower = nk.follow(tmp_path)                           # one log in the folder: it
    assert [e.function for e in follower.poll()] == ["f"]
    write_log(tmp_path / "bucketed.jsonl")
    with pytest.raises(ValueError, match="separate runs"):
        follower.poll()


def test_follow_and_open_log_read_the_same_files_of_a_run(tmp_path):
    """Rank logs make the run; an unranked process log beside them (a helper process) is neither
    merged by ``open_log`` nor followed as one more rank."""
    write_log(tmp_path / "node.rank0.jsonl", ("a",), rank=0)
    write_log(tmp_path / "node.rank1.jsonl", ("b",), rank=1)
    write_log(tmp_path / "node.pid77.jsonl", ("helper",))
    found = classify(tmp_path)
    assert found.kind == "ranks" and [p.name for p in found.files] == ["node.rank0.jsonl",
                                                                      "node.rank1.jsonl"]
    follower = nk.follow(tmp_path)
    follower.poll()
    opened = nk.open_log(tmp_path)
    assert sorted(e.function for e in follower.log.events) == ["a", "b"]
    assert sorted(e.function for e in opened.events) == ["a", "b"]
    assert set(follower.logs) == set(found.files) and follower.finished


def test_folders_that_are_one_run(tmp_path, capsys):
    single = tmp_path / "single"
    write_log(single / "compile-log.jsonl", ("g", "h"))
    assert classify(single).kind == "single" and len(nk.open_log(single).events) == 2
    assert main(["report", str(single)]) == 0 and "2 events" in capsys.readouterr().out
    procs = tmp_path / "procs"
    write_log(procs / "host.pid5.jsonl", ("p",))
    assert classify(procs).kind == "processes" and describe(procs) == "1 process log"
    trace = tmp_path / "trace"
    trace.mkdir()
    (trace / "dedicated_log_torch_trace_rank_0_x.log").write_text("")
    assert classify(trace).kind == "trace"
    with pytest.raises(ValueError, match="torch trace files.*neuronkit report"):
        nk.follow(trace)
    empty = tmp_path / "empty"
    empty.mkdir()
    assert nk.follow(empty).poll() == []                     # a run not started yet: waited for
    assert main(["report", str(empty)]) == 2
    assert "holds no compile log" in capsys.readouterr().err


# ---- neuronkit cache on a fresh machine; help texts; record's last line ---------------------

def test_cache_with_no_cache_yet_is_no_error_but_a_missing_dir_named_is(tmp_path, monkeypatch,
                                                                         capsys):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff_cache"))
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'legacy'}")
    for extra in ([], ["--prune"]):
        assert main(["cache", *extra]) == 0, extra
        out = capsys.readouterr().out
        assert f"no folder at {tmp_path / 'neff_cache'}" in out and "Nothing has been compiled" in out
    assert main(["cache", str(tmp_path / "typo")]) == 2
    assert f"no folder at {tmp_path / 'typo'}. Check the path" in capsys.readouterr().out
    assert main(["cache", str(tmp_path / "typo"), "--prune"]) == 2


def test_help_says_what_demo_and_report_take(capsys):
    parser = build_parser()
    sub = parser._subparsers._group_actions[0].choices
    demo = sub["demo"].format_help()
    assert "--max-new-tokens N" in demo and "new tokens generated per prompt" in demo
    assert "naive.jsonl" in demo
    report = " ".join(sub["report"].format_help().split())
    assert "usage: neuronkit report [LOG [LOG ...]]" in report
    assert "With no LOG: the latest run under ./neuronkit-logs" in report
    assert "or a folder: one run (per-rank *.rank<N>.jsonl" in report
    assert "a folder of runs (neuronkit-logs) means its latest run" in report
    cache = " ".join(sub["cache"].format_help().split())
    assert "exit 0" in cache and "exit 2" in cache
    watch = " ".join(sub["watch"].format_help().split())
    assert "[DIR]" in watch and "the latest run" in watch


def test_record_says_when_nothing_compiled_and_runs_of_one_second_get_a_folder_each(
        tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setattr(record_module.time, "strftime", lambda fmt: "20240101-100000")
    for _ in range(2):                                       # both started "in the same second"
        assert record([sys.executable, "-c", "pass"]) == 0   # no torch: nothing recorded
    err = capsys.readouterr().err
    runs = sorted(p.name for p in (tmp_path / "neuronkit-logs").iterdir())
    assert runs == ["20240101-100000", "20240101-100000-2"]
    assert "neuronkit record: no compile recorded in neuronkit-logs/20240101-100000-2" in err
    assert classify(tmp_path / "neuronkit-logs").runs[0].name == "20240101-100000-2"


@pytest.mark.slow  # a fresh Python importing torch and compiling (~6-10 s on 2 cores)
def test_readme_newcomer_records_a_script_then_reports_with_no_path(tmp_path, monkeypatch,
                                                                      capsys):
    (tmp_path / "your_script.py").write_text(textwrap.dedent("""
        import torch
        double = torch.compile(lambda x: x * 2, backend="eager")
        for n in (2, 3):
            double(torch.ones(n))
    """))
    done = subprocess.run([sys.executable, "-m", "neuronkit", "record", "--", sys.executable,
                           "your_script.py"], cwd=tmp_path, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    [run] = (tmp_path / "neuronkit-logs").iterdir()
    assert f"1 log(s) in neuronkit-logs/{run.name}. View them: neuronkit report |" in done.stderr
    monkeypatch.chdir(tmp_path)
    assert main(["report"]) == 0
    out, err = capsys.readouterr()
    assert f"reading the latest run, neuronkit-logs/{run.name} (1 process log)" in err
    assert out.startswith("neuronkit compile report: device cpu, backend eager, 2 events")
