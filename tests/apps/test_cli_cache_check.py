"""`neuronkit cache check [RUN] [--cache DIR] [--json]` through neuronkit.apps.cli.main: exit codes
0 / 1 / 2, JSON, a missing --cache folder, the latest run, and `neuronkit cache` left working."""
from __future__ import annotations

import json
from pathlib import Path

from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog

FX1 = "frjfklwtymvlylugkbjwjtgm6jphfxaxovdtuffz37yuis2x6axb"
FX2 = "fq62f2e6sjw2kv7y4u4u2bfyqcjb2ksvladtjrhvhytitafekbkj"


def write_log(path: Path, keys: list[str | None], backend: str = "inductor") -> Path:
    log = CompileLog(path=path)
    for i, key in enumerate(keys):
        lookups = [] if key is None else [{"cache": "fx_graph", "key": key, "state": "miss"}]
        log.append(CompileEvent(function="forward", kind="first" if i == 0 else "recompile",
                                backend=backend, input_shapes={"x": [4, 8 * (i + 1)]},
                                cache_key=lookups))
    log.release()
    return path


def store_fx(cache: Path, key: str) -> None:
    folder = cache / "fxgraph" / key[1:3] / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "entry").write_bytes(b"pickled")


def test_exit_0_when_every_graph_loads_and_1_when_one_builds(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", [FX1, FX2])
    cache = tmp_path / "cache"
    store_fx(cache, FX1)
    assert main(["cache", "check", str(log), "--cache", str(cache)]) == 1
    out = capsys.readouterr().out
    assert "1 of 2 graphs will load; 1 will build:" in out and FX2[:12] in out
    store_fx(cache, FX2)
    assert main(["cache", "check", str(log), "--cache", str(cache)]) == 0
    assert "2 of 2 graphs will load." in capsys.readouterr().out


def test_exit_2_when_nothing_can_be_judged(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", [None, None], backend="eager")
    (tmp_path / "cache").mkdir()
    assert main(["cache", "check", str(log), "--cache", str(tmp_path / "cache")]) == 2
    out = capsys.readouterr().out
    assert "nothing to judge" in out and "backend eager compiles nothing" in out


def test_a_missing_cache_folder_is_exit_2_with_a_plain_message(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", [FX1])
    assert main(["cache", "check", str(log), "--cache", str(tmp_path / "nope")]) == 2
    captured = capsys.readouterr()
    assert captured.out == ""
    assert captured.err.startswith("neuronkit cache check: error: --cache ")
    assert "no such folder" in captured.err and "Traceback" not in captured.err


def test_a_missing_log_is_exit_2(tmp_path, capsys):
    assert main(["cache", "check", str(tmp_path / "nope.jsonl")]) == 2
    assert "error" in capsys.readouterr().err


def test_json(tmp_path, capsys):
    log = write_log(tmp_path / "run.jsonl", [FX1, FX2, None])
    cache = tmp_path / "cache"
    store_fx(cache, FX1)
    assert main(["cache", "check", str(log), "--cache", str(cache), "--json"]) == 1
    data = json.loads(capsys.readouterr().out)
    assert data["logs"] == [str(log)] and data["exit_code"] == 1
    assert data["counts"]["load"] == 1 and data["counts"]["build"] == 1
    assert data["counts"]["unknown"] == 1
    assert data["caches"] == [{"family": "inductor", "dir": str(cache), "source": "from --cache",
                               "exists": True}]


def test_no_run_reads_the_latest_run_and_the_default_folder(tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ind"))
    write_log(tmp_path / "compile-log.jsonl", [FX1])
    store_fx(tmp_path / "ind", FX1)
    assert main(["cache", "check"]) == 0
    captured = capsys.readouterr()
    assert "1 of 1 graph will load." in captured.out
    assert "(from TORCHINDUCTOR_CACHE_DIR)" in captured.out
    assert "compile-log.jsonl" in captured.err  # which log was read is said


def test_cache_command_still_summarises_a_folder(tmp_path, capsys):
    assert main(["cache", str(tmp_path)]) == 0
    assert capsys.readouterr().out.strip()
    check = tmp_path / "check"  # `cache check` is the new command; `cache ./check` is a folder
    check.mkdir()
    assert main(["cache", str(check)]) == 0


def test_help_names_the_exit_codes(capsys):
    try:
        main(["cache", "check", "--help"])
    except SystemExit as exc:
        assert exc.code == 0
    out = capsys.readouterr().out
    assert out.startswith("usage: neuronkit cache check")
    assert "exit codes:" in out and "  1  some graph will build" in out
