"""check_cache(): will each graph of a recorded run load from a cache folder, on hand-built logs
(lookups as the recorder writes them: i40 data format) and fake cache folders; plus one real
inductor compile (slow)."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from helpers.logs import make_log
from neuronkit.advice.cache_check import check_cache
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog

FX1 = "frjfklwtymvlylugkbjwjtgm6jphfxaxovdtuffz37yuis2x6axb"
FX2 = "fq62f2e6sjw2kv7y4u4u2bfyqcjb2ksvladtjrhvhytitafekbkj"
FX3 = "f5ujs3kvmvyoikioxyihmcp4sj4lyjilvcuuhtbuw3yq7blyugwe"
PK1, PK2 = "a" * 32, "0123456789abcdef" * 2


def fx(key: str | None, state: str = "miss", **extra) -> dict:
    return {"cache": "fx_graph", "key": key, "state": state, **extra}


def neff(pk: str | None, state: str = "compiled") -> dict:
    return {"cache": "neff", "key": "b" * 64 + "_trn2_2_-O2_", "persistent_key": pk,
            "state": state}


def event(lookups: list[dict], n: int = 8, kind: str = "first", rank: int = 0,
          function: str = "forward", backend: str = "inductor") -> CompileEvent:
    return CompileEvent(function=function, kind=kind, rank=rank, backend=backend,
                        input_shapes={"x": [4, n]}, cache_key=lookups)


def store_fx(cache: Path, key: str) -> None:
    folder = cache / "fxgraph" / key[1:3] / key
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "entry").write_bytes(b"pickled")


def store_neff(cache: Path, pk: str) -> None:
    path = cache / pk[:2] / pk[2:4] / f"{pk}.neff"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"NEFF")


def verdicts(check) -> dict[str, str]:
    return {g.key or g.reason: g.verdict for g in check.graphs}


def test_load_and_build_by_the_fx_key(tmp_path):
    store_fx(tmp_path, FX1)
    log = make_log([event([fx(FX1)]), event([fx(FX2)], n=16, kind="recompile")])
    check = check_cache(log, tmp_path)
    assert verdicts(check) == {FX1: "load", FX2: "build"}
    assert check.exit_code == 1
    text = check.text()
    assert "1 of 2 graphs will load; 1 will build:" in text
    assert f"forward [x 4x16]  fx_graph key {FX2[:12]}..." in text
    assert f"inductor cache: {tmp_path} (from --cache)" in text
    store_fx(tmp_path, FX2)
    check = check_cache(log, tmp_path)
    assert check.exit_code == 0 and "2 of 2 graphs will load." in check.text()


def test_an_aot_hit_is_judged_by_its_fx_entry(tmp_path):
    aot = {"cache": "aot_autograd", "key": "a" + FX1[1:], "state": "hit"}
    (tmp_path / "aotautograd" / aot["key"]).mkdir(parents=True)
    (tmp_path / "aotautograd" / aot["key"] / "entry").write_bytes(b"x")
    log = make_log([event([aot, fx(FX1, "hit")])])
    assert verdicts(check_cache(log, tmp_path)) == {FX1: "build"}  # AOT entry alone: a miss
    only_aot = check_cache(make_log([event([aot])]), tmp_path)
    assert only_aot.graphs[0].verdict == "unknown" and "FX graph entry" in only_aot.graphs[0].reason


def test_neff_by_its_persistent_key(tmp_path):
    store_neff(tmp_path, PK1)
    empty = tmp_path / PK2[:2] / PK2[2:4] / f"{PK2}.neff"
    empty.parent.mkdir(parents=True)
    empty.write_bytes(b"")  # a zero-size NEFF reads as a miss
    log = make_log([event([neff(PK1, "disk_hit")], backend="neuron"),
                    event([neff(PK2)], n=16, backend="neuron")])
    check = check_cache(log, tmp_path)
    assert verdicts(check) == {PK1: "load", PK2: "build"}
    assert check.dirs[0].family == "neff" and len(check.dirs) == 1
    assert "NEFF cache: " in check.text() and f"neff key {PK2[:12]}..." in check.text()


def test_ranks_sharing_a_key_count_once(tmp_path):
    events = [event([fx(FX1)], rank=r) for r in range(4)]
    events += [event([fx(FX2)], n=16, kind="recompile", rank=r) for r in range(4)]
    events += [event([fx(FX1, "hit")], rank=0)]  # the same key again: still one graph
    check = check_cache(make_log(events), tmp_path)
    assert len(check.graphs) == 2 and check.ranks == [0, 1, 2, 3] and check.compiles == 9
    first = check.graphs[0]
    assert first.ranks == [0, 1, 2, 3] and first.events == 5
    assert "0 of 2 graphs will load; 2 will build:" in check.text()
    assert "(4 ranks)" in check.text() and "9 compile(s) on 4 ranks" in check.text()


def test_a_bypass_is_never_cached_with_its_reason(tmp_path):
    log = make_log([event([fx(None, "bypass", reason="Unsupported: freezing")]),
                    event([fx(FX1, "hit")], n=16)])
    store_fx(tmp_path, FX1)
    check = check_cache(log, tmp_path)
    assert [g.verdict for g in check.graphs] == ["never", "load"]
    assert check.exit_code == 1
    text = check.text()
    assert "1 of 2 graphs will load; 1 will build:" in text and "\n1 of them is never cached" in text
    assert "forward [x 4x8]: Unsupported: freezing" in text


def test_cannot_tell_without_lookups(tmp_path):
    log = make_log([event([], backend="eager"), event([], n=16, backend="inductor"),
                    event([neff(None)], n=32, backend="neuron")])
    check = check_cache(log, tmp_path)
    assert [g.verdict for g in check.graphs] == ["unknown"] * 3
    reasons = [g.reason for g in check.graphs]
    assert "backend eager compiles nothing" in reasons[0]
    assert "before neuronkit recorded them" in reasons[1]
    assert "persistent key was not recorded" in reasons[2]
    assert check.exit_code == 2
    assert "nothing to judge" in check.text() and "backend inductor" in check.text()


def test_unknown_graphs_do_not_fail_a_warm_cache(tmp_path):
    store_fx(tmp_path, FX1)
    check = check_cache(make_log([event([fx(FX1)]), event([], n=16)]), tmp_path)
    assert check.exit_code == 0
    assert "1 of 1 graph will load." in check.text() and "1 more cannot be told" in check.text()


def test_only_build_kinds_count(tmp_path):
    log = make_log([event([fx(FX1)], kind="limit_hit"), event([fx(FX1)], kind="graph_break")])
    check = check_cache(log, tmp_path)
    assert check.compiles == 0 and check.exit_code == 2
    assert "the log holds no compiled graph" in check.text()


def test_backward_graph_has_its_own_key(tmp_path):
    store_fx(tmp_path, FX1)
    log = make_log([event([fx(FX1)]), event([fx(FX3)], kind="backward")])
    check = check_cache(log, tmp_path)
    assert verdicts(check) == {FX1: "load", FX3: "build"}
    assert "forward (backward) [x 4x8]" in check.text()


def test_list_of_builders_is_bounded(tmp_path):
    keys = [f"f{i:03d}" + "x" * 48 for i in range(14)]
    check = check_cache(make_log([event([fx(k)], n=i + 1) for i, k in enumerate(keys)]), tmp_path)
    text = check.text(most=10)
    assert "0 of 14 graphs will load; 14 will build:" in text and "  and 4 more" in text
    assert text.count("fx_graph key") == 10


def test_default_folders_are_the_lookups_caches(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCHINDUCTOR_CACHE_DIR", str(tmp_path / "ind"))
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "neff"))
    store_fx(tmp_path / "ind", FX1)
    check = check_cache(make_log([event([fx(FX1)])]))
    assert [(d.family, d.path, d.exists) for d in check.dirs] == [("inductor", tmp_path / "ind", True)]
    assert check.exit_code == 0 and "(from TORCHINDUCTOR_CACHE_DIR)" in check.text()
    check = check_cache(make_log([event([neff(PK1)], backend="neuron")]))
    assert [(d.family, d.exists) for d in check.dirs] == [("neff", False)]
    assert check.exit_code == 1 and "not made yet" in check.text()


def test_a_missing_cache_folder_is_an_error(tmp_path):
    log = make_log([event([fx(FX1)])])
    with pytest.raises(FileNotFoundError, match="no such folder"):
        check_cache(log, tmp_path / "nope")
    (tmp_path / "file").write_text("x")
    with pytest.raises(NotADirectoryError):
        check_cache(log, tmp_path / "file")


def test_crafted_log_values_are_escaped_in_the_text(tmp_path):
    evil = "fwd\x1b[31mRED\x1b]0;title\x07\nFAKE LINE\u202e"
    log = make_log([event([fx(None, "bypass", reason="r\x1b[2J\rgone\nx")], function=evil),
                    event([fx(FX1)], n=16, function=evil)])
    text = check_cache(log, tmp_path).text()
    assert "\x1b" not in text and "\u202e" not in text and "\r" not in text
    assert "\nFAKE LINE" not in text and "fwdRED FAKE LINE" in text
    assert "r gone x" in text


def test_json_round_trips_and_counts(tmp_path):
    store_fx(tmp_path, FX1)
    log = make_log([event([fx(FX1)]), event([fx(FX2)], n=16, rank=1), event([], n=32)])
    data = json.loads(json.dumps(check_cache(log, tmp_path).to_dict()))
    assert data["format"] == "neuronkit-cache-check" and data["exit_code"] == 1
    assert data["counts"] == {"graphs": 3, "judged": 2, "load": 1, "build": 1, "never": 0,
                              "unknown": 1}
    assert data["ranks"] == [0, 1]
    build = [g for g in data["graphs"] if g["verdict"] == "build"][0]
    assert build["key"] == FX2 and build["ranks"] == [1] and build["input_shapes"] == {"x": [4, 16]}
    assert build["path"] == str(tmp_path / "fxgraph" / FX2[1:3] / FX2)


def test_a_saved_log_is_checked_alike(tmp_path):
    path = tmp_path / "run.jsonl"
    log = CompileLog(path=path)
    log.append(event([fx(FX1)]))
    log.append(event([neff(PK1, "memory_hit")], n=16, backend="neuron"))
    log.release()
    store_fx(tmp_path, FX1)
    check = check_cache(CompileLog.load(path), tmp_path)
    assert [g.verdict for g in check.graphs] == ["load", "build"]


def test_a_log_file_or_run_folder_is_read(tmp_path):
    """``nk.check_cache(path, DIR)`` reads the run itself, as ``neuronkit cache check`` does."""
    import neuronkit as nk

    path = tmp_path / "run" / "a.jsonl"
    log = CompileLog(path=path)
    log.append(event([fx(FX1)]))
    log.release()
    store_fx(tmp_path / "cache", FX1)
    for source in (path, str(path.parent)):
        assert [g.verdict for g in nk.check_cache(source, tmp_path / "cache").graphs] == ["load"]
