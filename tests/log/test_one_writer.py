"""One file, one writer: every writer of a log file (a recorder, a ``CompileLog``, another
process) is refused a path another writer holds; a save is written whole or not at all; a log cut
short by another program is written again whole when next appended to."""
from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.log import compile_log
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.file_lock import LogPathInUseError
from neuronkit.recorder.recorder import CompileRecorder


def recorder(path) -> CompileRecorder:
    return CompileRecorder(path, device="cpu", backend="eager", rank=0)


def event(n: int, function: str = "f") -> CompileEvent:
    return CompileEvent(function=function, kind="first" if n == 0 else "recompile",
                        started_at=1000.0 + n, input_shapes={"x": [n]})


def loaded(path) -> list[tuple[str, float]]:
    return [(e.function, e.started_at) for e in CompileLog.load(path).events]


# -- every writer takes the lock -------------------------------------------------------------------
def test_a_log_or_a_save_on_a_recording_recorders_path_is_refused(tmp_path):
    path = tmp_path / "compile.jsonl"
    with recorder(path) as rec:
        rec.record(kind="eager_fallback", function="rec", started_at=1.0)
        with pytest.raises(LogPathInUseError, match=r"already the log of another CompileRecorder of "
                                                    r"this process \(rank 0, recording\).*rank_log_path"):
            CompileLog(path=path)  # before: truncated the recorder's file
        other = CompileLog([event(0, "other")])
        with pytest.raises(LogPathInUseError, match=r"already the log of another CompileRecorder"):
            other.save(tmp_path / "." / "compile.jsonl")  # the same file by another name
        assert other.path is None  # refused: still a log in memory
        rec.record(kind="eager_fallback", function="rec", started_at=2.0)
    assert loaded(path) == [("rec", 1.0), ("rec", 2.0)]


def test_a_log_holds_its_path_until_it_lets_it_go(tmp_path):
    path = tmp_path / "compile.jsonl"
    first = CompileLog(path=path)
    first.append(event(0, "first"))
    with pytest.raises(LogPathInUseError, match=r"another CompileLog of this process \(1 event.*"
                                                r"release\(\)"):
        CompileLog(path=path)
    with pytest.raises(LogPathInUseError, match=r"another CompileLog of this process"):
        recorder(path)
    assert loaded(path) == [("first", 1000.0)]
    first.release()
    second = CompileLog([event(0, "second")])
    second.save(path)  # the path let go: another writer may take it
    with pytest.raises(LogPathInUseError, match=r"another CompileLog of this process"):
        first.append(event(1, "first"))
    assert [e.function for e in first.events] == ["first", "first"]  # kept in memory
    assert loaded(path) == [("second", 1000.0)]
    del second  # a log that is gone holds nothing
    first.save(path)
    assert loaded(path) == [("first", 1000.0), ("first", 1001.0)]


HOLDER = textwrap.dedent("""
    import sys
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog
    log = CompileLog(path=sys.argv[1])
    log.append(CompileEvent(function="other process", started_at=1.0))
    print("holding", flush=True)
    sys.stdin.read()                  # until the test lets go (or kills it)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_a_log_of_another_process_is_not_overwritten(tmp_path):
    path = tmp_path / "compile.jsonl"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "holding"
        with pytest.raises(LogPathInUseError, match="in another process"):
            CompileLog([event(0, "this process")]).save(path)
        with pytest.raises(LogPathInUseError, match="in another process"):
            recorder(path)
        assert loaded(path) == [("other process", 1.0)]
    finally:
        child.kill()
        child.wait(60)
    CompileLog([event(0, "this process")]).save(path)  # the OS dropped the dead process's lock
    assert loaded(path) == [("this process", 1000.0)]


# -- a save is written whole or not at all ---------------------------------------------------------
def test_a_save_that_fails_half_way_leaves_the_old_file_whole(tmp_path, monkeypatch):
    path = tmp_path / "log.jsonl"
    CompileLog([event(0, "old"), event(1, "old")]).save(path)
    before = path.read_bytes()
    fields = compile_log.fields_of
    written = []

    def failing(e):  # the disk fills up at the third event
        written.append(e)
        if len(written) == 3:
            raise OSError(28, "No space left on device")
        return fields(e)
    monkeypatch.setattr(compile_log, "fields_of", failing)
    new = CompileLog([event(i, "new") for i in range(5)])
    with pytest.raises(OSError, match="No space left"):
        new.save(path)
    assert path.read_bytes() == before  # before: the old log gone, two new events in its place
    assert [p.name for p in tmp_path.iterdir()] == ["log.jsonl"]  # no temp file left behind
    assert new.path is None


KILLED_SAVE = textwrap.dedent("""
    import os, signal, sys
    from neuronkit.events.event import CompileEvent
    from neuronkit.log import compile_log
    from neuronkit.log.compile_log import CompileLog
    events = [CompileEvent(function="new", started_at=float(i)) for i in range(200)]
    fields, written = compile_log.fields_of, []
    def dying(e):
        written.append(e)
        if len(written) == 150:           # killed in the middle of the save
            os.kill(os.getpid(), signal.SIGKILL)
        return fields(e)
    compile_log.fields_of = dying
    CompileLog(events).save(sys.argv[1])
""")


@pytest.mark.skipif(sys.platform == "win32", reason="SIGKILL: POSIX only")
def test_a_writer_killed_mid_save_leaves_the_old_file_whole(tmp_path):
    path = tmp_path / "log.jsonl"
    CompileLog([event(0, "old"), event(1, "old")]).save(path)
    done = subprocess.run([sys.executable, "-c", KILLED_SAVE, str(path)], timeout=120)
    assert done.returncode == -9
    assert loaded(path) == [("old", 1000.0), ("old", 1001.0)]


# -- a file cut short by another program -------------------------------------------------------------
@pytest.mark.parametrize("cut", ["empty", "half"])
@pytest.mark.parametrize("then", ["append", "update", "wall time"])
def test_a_log_cut_short_by_another_program_is_written_again_whole(tmp_path, cut, then):
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    log.append(event(0))
    log.append(event(1))
    os.truncate(path, 0 if cut == "empty" else path.stat().st_size // 2)  # e.g. `> log.jsonl`
    if then == "append":
        log.append(event(2))
    elif then == "update":
        log.update(1, neff_compile_s=3.0)
    else:
        log.set_wall_time(9.0)
    again = CompileLog.load(path)  # before: events with no header (or half a line) before them
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in log.events]
    assert again.wall_time_s == log.wall_time_s
    assert json.loads(path.read_text().splitlines()[0])["format"] == log.header["format"]


def test_lines_another_program_appended_are_kept(tmp_path):
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    log.append(event(0))
    with open(path, "a") as fh:
        fh.write(json.dumps(event(7, "appended").to_dict()) + "\n")
    log.append(event(1))
    assert [e.function for e in CompileLog.load(path).events] == ["f", "appended", "f"]


def test_a_device_or_pipe_is_never_replaced_by_a_log(tmp_path):
    """An atomic save moves a temp file over its target: never over a device or a pipe
    (``--log /dev/null`` once replaced the device with a file)."""
    import stat

    pipe = tmp_path / "pipe"
    os.mkfifo(pipe)
    with pytest.raises(OSError, match="not a regular file"):
        CompileLog([], path=pipe)
    with pytest.raises(OSError, match="not a regular file"):
        CompileLog([]).save(pipe)
    assert stat.S_ISFIFO(os.stat(pipe).st_mode)
