"""The run manifest: every graph of a recorded run (forward and backward, shapes, dtypes, phase,
keys) with its command; saved and loaded back, and refused with a clear error when malformed."""
from __future__ import annotations

import json

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.precompile_shard import shard_key, shard_of
from neuronkit.workloads.run_manifest import (
    FILE_NAME,
    ManifestError,
    build_manifest,
    load_manifest,
    write_run_manifest,
)


def _event(seq: int, kind: str, n: int, **kw) -> CompileEvent:
    fields = dict(seq=seq, compile_id=f"0/{seq}", function="Model.forward[decode]",
                  location="/job/model.py:10", backend="inductor", device="cpu",
                  input_shapes={"x": [n, 8]}, kind=kind,
                  metrics={"frame": {"name": "forward", "location": "/job/model.py:10"},
                           "input_dtypes": {"x": "float32"}},
                  cache_key=[{"cache": "aot_autograd", "key": f"a{n}", "state": "miss"},
                             {"cache": "fx_graph", "key": f"f{n}", "state": "miss"}])
    fields.update(kw)
    return CompileEvent(**fields)


def _log() -> CompileLog:
    return CompileLog([
        _event(0, "first", 2, context="step 1"),
        _event(1, "backward", 2, compile_id="0/0", input_shapes={}, metrics={}, context="step 1"),
        _event(2, "recompile", 3),
        _event(3, "kernels", 0, input_shapes={}, kernels=4),  # not a graph: left out
        _event(4, "graph_break", 5, input_shapes={}),  # not a graph: left out
    ], header={**CompileLog().header, "device": "cpu"})


def test_manifest_lists_every_graph_with_its_signature_and_keys():
    m = build_manifest(_log(), ["python", "train.py"], "/job")
    assert [g["kind"] for g in m.graphs] == ["forward", "backward", "forward"]
    first, backward, second = m.graphs
    assert first["input_shapes"] == {"x": [2, 8]} and first["input_dtypes"] == {"x": "float32"}
    assert first["phase"] == "decode" and first["context"] == "step 1"
    assert first["fx_keys"] == ["f2"] and first["neff_keys"] == []
    assert first["shard_key"] == shard_key("forward", "/job/model.py:10", {"x": [2, 8]},
                                           {"x": "float32"})
    assert backward["shard_key"] == first["shard_key"]  # built where its forward graph is
    assert second["shard_key"] != first["shard_key"]
    assert m.counts == {"graphs": 3, "forward": 2, "backward": 1, "functions": 1}
    assert (m.command, m.cwd, m.backends, m.device) == (["python", "train.py"], "/job",
                                                         ["inductor"], "cpu")


def test_shards_split_the_graphs_by_the_hook_rule():
    m = build_manifest(_log(), ["python", "train.py"], "/job")
    for n in (1, 2, 3):
        expected = [0] * n
        for g in m.graphs[::2]:  # the forward graphs: each backward graph goes with its own
            expected[shard_of(g["shard_key"], n)] += 1
        assert m.shards(n) == expected and sum(m.shards(n)) == 2


def test_neff_keys_come_from_lookups_and_metrics():
    log = CompileLog([_event(0, "first", 2, device="neuron:0", cache_key=[
        {"cache": "neff", "key": "k1", "state": "compiled"}],
        metrics={"neff_keys": ["k1", "k2"]})], header={"as_neuron": {"rules": ["static"],
                                                                     "device": "cpu"}})
    m = build_manifest(log, ["python", "t.py"], "/job")
    assert m.graphs[0]["neff_keys"] == ["k1", "k2"] and m.device == "neuron:0"
    assert m.as_neuron == {"rules": ["static"], "device": "cpu"}


def test_write_run_manifest_reads_the_run_folder_and_loads_back(tmp_path, monkeypatch):
    _log().save(tmp_path / "host.pid11.jsonl")
    monkeypatch.chdir(tmp_path)
    path = write_run_manifest(tmp_path, ["python", "train.py", "--steps", "3"])
    assert path == tmp_path / FILE_NAME
    loaded = load_manifest(tmp_path)  # a folder: its manifest.json
    assert loaded.cwd == str(tmp_path) and loaded.command[-1] == "3"
    assert loaded.graphs == build_manifest(_log(), loaded.command, loaded.cwd).graphs
    assert json.loads(path.read_text())["counts"]["graphs"] == 3


def _saved(tmp_path, change) -> str:
    data = build_manifest(_log(), ["python", "train.py"], "/job").to_dict()
    change(data)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    return str(path)


@pytest.mark.parametrize(("change", "words"), [
    (lambda d: d.update(format="neuronkit-warmup"), "not a run manifest"),
    (lambda d: d.update(version=2), "version 2"),
    (lambda d: d.update(command=[]), "command"),
    (lambda d: d.update(command="python train.py"), "command"),
    (lambda d: d.update(cwd=None), "cwd"),
    (lambda d: d.update(graphs={}), "graphs is not a list"),
    (lambda d: d["graphs"][1].update(kind="sideways"), "graphs[1].kind"),
    (lambda d: d["graphs"][0].update(shard_key="../../etc"), "graphs[0].shard_key"),
    (lambda d: d["graphs"][0].update(input_shapes={"x": [True, 2]}), "graphs[0].input_shapes"),
    (lambda d: d["graphs"][2].pop("function"), "graphs[2].function"),
    (lambda d: d["graphs"][0].update(fx_keys=[1]), "graphs[0].fx_keys"),
])
def test_a_malformed_manifest_is_refused_saying_what(tmp_path, change, words):
    with pytest.raises(ManifestError, match=words.replace("[", r"\[").replace("]", r"\]")):
        load_manifest(_saved(tmp_path, change))


def test_unreadable_or_not_json(tmp_path):
    with pytest.raises(ManifestError, match="cannot read"):
        load_manifest(tmp_path / "missing.json")
    (tmp_path / "bad.json").write_text("{not json")
    with pytest.raises(ManifestError, match="not JSON"):
        load_manifest(tmp_path / "bad.json")
    (tmp_path / "list.json").write_text("[1, 2]")
    with pytest.raises(ManifestError, match="not a run manifest"):
        load_manifest(tmp_path / "list.json")
