"""Lock files of the native NEFF cache (issue 38, item 6): a lock file is reused and its time never
refreshed (``core/cache/FileLock.cpp:87``), so an old file that a fresh build has taken again is
a build in progress, never "stale"; the holder is named from ``/proc/locks``."""
from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

import neuronkit as nk
from neuron_fake import NativeCacheWriter, native_key, python_key
from neuronkit.setup.cache import prune_cache
from neuronkit.setup.cache_native import LockHolder, flock_holders
from neuronkit.setup.doctor_native import lock_checks

linux_locks = pytest.mark.skipif(not Path("/proc/locks").exists(), reason="needs /proc/locks")

# holds an exclusive flock on argv[1] (as FileLock.cpp does) until its stdin closes
HOLDER = """
import fcntl, os, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
print("holding", flush=True)
sys.stdin.read()
"""

# takes the flock, starts a child that inherits the descriptor (no O_CLOEXEC, as FileLock.cpp and
# NeuronCompiler.cpp's fork/execvp), prints the child's pid and exits: the child holds the lock
ORPHANING = """
import fcntl, os, subprocess, sys
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], pass_fds=(fd,),
                         stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL)
print(child.pid, flush=True)
"""


@pytest.fixture
def writer(monkeypatch, tmp_path):
    """A native cache with one NEFF, the env pointing at it, the default 1200 s lock timeout."""
    for name in ("torch_neuronx", "torch_xla"):
        monkeypatch.setitem(sys.modules, name, None)
    w = NativeCacheWriter.under(tmp_path / "native")
    for var, value in w.env().items():
        monkeypatch.setenv(var, value)
    for var in ("TORCH_NEURONX_NEFF_CACHE_LOCK_TIMEOUT", "TORCH_NEURONX_NEFF_DISABLE_CACHE"):
        monkeypatch.delenv(var, raising=False)
    w.neff()
    return w


@pytest.fixture
def hold():
    """``hold(path)``: a live process holding ``path``'s flock; released at the end."""
    started = []

    def start(path: Path) -> subprocess.Popen:
        proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                                stdout=subprocess.PIPE, text=True)
        started.append(proc)
        assert proc.stdout.readline().strip() == "holding"
        return proc

    yield start
    for proc in started:
        proc.stdin.close()
        proc.wait(timeout=10)


def _lock(cache_dir, path):
    [found] = [lk for lk in nk.inspect_cache(cache_dir).native.locks if lk.path == path]
    return found


@linux_locks
def test_old_lock_taken_again_by_a_live_build_is_held_by_its_pid_not_stale(writer, hold):
    """The issue: a 2-day-old lock file (reused, mtime never refreshed) that a build started a
    moment ago holds. Before the fix it was "stale: held past the lock timeout" and the doctor
    said to stop its holder."""
    lock = writer.lock(native_key("taken again now"), time.time() - 2 * 86400)
    proc = hold(lock)
    found = _lock(writer.cache_dir, lock)
    assert found.held is True and not found.leftover
    assert [h.pid for h in found.holders] == [proc.pid]
    assert found.holders[0].running and HOLDER.strip().splitlines()[0] in found.holders[0].command
    report = nk.inspect_cache(writer.cache_dir)
    text = str(report)
    assert f"{lock}  held now by pid {proc.pid} ({sys.executable} -c" in text
    assert "a build in progress" in text and "stale" not in text
    assert "counted from the start of its own wait" in text
    assert "1 lock file (1 held: a build in progress)" in report.summary_line()
    checks = {c.name: c for c in lock_checks(report.native)}
    assert set(checks) == {"lock files", "held locks"}
    assert all(c.status == "ok" for c in checks.values())
    held = checks["held locks"].text
    assert held.startswith(f"1 lock held now, held by pid {proc.pid} (")
    assert "counted from the start of their own wait" in held
    for word in ("stale", "stop", "fuser", "hung"):
        assert word not in held and word not in checks["lock files"].text
    assert report.native.prunable == []
    assert prune_cache(writer.cache_dir, dry_run=False).items == []
    assert lock.exists()


@linux_locks
def test_the_python_layout_lock_names_its_holder_too(writer, hold):
    key = python_key("sync-mode eager op")
    lock = writer.python_lock(key, time.time() - 86400)
    proc = hold(lock)
    found = _lock(writer.cache_dir, lock)
    assert (found.kind, found.held, [h.pid for h in found.holders]) == ("python", True, [proc.pid])


@linux_locks
def test_a_lock_held_by_an_orphaned_child_says_its_taker_is_gone(writer):
    lock = writer.lock(native_key("parent killed mid-build"), time.time() - 60)
    taker = subprocess.run([sys.executable, "-c", ORPHANING, str(lock)], capture_output=True,
                           text=True, timeout=30, check=True)
    child = int(taker.stdout.strip())
    try:
        found = _lock(writer.cache_dir, lock)
        assert found.held is True
        [holder] = found.holders
        assert not holder.running and holder.pid != child
        assert "no longer running" in str(holder) and "neuronx-cc" in str(holder)
        assert "no longer running" in str(nk.inspect_cache(writer.cache_dir))
    finally:
        os.kill(child, 9)


def test_an_old_unheld_lock_is_a_leftover_and_a_young_one_is_kept(writer):
    old = writer.lock(native_key("finished yesterday"), time.time() - 86400)
    young = writer.lock(native_key("finished a minute ago"), time.time() - 60)
    cache = nk.inspect_cache(writer.cache_dir).native
    assert [lk.path for lk in cache.leftover_locks] == [old]
    assert cache.held_locks == [] and all(lk.holders == [] for lk in cache.locks)
    assert [c.name for c in lock_checks(cache)] == ["lock files"]
    assert {i.path for i in prune_cache(writer.cache_dir).items} == {old}
    assert young.exists()


def test_proc_locks_lines_are_read_as_granted_flock_holders():
    text = ("1: FLOCK  ADVISORY  WRITE 4507 fe:00:2148327 0 EOF\n"
            "1: -> FLOCK  ADVISORY  WRITE 4600 fe:00:2148327 0 EOF\n"   # a blocked waiter
            "2: POSIX  ADVISORY  WRITE 812 08:01:77 0 EOF\n"            # not a flock
            "3: FLOCK  ADVISORY  READ  0 103:0a:99 0 EOF\n"             # pid unknown here
            "4: FLOCK  ADVISORY  WRITE 4711 103:0a:99 0 EOF\n"
            "garbage line\n5: FLOCK ADVISORY WRITE x y\n")
    assert flock_holders(text) == {(0xfe, 0, 2148327): [4507], (0x103, 0x0a, 99): [4711]}


def test_holder_text_is_printable_and_says_this_process():
    me = LockHolder(os.getpid(), "python train.py", True)
    assert str(me) == f"pid {os.getpid()} (this process) (python train.py)"
    assert str(LockHolder(12, None, True)) == "pid 12"
