"""The Neuron compile cache inspector, on cache folders built by the tests: the legacy XLA-era
layout (``conftest.write_cache_entry``) and the native torch-neuronx one (``NativeCacheWriter``)."""
from __future__ import annotations

import fcntl
import os
import shutil
import sys
import time
import types
from importlib.machinery import ModuleSpec

import pytest

import neuronkit as nk
import neuronkit.setup.cache_legacy
import neuronkit.setup.cache_native
from conftest import write_cache_entry
from neuron_fake import NativeCacheWriter, installed_fake
from neuronkit.apps.cli import main
from neuronkit.setup.cache import prune_cache
from neuronkit.setup.cache_legacy import default_cache_dir
from neuronkit.setup.cache_text import human_size

NATIVE_ENV = ("TORCH_NEURONX_NEFF_CACHE_DIR", "TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR",
              "TORCH_NEURONX_NEFF_DISABLE_CACHE", "TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT",
              "TORCH_NEURONX_DISABLE_NEFF_CACHE", "NEURON_COMPILE_CACHE_URL")


@pytest.fixture(autouse=True)
def no_native_install(monkeypatch, tmp_path):
    """No torch-neuronx or torch_xla visible, no native settings, and the lock folder in tmp:
    what this machine has installed or in /tmp never decides a layout here."""
    for name in ("torch_neuronx", "torch_xla"):
        monkeypatch.setitem(sys.modules, name, None)
    for var in NATIVE_ENV:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(tmp_path / "no-locks"))


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


def test_legacy_module_link_back_to_the_root_is_not_followed(neuron_cache):
    before = nk.inspect_cache(neuron_cache)
    loop = neuron_cache / "neuronxcc-2.15.128.0" / "MODULE_loop+d41d8cd9"
    loop.symlink_to(neuron_cache, target_is_directory=True)
    report = nk.inspect_cache(neuron_cache)
    assert [e.path for e in report.entries] == [e.path for e in before.entries]
    assert report.counts == before.counts and report.total_size == before.total_size
    assert any("1 symbolic link" in n and "not followed" in n for n in report.notes), report.notes
    assert f"{loop}" in str(report)


def test_legacy_links_out_of_the_cache_are_not_followed_or_read(neuron_cache, tmp_path):
    outside = tmp_path / "elsewhere"
    other = write_cache_entry(outside, "ok", size=50_000)             # another cache's entry
    secret = outside / "secret.txt"
    secret.write_text("error: the password is hunter2\n")
    (neuron_cache / "neuronxcc-9.9.9.9").symlink_to(other.parent)      # a version folder link
    (neuron_cache / "neuronxcc-2.15.128.0" / "MODULE_out+d41d8cd9").symlink_to(other)
    failed = write_cache_entry(neuron_cache, "failed", version="2.16.0.0")
    (failed / "model.log").unlink()
    (failed / "model.log").symlink_to(secret)                          # a log that is a link
    (failed / "big.neff").symlink_to(other / "model.neff")
    (failed / "sub").symlink_to(other)                                 # a folder inside an entry
    report = nk.inspect_cache(neuron_cache)
    assert "9.9.9.9" not in report.by_version and len(report.entries) == 7
    [entry] = [e for e in report.entries if e.path == failed]
    assert (entry.size, entry.error) == (0, "")       # nothing behind the links counted or read
    assert entry.state == "empty"
    assert "hunter2" not in str(report) and report.total_size < 50_000
    note = next(n for n in report.notes if "symbolic link" in n)
    assert note.startswith("5 symbolic links in the cache were not followed")


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


# ---- native torch-neuronx layout ------------------------------------------------------------

FIVE_HOURS = 5 * 3600


@pytest.fixture
def native(monkeypatch, tmp_path):
    """A native cache (``NativeCacheWriter.populate``) with the env pointing at it and a 5 h
    lock timeout, so only the 2-day-old lock is old (a leftover: nobody holds it);
    ``native.made`` lists the files."""
    writer = NativeCacheWriter.under(tmp_path / "native")
    writer.made = writer.populate(time.time())
    for var, value in writer.env().items():
        monkeypatch.setenv(var, value)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", str(FIVE_HOURS))
    return writer


def _files(*roots):
    return {p for root in roots for p in root.rglob("*") if p.is_file()}


def _fake_module(monkeypatch, name):
    module = types.ModuleType(name)
    module.__spec__ = ModuleSpec(name, None)
    monkeypatch.setitem(sys.modules, name, module)


def test_native_counts_both_layouts_leftovers_and_locks(native):
    before = _snapshot(native.cache_dir.parent)
    report = nk.inspect_cache(native.cache_dir)
    assert report.layout == "native" and report.entries == []
    n = report.native
    assert (n.count("cpp"), n.count("python")) == (3, 2)
    assert n.neff_bytes == 1024 + 2048 + 3072 + 2 * 1024
    assert n.zero_size[0].path == native.made["zero"][0] and len(n.zero_size) == 1
    assert {f.path for f in n.leftovers} == set(native.made["tmp"])
    assert {f.kind for f in n.leftovers} == {"cpp", "python"}
    assert len(n.locks) == 6 and {lk.kind for lk in n.locks} == {"cpp", "python"}
    assert [lk.path for lk in n.leftover_locks] == [native.made["locks"][-1]]
    assert n.held_locks == []                        # no build in progress
    assert all(lk.held is False and lk.holders == [] for lk in n.locks)
    assert n.timeout_s == FIVE_HOURS and n.other == []
    assert report.total_size == 8192 + 2 * 512
    assert _snapshot(native.cache_dir.parent) == before  # read-only


def test_native_summary_text(native):
    report = nk.inspect_cache(native.cache_dir)
    text = str(report)
    assert text.startswith(f"Neuron compile cache: {native.cache_dir} (as given)\n"
                           "  layout     native: native torch-neuronx")
    assert "5 (8.0 KB): 3 from the C++ path (ab/cd/<key>.neff), 2 from the Python" in text
    assert "zero-size  1 .neff of 0 bytes" in text
    assert "temp files 2 (1.0 KB): 2 left by writes that died" in text
    assert (f"6 in {native.local_cache_dir} (from TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR): 0 held "
            "now (a build in progress), 1 old one no process holds (older than the lock "
            "timeout, 18000 s, from TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT: a normal leftover; "
            "--prune removes it)" in text)
    assert "stale" not in text
    assert f"{native.made['locks'][-1]}  2 d old, not held (leftover)" in text
    assert f"{native.made['locks'][0]}  1 h old, not held" in text
    assert "enabled (TORCH_NEURONX_NEFF_DISABLE_CACHE not set)" in text
    assert "--prune to list the 4 file(s)" in text
    assert report.summary_line() == (f"{native.cache_dir}: 5 NEFFs (3 C++, 2 Python), 8.0 KB; "
                                     "2 temp leftovers, 1 zero-size, 6 lock files (0 held: a "
                                     "build in progress) (native layout)")


def test_lock_age_follows_mtime_against_the_timeout(monkeypatch, tmp_path):
    writer = NativeCacheWriter.under(tmp_path)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(writer.local_cache_dir))
    writer.neff()
    now = time.time()
    young = writer.lock(nk_key("young"), now - 100)
    old = writer.lock(nk_key("old"), now - 5000)

    def leftover(timeout):
        if timeout is None:
            monkeypatch.delenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", raising=False)
        else:
            monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", timeout)
        return {lk.path for lk in nk.inspect_cache(writer.cache_dir).native.leftover_locks}

    assert leftover(None) == {old}              # default 1200 s
    assert leftover("10000") == set()
    assert leftover("50") == {young, old}
    assert leftover("0") == {old}               # not positive: the C++ side uses 1200
    assert leftover("abc") == {old}
    assert "is not a positive number" in str(nk.inspect_cache(writer.cache_dir))
    ages = {lk.path: lk.age_s for lk in nk.inspect_cache(writer.cache_dir).native.locks}
    assert 100 <= ages[young] < 160 and 5000 <= ages[old] < 5060


def nk_key(seed):
    from neuron_fake import native_key

    return native_key(seed)


def test_a_held_lock_is_a_build_in_progress_however_old_its_file(monkeypatch, tmp_path):
    """FileLock.cpp reuses lock files and never refreshes their time (:87), and a waiter breaks a
    lock after the timeout counted from its *own* wait start (:114-167): a held lock is a build
    in progress whatever its file's age, never "stale"; once released, an old one is a leftover.
    (Held here by a second open file description of this process: flock conflicts across them.)"""
    writer = NativeCacheWriter.under(tmp_path)
    monkeypatch.setenv("TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR", str(writer.local_cache_dir))
    writer.neff()
    lock = writer.lock(nk_key("taken again just now"), time.time() - 86400)
    young = writer.lock(nk_key("compiling now"), time.time() - 60)
    with open(lock) as held, open(young) as held_young:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)  # a day-old file, taken by a build just now
        fcntl.flock(held_young.fileno(), fcntl.LOCK_EX)
        found = {lk.path: lk for lk in nk.inspect_cache(writer.cache_dir).native.locks}
        assert (found[lock].held, found[lock].leftover) == (True, False)
        assert found[young].held is True
        report = nk.inspect_cache(writer.cache_dir)
        assert {lk.path for lk in report.native.held_locks} == {lock, young}
        assert report.native.prunable == []
        assert "(2 held: a build in progress)" in report.summary_line()
        assert "stale" not in str(report) and "1 d old" not in str(report)
        assert prune_cache(writer.cache_dir, dry_run=False).items == []  # never a held lock
    assert lock.exists()
    [found_now] = [lk for lk in nk.inspect_cache(writer.cache_dir).native.locks if lk.path == lock]
    assert (found_now.held, found_now.leftover) == (False, True)


def test_prune_dry_run_removes_nothing(native):
    before = _snapshot(native.cache_dir.parent)
    result = prune_cache(native.cache_dir)
    assert result.dry_run and result.removed == []
    assert {i.outcome for i in result.items} == {"would remove"}
    assert {i.path for i in result.items} == \
        {*native.made["tmp"], *native.made["zero"], native.made["locks"][-1]}
    assert _snapshot(native.cache_dir.parent) == before


def test_prune_removes_exactly_leftovers_zero_size_and_old_unheld_locks(native):
    before = _files(native.cache_dir, native.local_cache_dir)
    expected = {*native.made["tmp"], *native.made["zero"], native.made["locks"][-1]}
    result = prune_cache(native.cache_dir, dry_run=False)
    assert set(result.removed) == expected and result.failed == []
    assert _files(native.cache_dir, native.local_cache_dir) == before - expected
    for path in native.made["native"] + native.made["python"] + native.made["locks"][:-1]:
        assert path.exists(), path  # good NEFFs and fresh locks stay
    after = nk.inspect_cache(native.cache_dir).native
    assert (len(after.neffs), after.prunable) == (5, [])


def test_prune_keeps_temp_files_being_written_and_files_a_compile_holds(native):
    fresh_tmp = native.tmp_leftover(mtime=time.time() - 5)  # a write in progress
    key = nk_key("compiling")
    zero = native.neff(key, size=0)
    with open(native.lock(key, time.time() - 2 * 86400)) as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        result = prune_cache(native.cache_dir, dry_run=False)
    outcomes = {i.path: i.outcome for i in result.items}
    assert fresh_tmp not in outcomes and fresh_tmp.exists()
    assert outcomes[zero] == "kept: locked by a running compile" and zero.exists()
    assert "[kept: locked by a running compile]" in str(result)


def test_prune_keeps_python_layout_files_under_a_held_compile_lock(native):
    from neuron_fake import python_key

    key = python_key("compiling")
    zero = native.python_neff(key, size=0)
    tmp = native.python_tmp_leftover(key, mtime=time.time() - 86400)
    with open(native.python_lock(key)) as held:
        fcntl.flock(held.fileno(), fcntl.LOCK_EX)
        result = prune_cache(native.cache_dir, dry_run=False)
    outcomes = {i.path: i.outcome for i in result.items}
    assert outcomes[zero] == outcomes[tmp] == "kept: locked by a running compile"
    assert zero.exists() and tmp.exists()
    assert set(result.removed) == {*native.made["tmp"], *native.made["zero"],
                                   native.made["locks"][-1]}


def test_prune_checks_each_file_again_before_removing_it(native):
    from neuronkit.setup.cache_native import scan_native
    from neuronkit.setup.cache_prune import prune_native

    scanned = scan_native(native.cache_dir)
    zero, stale = native.made["zero"][0], native.made["locks"][-1]
    zero.write_bytes(b"NEFF")   # a compile wrote it since the scan
    os.utime(stale)             # and took this lock again
    result = prune_native(native.cache_dir, scanned, dry_run=False)
    outcomes = {i.path: i.outcome for i in result.items}
    assert outcomes[zero] == outcomes[stale] == "kept: changed since the scan"
    assert zero.read_bytes() == b"NEFF" and stale.exists()
    assert set(result.removed) == set(native.made["tmp"])


def test_links_are_never_followed_or_removed(native, tmp_path):
    target = tmp_path / "precious.neff"
    target.write_bytes(b"")
    link = native.made["tmp"][0].parent / ".tmp.link00"
    link.symlink_to(target)
    os.utime(link, (0, 0), follow_symlinks=False)
    report = nk.inspect_cache(native.cache_dir)
    assert link in report.native.other
    prune_cache(native.cache_dir, dry_run=False)
    assert link.is_symlink() and target.exists()


def _outside(tmp_path, *rel, mtime=0.0):
    """A file outside every cache folder, old enough to look like a prune target."""
    path = tmp_path.joinpath("outside", *rel)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"")
    os.utime(path, (mtime, mtime))
    return path


def test_native_lock_folder_links_are_never_followed_or_pruned(native, tmp_path):
    from neuron_fake import python_key

    victim_py = _outside(tmp_path, "py", "locks", "compile.lock")    # a 2-day-old lock lookalike
    (native.local_cache_dir / python_key("linked")).symlink_to(victim_py.parent.parent)
    victim_cpp = _outside(tmp_path, "cpp", f"{nk_key('linked')}.lock")
    locks = native.local_cache_dir / "locks"
    for lock in list(locks.iterdir()):
        lock.rename(tmp_path / "outside" / "cpp" / lock.name)           # the real locks move out,
    locks.rmdir()
    locks.symlink_to(tmp_path / "outside" / "cpp")                      # a link takes their place
    report = nk.inspect_cache(native.cache_dir)
    paths = {lk.path for lk in report.native.locks}
    assert paths == {native.local_cache_dir / python_key(f"populate-{i}") / "locks" /
                     "compile.lock" for i in range(2)}    # only the python locks of real folders
    result = prune_cache(native.cache_dir, dry_run=False)
    assert victim_py.exists() and victim_cpp.exists()
    assert not any("outside" in str(i.path) or i.path.parent == locks for i in result.items)


def test_native_shard_links_are_never_followed(native, tmp_path):
    from neuron_fake import python_key

    key = nk_key("linked shard")
    zero = _outside(tmp_path, key[2:4], f"{key}.neff")                  # a zero-size NEFF lookalike
    (native.cache_dir / key[:2]).symlink_to(zero.parent.parent)
    pkey = python_key("linked")
    (native.cache_dir / pkey).symlink_to(_outside(tmp_path, "p", f"{pkey}.neff").parent)
    report = nk.inspect_cache(native.cache_dir).native
    assert {f.path for f in report.zero_size} == set(native.made["zero"])
    assert all("outside" not in str(p) for p in report.other)
    prune_cache(native.cache_dir, dry_run=False)
    assert zero.exists() and (tmp_path / "outside" / "p" / f"{pkey}.neff").exists()


def test_prune_never_deletes_through_a_folder_swapped_for_a_link(native, tmp_path):
    """A shard or lock folder replaced by a link after the scan: nothing beyond it is removed."""
    from neuronkit.setup.cache_native import scan_native
    from neuronkit.setup.cache_prune import prune_native

    scanned = scan_native(native.cache_dir)
    zero, stale = native.made["zero"][0], native.made["locks"][-1]
    (tmp_path / "moved").mkdir()
    for path in (zero, stale):                          # the same names, outside, still prunable
        twin = _outside(tmp_path, path.parent.name, path.name)
        shutil.move(path.parent, tmp_path / "moved" / path.parent.name)
        path.parent.symlink_to(twin.parent)
    result = prune_native(native.cache_dir, scanned, dry_run=False)
    outcomes = {i.path: i.outcome for i in result.items}
    assert outcomes[zero] == outcomes[stale] == "kept: changed since the scan"
    assert (tmp_path / "outside" / zero.parent.name / zero.name).exists()
    assert (tmp_path / "outside" / stale.parent.name / stale.name).exists()
    assert set(result.removed) == set(native.made["tmp"])


def test_unknown_files_are_counted_and_left_alone(native):
    stray = native.cache_dir / "README.txt"
    stray.write_text("mine")
    report = nk.inspect_cache(native.cache_dir)
    assert report.native.other == [stray] and "1 file(s) that are not native cache files" in \
        str(report)
    prune_cache(native.cache_dir, dry_run=False)
    assert stray.exists()


def test_unknown_files_in_shard_folders_survive_prune(native):
    """Only the writers' exact temp names are leftovers (``.tmp.XXXXXX``, ``tmpXXXXXXXX.tmp``):
    a file of the user's in a shard folder, even one that looks like them, is never removed."""
    cpp_shard = native.made["native"][0].parent          # ab/cd/
    python_shard = native.made["python"][0].parent       # <sha256>/
    two_days_ago = time.time() - 2 * 86400
    strays = [cpp_shard / "notes.tmp", cpp_shard / ".tmp.notes-kept", cpp_shard / ".tmp.ab",
              python_shard / "tmp-readme", python_shard / "tmp-readme.tmp",
              python_shard / "tmpabc.tmp"]
    for stray in strays:
        stray.write_text("mine")
        os.utime(stray, (two_days_ago, two_days_ago))
    assert set(nk.inspect_cache(native.cache_dir).native.other) == set(strays)
    result = prune_cache(native.cache_dir, dry_run=False)
    assert all(stray.read_text() == "mine" for stray in strays)
    assert set(result.removed) == set(native.made["tmp"] + native.made["zero"]
                                      + native.made["locks"][-1:])
    assert main(["cache", str(native.cache_dir), "--prune", "--yes"]) == 0
    assert all(stray.exists() for stray in strays)


def test_layout_is_read_from_the_folder(native, neuron_cache):
    assert nk.inspect_cache(neuron_cache).layout == "legacy"
    assert nk.inspect_cache(neuron_cache / "neuronxcc-2.15.128.0").layout == "legacy"
    report = nk.inspect_cache(native.cache_dir)
    assert report.layout == "native" and "native cache folders" in report.layout_reason


def test_layout_argument_forces_it(native, neuron_cache):
    forced = nk.inspect_cache(neuron_cache, layout="native")
    assert forced.layout == "native" and forced.native.neffs == [] and \
        len(forced.native.other) == 3 * 3 + 1 + 2  # ok: neff, done, log; failed; locked
    assert "looks like the legacy layout: try --layout legacy" in str(forced)
    forced = nk.inspect_cache(native.cache_dir, layout="legacy")
    assert forced.layout == "legacy" and forced.native is None and forced.entries == []
    assert "try --layout native" in str(forced)
    with pytest.raises(ValueError, match="layout must be 'native' or 'legacy', not 'xla'"):
        nk.inspect_cache(native.cache_dir, layout="xla")


def test_default_layout_follows_the_installed_torch_neuronx(monkeypatch, native):
    monkeypatch.setenv("NEURON_CC_FLAGS", "--cache_dir=/somewhere/legacy")
    with installed_fake():  # the native torch-neuronx
        report = nk.inspect_cache()
    assert report.layout == "native" and report.path == native.cache_dir
    assert report.source == "from TORCH_NEURONX_NEFF_CACHE_DIR"
    assert "the native one" in report.layout_reason
    assert any("XLA-era option" in n for n in report.notes)  # --cache_dir is not native's
    _fake_module(monkeypatch, "torch_neuronx")  # the XLA-based one: a package, no torch.neuron
    _fake_module(monkeypatch, "torch_xla")
    report = nk.inspect_cache()
    assert report.layout == "legacy" and str(report.path) == "/somewhere/legacy"


@pytest.fixture
def defaults(monkeypatch, tmp_path):
    """Both default folders moved under tmp (neither exists yet)."""
    legacy, native_dir = tmp_path / "var-neuron-compile-cache", tmp_path / "tmp-neff_cache"
    monkeypatch.setattr(neuronkit.setup.cache_legacy, "DEFAULT_CACHE_DIR", str(legacy))
    monkeypatch.setattr(neuronkit.setup.cache_native, "NATIVE_CACHE_DIR", str(native_dir))
    monkeypatch.delenv("NEURON_CC_FLAGS", raising=False)
    return legacy, native_dir


def test_default_layout_follows_the_folders_on_disk(defaults):
    legacy, native_dir = defaults
    report = nk.inspect_cache()
    assert (report.layout, report.path, report.exists) == ("native", native_dir, False)
    assert "TORCH_NEURONX_NEFF_CACHE_DIR" in str(report)       # the native fix
    legacy.mkdir()
    report = nk.inspect_cache()
    assert (report.layout, report.path) == ("legacy", legacy)
    assert "only the legacy cache folder exists" in str(report)
    assert "NEURON_CC_FLAGS='--cache_dir" in report.folder_fix
    native_dir.mkdir()
    report = nk.inspect_cache()
    assert (report.layout, report.path) == ("native", native_dir)
    assert f"the legacy cache folder {legacy} exists too: `neuronkit cache --layout legacy`" \
        in str(report)
    assert report.source == "the torch-neuronx default"
    assert nk.inspect_cache(layout="legacy").path == legacy


def test_native_missing_folder_names_the_native_variable(defaults, monkeypatch, tmp_path):
    monkeypatch.setenv("TORCH_NEURONX_NEFF_CACHE_DIR", str(tmp_path / "not-yet"))
    report = nk.inspect_cache()
    assert report.layout == "native" and not report.exists
    assert f"no folder at {tmp_path / 'not-yet'} (from TORCH_NEURONX_NEFF_CACHE_DIR)" in str(report)
    assert "set TORCH_NEURONX_NEFF_CACHE_DIR=<a folder you can write>" in str(report)
    assert "NEURON_CC_FLAGS" not in str(report)
    with pytest.raises(FileNotFoundError, match="nothing to prune"):
        prune_cache()


@pytest.mark.parametrize("value,expected", [
    (None, "enabled (TORCH_NEURONX_NEFF_DISABLE_CACHE not set)"),
    ("1", "DISABLED by TORCH_NEURONX_NEFF_DISABLE_CACHE=1"),
    ("true", "TORCH_NEURONX_NEFF_DISABLE_CACHE='true' disables it for the Python sync-mode "
             "path only; the C++ path needs exactly '1'"),
    ("0", "enabled (TORCH_NEURONX_NEFF_DISABLE_CACHE='0' is not '1'"),
])
def test_disable_switch_is_reported(native, monkeypatch, value, expected):
    if value is not None:
        monkeypatch.setenv("TORCH_NEURONX_NEFF_DISABLE_CACHE", value)
    assert f"  cache      {expected}" in str(nk.inspect_cache(native.cache_dir))


def test_native_notes_on_xla_era_and_lookalike_settings(native, monkeypatch):
    monkeypatch.setenv("NEURON_COMPILE_CACHE_URL", "s3://bucket/cache")
    monkeypatch.setenv("TORCH_NEURONX_DISABLE_NEFF_CACHE", "1")
    notes = nk.inspect_cache(native.cache_dir).notes
    assert notes == ["NEURON_COMPILE_CACHE_URL is XLA-era: native torch-neuronx ignores it",
                     "TORCH_NEURONX_DISABLE_NEFF_CACHE switches off the in-process NEFF dict "
                     "only; the disk cache's switch is TORCH_NEURONX_NEFF_DISABLE_CACHE"]
    assert nk.inspect_cache(native.cache_dir, layout="legacy").notes == \
        ["this folder looks like the native layout: try --layout native"]


def test_names_from_disk_are_printed_without_control_characters(native, tmp_path):
    evil = native.made["tmp"][0].parent / ".tmp.\x1b[2J\x07"
    evil.write_bytes(b"x")
    os.utime(evil, (0, 0))
    text = str(nk.inspect_cache(native.cache_dir)) + str(prune_cache(native.cache_dir))
    assert "\x1b" not in text and "\x07" not in text
    assert ".tmp.\\x1b[2J\\x07" in text
    entry = write_cache_entry(tmp_path / "legacy", "failed")
    (entry / "model.log").write_text("ERROR: \x1b]0;owned\x07 died\n")
    text = str(nk.inspect_cache(tmp_path / "legacy"))
    assert "\x1b" not in text and "ERROR: \\x1b]0;owned\\x07 died" in text


# ---- the command line -----------------------------------------------------------------------

def test_cli_native_summary(native, capsys):
    assert main(["cache", str(native.cache_dir)]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"Neuron compile cache: {native.cache_dir} (as given)")
    assert "3 from the C++ path" in out and "0 held now (a build in progress)" in out


def test_cli_prune_is_a_dry_run_until_yes(native, capsys):
    before = _snapshot(native.cache_dir.parent)
    assert main(["cache", str(native.cache_dir), "--prune"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Dry run: would remove 4 file(s) from ")
    assert "Nothing was removed. To remove them, run again with --yes." in out
    assert f"old lock file   {native.made['locks'][-1]}" in out
    assert _snapshot(native.cache_dir.parent) == before
    assert main(["cache", str(native.cache_dir), "--prune", "--yes"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("Removed 4 of 4 file(s) from ")
    assert not any(p.exists() for p in native.made["tmp"] + native.made["zero"])
    assert main(["cache", str(native.cache_dir), "--prune"]) == 0
    assert capsys.readouterr().out.startswith("Nothing to prune in ")


def test_cli_prune_of_a_missing_folder_exits_2(tmp_path, capsys):
    assert main(["cache", str(tmp_path / "nope"), "--prune"]) == 2
    err = capsys.readouterr().err
    assert err.startswith(f"neuronkit cache: error: no cache folder at {tmp_path / 'nope'} "
                          "(as given): nothing to prune")


def test_cli_prune_refuses_the_legacy_layout(neuron_cache, capsys):
    before = _snapshot(neuron_cache)
    assert main(["cache", str(neuron_cache), "--prune", "--yes"]) == 2
    assert "--prune cleans the native torch-neuronx layout only" in capsys.readouterr().err
    assert _snapshot(neuron_cache) == before


def test_cli_yes_needs_prune(native, capsys):
    assert main(["cache", str(native.cache_dir), "--yes"]) == 2
    assert "--yes confirms --prune" in capsys.readouterr().err
    assert all(p.exists() for p in native.made["tmp"])


def test_cli_layout_flag_forces_the_layout(native, neuron_cache, capsys):
    assert main(["cache", str(native.cache_dir), "--layout", "legacy"]) == 0
    out = capsys.readouterr().out
    assert "layout     legacy" in out and "no compiled graphs" in out
    assert main(["cache", str(neuron_cache), "--layout", "native"]) == 0
    assert "layout     native" in capsys.readouterr().out
    with pytest.raises(SystemExit) as exc:
        main(["cache", "--layout", "xla"])
    assert exc.value.code == 2


def test_native_torch_neuronx_beside_torch_xla_writes_the_native_layout(monkeypatch, native):
    """Native torch-neuronx (it has neuron_dynamo_backend) writes its own layout whether or not
    torch_xla is also installed in the environment."""
    _fake_module(monkeypatch, "torch_xla")
    with installed_fake():
        report = nk.inspect_cache()
    assert report.layout == "native" and report.path == native.cache_dir
    assert "native" in report.layout_reason and "torch_xla" not in report.layout_reason
