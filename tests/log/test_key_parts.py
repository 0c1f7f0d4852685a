"""A log keeps what each cache key is made of once per key (``key_parts`` lines), reads it back,
merges it, and treats it as untrusted input."""
from __future__ import annotations

import json
import warnings

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, LogWarning
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.key_parts import TEXT_CHARS

LOOKUP = {"cache": "fx_graph", "key": "k1", "state": "miss"}


def _log(path=None) -> CompileLog:
    log = CompileLog(path=path)
    log.append(CompileEvent(function="f", cache_key=[dict(LOOKUP)]))
    log.add_key_parts("fx_graph", "k1", {"gm": ("d1", "code"), "torch_version": ("d2", "2.13")})
    log.add_key_parts("fx_graph", "k2", {"gm": ("d1", "code"), "torch_version": ("d3", "2.14")})
    return log


def test_parts_are_written_once_per_key_and_each_text_once(tmp_path):
    path = tmp_path / "run.jsonl"
    log = _log(path)
    log.add_key_parts("fx_graph", "k1", {"gm": ("d9", "other")})  # known key: not again
    lines = [json.loads(line) for line in path.read_text().splitlines()]
    parts = [line["key_parts"] for line in lines if "key_parts" in line]
    assert [p["key"] for p in parts] == ["k1", "k2"]
    assert parts[1]["values"] == {"d3": "2.14"}  # "code" was written with k1
    loaded = CompileLog.load(path)
    assert loaded.key_parts.described("k2") == {"gm": "code", "torch_version": "2.14"}
    assert loaded.events[0].cache_key == [LOOKUP]
    saved = CompileLog.load(loaded.save(tmp_path / "copy.jsonl"))
    assert saved.key_parts.described("k1") == {"gm": "code", "torch_version": "2.13"}


def test_merged_logs_hold_every_key():
    other = CompileLog()
    other.add_key_parts("neff", "n1", {"NEURON_CC_FLAGS": ("d7", "-O1")})
    merged = CompileLog.merge([_log(), other])
    assert set(merged.key_parts.keys()) == {"k1", "k2", "n1"}
    assert merged.key_parts.cache_of("n1") == "neff"
    assert merged.key_parts.described("n1") == {"NEURON_CC_FLAGS": "-O1"}


def test_an_update_sets_the_lookups(tmp_path):
    log = _log(tmp_path / "run.jsonl")
    neff = {"cache": "neff", "key": "n1", "state": "compiled", "persistent_key": "a" * 32}
    log.update(0, cache_key=[LOOKUP, neff])
    assert CompileLog.load(tmp_path / "run.jsonl").events[0].cache_key == [LOOKUP, neff]


@pytest.mark.parametrize("line, why", [
    ({"key_parts": {"cache": "fx_graph", "key": "k", "parts": {"gm": 5}, "values": {}}}, "parts"),
    ({"key_parts": {"cache": "fx_graph", "key": "", "parts": {}, "values": {}}}, "key"),
    ({"key_parts": {"cache": "fx_graph", "key": "k", "parts": {f"p{i}": "d" for i in range(5000)},
                    "values": {}}}, "at most"),
    ({"key_parts": ["not", "an", "object"]}, "key_parts"),
])
def test_a_bad_key_parts_line_is_skipped_and_named(tmp_path, line, why):
    path = tmp_path / "bad.jsonl"
    path.write_text(json.dumps({"format": FORMAT, "version": 4}) + "\n" + json.dumps(line) + "\n")
    with pytest.warns(LogWarning, match=why):
        log = CompileLog.load(path)
    assert len(log.key_parts) == 0


def test_a_bad_lookup_drops_the_field_not_the_event(tmp_path):
    path = tmp_path / "bad.jsonl"
    event = CompileEvent(function="f").to_dict()
    event["cache_key"] = [{"cache": "fx_graph", "key": {"nested": "object"}}]
    path.write_text(json.dumps({"format": FORMAT, "version": 4}) + "\n" + json.dumps(event) + "\n")
    with pytest.warns(LogWarning, match="cache_key"):
        log = CompileLog.load(path)
    assert [e.function for e in log.events] == ["f"] and log.events[0].cache_key == []


def test_long_texts_are_cut_and_old_logs_have_no_lookups(tmp_path):
    log = CompileLog()
    log.add_key_parts("fx_graph", "k", {"gm": ("d", "x" * (TEXT_CHARS * 3))})
    assert len(log.key_parts.value("d")) < TEXT_CHARS + 20
    path = tmp_path / "v3.jsonl"
    old = CompileEvent(function="f").to_dict()
    del old["cache_key"]
    path.write_text(json.dumps({"format": FORMAT, "version": 3}) + "\n" + json.dumps(old) + "\n")
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        loaded = CompileLog.load(path)
    assert loaded.events[0].cache_key == [] and len(loaded.key_parts) == 0


def test_a_followed_log_brings_its_keys_parts_as_they_are_written(tmp_path):
    """``nk.follow``'s merged log holds the parts of every key written so far, new ones too."""
    import neuronkit as nk

    path = tmp_path / "run.jsonl"
    log = _log(path)
    follower = nk.follow(path)
    follower.poll()
    assert set(follower.log.key_parts.keys()) == {"k1", "k2"}
    follower.poll()  # nothing new: the same
    log.add_key_parts("neff", "n1", {"NEURON_CC_FLAGS": ("d7", "-O1")})
    log.append(CompileEvent(function="g"))
    follower.poll()
    assert follower.log.key_parts.described("n1") == {"NEURON_CC_FLAGS": "-O1"}
