"""``neuronkit warmup --manifest M -j N``: N processes each build the graphs their shard owns (the
others run eagerly), together every graph once; a later run of the job loads every graph."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neuronkit.apps.cli import main
from neuronkit.apps.precompile import INDUCTOR_CACHE_ENV, shard_environment
from neuronkit.setup.cache_native import CACHE_DIR_ENV
from neuronkit.sources.precompile_shard import parse_shard, shard_key, shard_of
from neuronkit.workloads.run_manifest import RunManifest

SIZES = (2, 3, 4, 5, 6)
# a job with a backend that notes each graph it is handed; the shard hook installed as
# record_process.start will install it (NEURONKIT_PRECOMPILE set)
HOOKED_JOB = textwrap.dedent("""
    import json, torch
    from neuronkit.sources.precompile_shard import install_shard_from_env
    assert install_shard_from_env()
    built = []
    def backend(gm, inputs):
        built.append([list(i.shape) for i in inputs if isinstance(i, torch.Tensor)][0])
        return gm.forward
    def scale(x):
        return (x * 2).sum()
    f = torch.compile(scale, backend=backend, dynamic=False)
    for n in %r:
        assert float(f(torch.ones(n))) == 2 * n  # graphs left to other shards run eagerly
    print(json.dumps(built))
""" % (SIZES,))


def test_parse_shard():
    assert parse_shard("0/1") == (0, 1) and parse_shard(" 3/4 ") == (3, 4)
    for bad in ("4/4", "1", "-1/2", "a/b", "0/0", "1/2/3"):
        with pytest.raises(ValueError, match="NEURONKIT_PRECOMPILE"):
            parse_shard(bad)


def test_shard_key_is_stable_and_reads_only_the_file_name():
    key = shard_key("forward", "/a/model.py:10", {"x": [2, 8], "y": [1]}, {"x": "float32"})
    assert key == shard_key("forward", "/b/model.py:10", {"y": [1], "x": [2, 8]},
                            {"x": "float32"})
    others = [shard_key("forward", "/a/model.py:11", {"x": [2, 8], "y": [1]}, {"x": "float32"}),
              shard_key("forward", "/a/model.py:10", {"x": [3, 8], "y": [1]}, {"x": "float32"}),
              shard_key("forward", "/a/model.py:10", {"x": [2, 8], "y": [1]}, {"x": "bfloat16"}),
              shard_key("backward", "/a/model.py:10", {"x": [2, 8], "y": [1]}, {"x": "float32"})]
    assert key not in others and len(set(others)) == 4
    assert 0 <= shard_of(key, 3) < 3


def _run_shard(tmp_path: Path, shard: str) -> tuple[list[list[int]], dict]:
    folder = tmp_path / shard.replace("/", "-")
    env = {**os.environ, "NEURONKIT_PRECOMPILE": shard, "NEURONKIT_RECORD": str(folder)}
    done = subprocess.run([sys.executable, "-c", HOOKED_JOB], env=env, capture_output=True,
                          text=True, timeout=240)
    assert done.returncode == 0, done.stderr
    reports = list(folder.glob("precompile-shard.*.json"))
    assert len(reports) == 1
    return json.loads(done.stdout.strip().splitlines()[-1]), json.loads(reports[0].read_text())


def test_each_shard_hands_only_its_graphs_to_the_backend(tmp_path):
    (built0, report0), (built1, report1) = (_run_shard(tmp_path, s) for s in ("0/2", "1/2"))
    assert sorted(built0 + built1) == [[n] for n in SIZES]  # every graph once, in one shard
    assert built0 and built1, (built0, built1)  # the rule splits these five
    for index, report, built in ((0, report0, built0), (1, report1, built1)):
        assert len(report["built"]) == len(built)
        assert len(report["built"]) + len(report["skipped"]) == len(SIZES)
        assert all(shard_of(k, 2) == index for k in report["built"])
        assert all(shard_of(k, 2) != index for k in report["skipped"])
    all_built, report = _run_shard(tmp_path, "0/1")  # -j 1: one shard builds all
    assert sorted(all_built) == [[n] for n in SIZES] and report["skipped"] == []


def test_shard_environment_names_the_cache_of_the_device(tmp_path, monkeypatch):
    monkeypatch.delenv("NEURONKIT_AS_NEURON", raising=False)
    cpu = RunManifest(["python", "t.py"], str(tmp_path), device="cpu")
    env = shard_environment(cpu, 1, 3, "/site", tmp_path / "s", tmp_path / "cache")
    assert env["NEURONKIT_PRECOMPILE"] == "1/3" and env["NEURONKIT_RECORD"] == str(tmp_path / "s")
    assert env[INDUCTOR_CACHE_ENV] == str(tmp_path / "cache")
    assert env["PYTHONPATH"].split(os.pathsep)[0] == "/site"
    neuron = RunManifest(["python", "t.py"], str(tmp_path), device="neuron:0")
    env = shard_environment(neuron, 0, 1, "/site", tmp_path / "s", tmp_path / "cache")
    assert env[CACHE_DIR_ENV] == str(tmp_path / "cache") and "NEURONKIT_AS_NEURON" not in env
    rehearsal = RunManifest(["python", "t.py"], str(tmp_path), device="cpu",
                            as_neuron={"rules": ["static shapes"], "device": "cpu"})
    env = shard_environment(rehearsal, 0, 1, "/site", tmp_path / "s", None)
    assert env["NEURONKIT_AS_NEURON"] == "1" and "NEURONKIT_PRECOMPILE" in env


def test_a_failed_shard_fails_the_warmup_and_shows_its_stderr(tmp_path, capsys):
    script = "import os, sys; sys.stderr.write('boom in ' + os.environ['NEURONKIT_PRECOMPILE']); sys.exit(3)"
    manifest = RunManifest([sys.executable, "-c", script], str(tmp_path)).save(tmp_path / "m.json")
    assert main(["warmup", "--manifest", str(manifest), "-j", "2"]) == 1
    out, err = capsys.readouterr()
    assert "shard 1/2: FAILED (exit 3)" in out and "shard 2/2: FAILED (exit 3)" in out
    assert "boom in 0/2" in err and "boom in 1/2" in err and "2 shard(s) failed" in out


def test_warmup_arguments_are_checked(tmp_path, capsys):
    assert main(["warmup"]) != 0
    assert "name a MODEL" in capsys.readouterr().err
    assert main(["warmup", "some-model", "-j", "2"]) != 0
    assert "-j and --cache go with --manifest" in capsys.readouterr().err
    serving = tmp_path / "serving.json"
    serving.write_text(json.dumps({"format": "neuronkit-warmup", "graphs": []}))
    assert main(["warmup", "--manifest", str(serving), "-j", "2"]) != 0
    assert "not a run manifest" in capsys.readouterr().err
    gone = RunManifest(["python"], str(tmp_path / "gone")).save(tmp_path / "m.json")
    assert main(["warmup", "--manifest", str(gone)]) != 0
    assert "does not exist" in capsys.readouterr().err


# The whole path on CPU with inductor (a training job recorded, warmed up with -j 2 into a fresh
# cache, then run again: every FX graph lookup a hit, forward and backward) is notebook 04's last
# section, whose printed counts nbval checks; through the Neuron fake across processes:
# tests/apps/test_precompile_neuron.py.


def add_one(x):
    return x + 1


def _sizes_in_both_shards() -> list[int]:
    """Two sizes of ``add_one``'s input that shard 0 of 2 owns and two that shard 1 does, by the
    hook's rule (its key holds the function's line: picked, not hard-coded)."""
    code = add_one.__code__
    where = f"{code.co_filename}:{code.co_firstlineno}"
    by_shard: dict[int, list[int]] = {0: [], 1: []}
    for n in range(2, 64):
        by_shard[shard_of(shard_key("add_one", where, {"x": [n]}, {"x": "float32"}), 2)].append(n)
    return by_shard[0][:2] + by_shard[1][:2]


def test_through_the_neuron_fake_a_shard_builds_only_its_neffs(fake_neuron, compiler_reset):
    """The ``neuron`` string backend (torch-neuronx snapshot ``pyproject.toml:14-18``) is handed
    only the owned graphs: only they get a NEFF; the manifest's rule names the same ones."""
    import torch

    import neuronkit as nk
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.sources.precompile_shard import install_shard, remove_shard
    from neuronkit.workloads.run_manifest import build_manifest

    sizes = _sizes_in_both_shards()
    fn = torch.compile(add_one, backend="neuron", dynamic=False)
    state = install_shard(0, 2)
    try:
        with nk.CompileRecorder() as rec:
            for n in sizes:
                assert torch.equal(fn(torch.ones(n)), torch.ones(n) + 1)
    finally:
        remove_shard()
    graphs = build_manifest(CompileLog(rec.events), ["python"], "/").graphs
    with_neff = [e.neff_cache is not None for e in rec.events if e.kind in ("first", "recompile")]
    assert len(graphs) == len(sizes) == len(state.built) + len(state.skipped)
    assert with_neff == [shard_of(g["shard_key"], 2) == 0 for g in graphs]
    assert sum(with_neff) == len(state.built) == 2 and with_neff.count(False) == 2, with_neff
