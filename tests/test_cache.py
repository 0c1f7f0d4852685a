"""The Neuron compile cache inspector, on cache folders built by the tests."""
from __future__ import annotations

import os
import time

import pytest
from conftest import write_cache_entry

import neuronkit as nk
from neuronkit.cache import default_cache_dir, human_size


def _snapshot(root):
    return sorted((str(p), p.stat().st_size, p.stat().st_mtime) for p in root.rglob("*"))


def test_counts_sizes_newest_and_versions(neuron_cache):
    before = _snapshot(neuron_cache)
    report = nk.inspect_cache(neuron_cache)
    assert report.exists and len(report.entries) == 6
    assert report.counts == {"ok": 3, "failed": 1, "locked": 1, "empty": 1}
    # ok: neff (1000/2000/3000) + log 20 each; failed: its log; locked: log 5 + empty lock
    failed_log = len("ERROR: neuronx-cc exited with code 70 (fake)\n")
    assert report.total_size == 6000 + 3 * 20 + failed_log + 5
    assert report.newest.state == "failed" and report.newest.version == "2.14.227.0"
    assert report.by_version == {"2.14.227.0": {"ok": 0, "failed": 1, "locked": 0, "empty": 0},
                                 "2.15.128.0": {"ok": 3, "failed": 0, "locked": 1, "empty": 1}}
    assert _snapshot(neuron_cache) == before  # read-only


def test_summary_lists_failed_entries_and_says_they_block(neuron_cache):
    report = nk.inspect_cache(neuron_cache)
    text = str(report)
    failed = report.failed[0]
    assert str(failed.path) in text and "code 70" in failed.error and failed.error in text
    assert "block recompiling" in text
    assert "6: 3 ok, 1 failed, 1 locked" in text
    assert "neuronxcc-2.15.128.0: 3 ok, 0 failed, 1 locked, 1 empty" in text
    assert "1 min ago" in text and human_size(report.total_size) in text
    assert report.summary_line().endswith(f"6 graphs (3 ok, 1 failed, 1 locked, 1 empty), "
                                          f"{human_size(report.total_size)}")


def test_one_version_folder_can_be_given(neuron_cache):
    report = nk.inspect_cache(neuron_cache / "neuronxcc-2.15.128.0")
    assert report.counts == {"ok": 3, "failed": 0, "locked": 1, "empty": 1}
    assert {e.version for e in report.entries} == {"2.15.128.0"}


def test_neff_without_done_marker_counts_as_ok(tmp_path):
    entry = write_cache_entry(tmp_path, "ok")  # older compilers wrote no model.done
    (entry / "model.done").unlink()
    assert nk.inspect_cache(tmp_path).counts["ok"] == 1
    (entry / "model.neff").write_bytes(b"")  # an empty neff is not a success
    assert nk.inspect_cache(tmp_path).counts["failed"] == 1


def test_nested_files_with_the_same_name_all_count(tmp_path):
    entry = write_cache_entry(tmp_path, "ok", size=1000)        # model.neff 1000, log 20
    for sub, nbytes in (("a", 300), ("b", 70)):                 # two more model.log, nested
        (entry / sub).mkdir()
        (entry / sub / "model.log").write_bytes(b"x" * nbytes)
    (entry / "b" / "model.neff").write_bytes(b"")              # an empty nested neff too
    [found] = nk.inspect_cache(tmp_path).entries
    assert found.size == 1000 + 20 + 300 + 70 and found.state == "ok"


def test_lock_wins_over_other_files(tmp_path):
    entry = write_cache_entry(tmp_path, "ok")
    (entry / "model.neff.lock").touch()
    assert nk.inspect_cache(tmp_path).counts == {"ok": 0, "failed": 0, "locked": 1, "empty": 0}


def test_newest_follows_mtime(tmp_path):
    now = time.time()
    old = write_cache_entry(tmp_path, "ok", mtime=now - 500)
    new = write_cache_entry(tmp_path, "ok", mtime=now - 5)
    assert nk.inspect_cache(tmp_path).newest.path == new
    os.utime(old / "model.log", (now, now))  # touching a file inside makes the entry newer
    assert nk.inspect_cache(tmp_path).newest.path == old


def test_empty_cache_folder(tmp_path):
    (tmp_path / "unrelated").mkdir()
    report = nk.inspect_cache(tmp_path)
    assert report.exists and report.entries == [] and report.newest is None
    assert "no compiled graphs" in str(report)


def test_missing_folder_is_a_message_not_a_traceback(tmp_path):
    report = nk.inspect_cache(tmp_path / "nope")
    assert not report.exists and report.counts == {"ok": 0, "failed": 0, "locked": 0, "empty": 0}
    assert f"no folder at {tmp_path / 'nope'}" in str(report) and "Check the path" in str(report)


def test_a_file_is_rejected(tmp_path):
    (tmp_path / "f").write_text("x")
    with pytest.raises(ValueError, match="is a file, not a Neuron compile cache folder"):
        nk.inspect_cache(tmp_path / "f")


@pytest.mark.parametrize("flags,expected", [
    ("--cache_dir=/data/ncc -O1", "/data/ncc"),
    ("-O1 --cache_dir /data/other", "/data/other"),
    ("--model-type=transformer", "/var/tmp/neuron-compile-cache"),
    ("", "/var/tmp/neuron-compile-cache"),
])
def test_default_dir_from_neuron_cc_flags(monkeypatch, flags, expected):
    monkeypatch.setenv("NEURON_CC_FLAGS", flags)
    monkeypatch.delenv("NEURON_COMPILE_CACHE_URL", raising=False)
    path, source = default_cache_dir()
    assert str(path) == expected
    assert ("NEURON_CC_FLAGS" in source) == (expected != "/var/tmp/neuron-compile-cache")


def test_default_is_used_when_no_path_given(monkeypatch, neuron_cache):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={neuron_cache}")
    report = nk.inspect_cache()
    assert report.path == neuron_cache and len(report.entries) == 6
    assert "from NEURON_CC_FLAGS" in str(report)


def test_missing_default_explains_where_it_looked(monkeypatch, tmp_path):
    monkeypatch.setenv("NEURON_CC_FLAGS", f"--cache_dir={tmp_path / 'never-compiled'}")
    text = str(nk.inspect_cache())
    assert "no folder at" in text and "first Neuron compile" in text


@pytest.mark.parametrize("nbytes,text", [(512, "512 B"), (2048, "2.0 KB"), (5 * 2**20, "5.0 MB"),
                                         (3 * 2**30, "3.0 GB")])
def test_human_size(nbytes, text):
    assert human_size(nbytes) == text
