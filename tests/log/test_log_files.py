"""A log file is untrusted input: what a damaged, hand-edited, truncated, foreign or shared file
does to ``CompileLog.load`` and to the recorders that write it.

The probe classes: bad types and missing fields, garbage lines, truncation and a crash mid-write,
invalid UTF-8, damaged headers, a folder for a file, bad update and wall-time lines, two
recorders (one process, two processes) on one path, and writes that fail.
"""
from __future__ import annotations

import errno
import json
import os
import re
import subprocess
import sys
import textwrap
import warnings

import msgspec
import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import (
    FORMAT,
    FORMAT_VERSION,
    MAX_COUNT,
    MAX_DEPTH,
    MAX_SECONDS,
    MAX_TIME,
    LogFolderError,
    LogFormatError,
    decode_event_lines,
    event_problem,
    repair_event,
)
from neuronkit.log import compile_log
from neuronkit.log.compile_log import CompileLog

HEADER = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu"})


def good(n: int, **fields) -> str:
    """Event line ``n`` as the recorder writes it; ``fields`` replace what it wrote."""
    event = CompileEvent(seq=n, compile_id=f"0/{n}", function="forward", location="m.py:1",
                         started_at=1_700_000_000.0 + n, duration_s=0.5,
                         input_shapes={"x": [2, 3 + n]}, kind="first" if n == 0 else "recompile")
    return json.dumps({**event.to_dict(), **fields})


def write(tmp_path, *lines: str | bytes, name: str = "log.jsonl"):
    path = tmp_path / name
    data = b"".join((line if isinstance(line, bytes) else line.encode()) + b"\n" for line in lines)
    path.write_bytes(data)
    return path


def load_warning(path) -> tuple[CompileLog, str]:
    """The log and its one warning (exactly one)."""
    with pytest.warns(UserWarning) as caught:
        log = CompileLog.load(path)
    assert len(caught) == 1, [str(w.message) for w in caught]
    return log, str(caught[0].message)


# -- schema: every line checked ---------------------------------------------------------------
def test_an_empty_object_is_not_a_phantom_graph_at_time_zero(tmp_path):
    path = write(tmp_path, HEADER, good(0), "{}", good(1))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 1]
    assert min(e.started_at for e in log.events) > 1e9  # no event at t=0 (a 56-year timeline)
    assert str(path) in message
    assert "skipped 1 bad line: line 3 (missing seq, function)" in message


@pytest.mark.parametrize("field, value, said", [
    ("duration_s", "slow", "duration_s: expected a number, got 'slow'"),
    ("input_shapes", [[2, 3]], "input_shapes: expected an object, got [[2, 3]]"),
    ("input_shapes", {"x": "2x3"}, "input_shapes: 'x' expected a list of sizes, got '2x3'"),
    ("input_shapes", {"x": [2, None]}, "input_shapes: 'x' expected a list of sizes"),
    ("kind", "exploded", "kind: expected one of first, recompile"),
    ("seq", -1, "seq: expected an integer >= 0, got -1"),
    ("seq", "3", "seq: expected an integer, got '3'"),
    ("rank", True, "rank: expected an integer, got True"),
    ("started_at", None, "started_at: expected a number, got None"),
    ("reasons", "guard failed", "reasons: expected a list, got 'guard failed'"),
    ("reasons", ["ok", 7], "reasons: expected a list of strings"),
    ("metrics", [], "metrics: expected an object, got []"),
    ("neff_compile_s", "94", "neff_compile_s: expected a number or null, got '94'"),
    ("ops", {"aten::mm": True}, "ops: 'aten::mm' expected an integer >= 0, got True"),
    ("forecast", "yes", "forecast: expected true or false, got 'yes'"),
])
def test_a_wrongly_typed_field_skips_its_line_and_names_the_field(tmp_path, field, value, said):
    path = write(tmp_path, HEADER, good(0), good(1, **{field: value}), good(2))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 2]  # the good lines, all of them
    assert f"line 3 ({said}" in message


def test_non_finite_numbers_are_dropped_from_events_kept(tmp_path):
    path = write(tmp_path, HEADER, good(0, started_at=float("nan")), good(1, duration_s=1e400),
                 good(2))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 1, 2]
    assert log.events[0].started_at == log.events[1].started_at  # placed at the next start
    assert log.events[1].duration_s == 0.0
    assert "line 2 event 0 (started_at: expected a finite time, got nan)" in message
    assert "line 3 event 1 (duration_s: expected seconds (a finite number >= 0), got inf)" in message


def test_views_of_a_log_with_bad_lines_do_not_crash(tmp_path):
    import neuronkit as nk
    from neuronkit.views.chrome_trace import write_chrome_trace
    from neuronkit.views.text import format_report

    path = write(tmp_path, HEADER, good(0), good(1, duration_s="slow"),
                 good(2, input_shapes=[2, 3]), "{}", good(3, reasons=None), good(4))
    log, _ = load_warning(path)
    assert [e.seq for e in log.events] == [0, 4]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # each view loads the file again: the same warning
        assert "forward" in format_report(path, limit=10)
        assert nk.diagnose(log) and log.summary()[0]["graphs"] == 2
        json.loads(write_chrome_trace(log, tmp_path / "t.json").read_text())


def test_unknown_fields_are_kept_out_but_the_event_is_kept(tmp_path):
    path = write(tmp_path, HEADER, good(0, from_the_future={"x": 1}))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log = CompileLog.load(path)
    assert [e.seq for e in log.events] == [0]


def test_a_version_1_log_without_the_newer_fields_loads_without_a_warning(tmp_path):
    old = {k: v for k, v in json.loads(good(0)).items()
           if k not in ("calls", "neff_compile_s", "neff_cache", "kernels", "ops", "forecast")}
    path = write(tmp_path, json.dumps({"format": FORMAT, "version": 1}), json.dumps(old))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log = CompileLog.load(path)
    assert log.events[0].input_shapes == {"x": [2, 3]} and log.events[0].ops == {}


# -- garbage, truncation, a crash mid-write -----------------------------------------------------
def test_garbage_lines_are_named_and_counted_in_one_warning(tmp_path):
    lines = [HEADER] + [good(i) if i % 2 == 0 else f"garbage {i}" for i in range(30)]
    path = write(tmp_path, *lines)
    log, message = load_warning(path)
    assert len(log.events) == 15
    assert "skipped 15 bad lines: line 3 (not JSON: Expecting value at column 1)" in message
    assert ", and 5 more" in message  # ten named, the rest counted
    assert message.endswith("kept 15 events")


def test_non_object_lines_and_a_second_header(tmp_path):
    path = write(tmp_path, HEADER, good(0), "[1, 2]", "null", HEADER, good(1))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 1]
    assert "line 3 (expected a JSON object, got list)" in message
    assert "line 4 (expected a JSON object, got NoneType)" in message
    assert "line 5 (a second header line: two writers shared this file)" in message


def test_a_truncated_last_line_is_the_only_loss(tmp_path):
    path = tmp_path / "log.jsonl"
    path.write_text(HEADER + "\n" + good(0) + "\n" + good(1)[:-20])  # no newline: cut short
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0]
    assert "line 3 (truncated last line" in message


def test_a_write_that_failed_mid_line_loses_only_that_line(tmp_path, monkeypatch):
    """A full disk in the middle of a line: the next line starts on a line of its own."""
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    log.append(CompileEvent(function="f", kind="first", started_at=1.0))

    class HalfWrite:  # events.py's os, whose write stops half way with ENOSPC
        def __getattr__(self, name):
            return getattr(os, name)

        @staticmethod
        def write(fd, data):
            os.write(fd, bytes(data[: len(data) // 2]))
            raise OSError(errno.ENOSPC, "No space left on device")

    monkeypatch.setattr(compile_log, "os", HalfWrite())
    with pytest.raises(OSError, match="No space"):
        log.append(CompileEvent(function="f", started_at=2.0))
    monkeypatch.undo()
    log.append(CompileEvent(function="f", started_at=3.0))
    loaded, message = load_warning(path)
    assert [(e.seq, e.started_at) for e in loaded.events] == [(0, 1.0), (2, 3.0)]
    assert "line 3 (not JSON" in message
    assert [e.seq for e in log.events] == [0, 1, 2]  # memory kept all three


def test_a_log_file_deleted_while_recording_is_written_again_whole(tmp_path):
    path = tmp_path / "logs" / "log.jsonl"
    log = CompileLog(path=path)
    log.append(CompileEvent(function="f", kind="first", started_at=1.0))
    path.unlink()
    path.parent.rmdir()
    log.append(CompileEvent(function="f", started_at=2.0))  # before: a file with no header
    assert [e.started_at for e in CompileLog.load(path).events] == [1.0, 2.0]


def test_a_big_log_with_one_bad_line_keeps_every_other_line(tmp_path):
    """Lines are parsed in chunks: a bad line sends its chunk down the line-by-line path."""
    lines = [HEADER] + [good(i) for i in range(5000)]
    lines[3210] = good(3209, duration_s="slow")
    lines.insert(4000, "")  # blank lines are nothing
    path = write(tmp_path, *lines)
    log, message = load_warning(path)
    assert len(log.events) == 4999 and 3209 not in {e.seq for e in log.events}
    assert "skipped 1 bad line: line 3211 (duration_s" in message


def test_lines_that_only_parse_together_are_not_read_as_one(tmp_path):
    path = write(tmp_path, HEADER, '{"seq": 0, "kind": "first", "function": "f", "started_at": 1,'
                 ' "input_shapes": {"x": [1', '2]}}', good(1))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [1]
    assert "line 2 (not JSON" in message and "line 3 (not JSON" in message


# -- invalid UTF-8 -------------------------------------------------------------------------------
def test_one_invalid_utf8_byte_costs_at_most_its_line(tmp_path):
    inside_a_string = good(1, context="step \udcff").encode().replace(b"\\udcff", b"\xff")
    outside = b'{"seq": 2, \xff "kind": "first"}'
    path = write(tmp_path, HEADER, good(0), inside_a_string, outside, good(3))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 1, 3]
    assert log.events[1].context == "step \ufffd"
    assert "line 4 (not JSON" in message
    assert "invalid UTF-8 read as U+FFFD on line 3, 4" in message


# -- headers and paths ---------------------------------------------------------------------------
@pytest.mark.parametrize("header, match", [
    ({"format": FORMAT}, r"header line has no \"version\": a damaged header"),
    ({"format": FORMAT, "version": "2"}, r"log format version '2', not a version number"),
    ({"format": FORMAT, "version": 1.5}, r"log format version 1.5, not a version number"),
    ({"format": FORMAT, "version": 0}, r"version 0, not a version number: a damaged header"),
    ({"format": FORMAT, "version": FORMAT_VERSION + 1}, r"Upgrade neuronkit"),
])
def test_each_damaged_header_has_its_own_message(tmp_path, header, match):
    path = write(tmp_path, json.dumps(header), good(0))
    with pytest.raises(LogFormatError, match=match) as caught:
        CompileLog.load(path)
    if header.get("version") != FORMAT_VERSION + 1:
        assert "Upgrade" not in str(caught.value)


def test_a_folder_is_not_found_but_a_folder(tmp_path):
    with pytest.raises(LogFolderError, match=r"is a folder, not a compile log: pass a \.jsonl"):
        CompileLog.load(tmp_path)
    assert issubclass(LogFolderError, IsADirectoryError) and issubclass(LogFolderError, ValueError)


def test_a_damaged_header_wall_time_or_ranks_is_dropped(tmp_path):
    header = json.dumps({"format": FORMAT, "version": 2, "wall_time_s": "long", "ranks": 3})
    log, message = load_warning(write(tmp_path, header, good(0)))
    assert log.wall_time_s is None and "ranks" not in log.header
    assert "line 1 (header wall_time_s: expected a number, got 'long')" in message
    assert "line 1 (header ranks: expected a list of ranks, got 3)" in message
    assert log.summary()[0]["share_of_wall"] is None


# -- update and wall-time lines ------------------------------------------------------------------
def test_update_lines_are_checked_like_events(tmp_path):
    path = write(tmp_path, HEADER, good(0), good(1),
                 json.dumps({"update": 0, "neff_compile_s": 94.2, "neff_cache": "compiled"}),
                 json.dumps({"update": 1, "kind": "failed"}),
                 json.dumps({"update": 1, "neff_compile_s": "slow"}),
                 json.dumps({"update": 1, "neff_cache": "elsewhere"}),
                 json.dumps({"update": 7, "neff_compile_s": 1.0}),
                 json.dumps({"update": "0", "neff_compile_s": 1.0}))
    log, message = load_warning(path)
    assert (log.events[0].neff_compile_s, log.events[0].neff_cache) == (94.2, "compiled")
    assert (log.events[1].kind, log.events[1].neff_compile_s, log.events[1].neff_cache) == (
        "recompile", None, None)
    assert "line 5 (kind: an update line may set only neff_compile_s, neff_cache, cache_key)" in message
    assert "line 6 (neff_compile_s: expected a number or null, got 'slow')" in message
    assert "line 7 (neff_cache: expected one of compiled" in message
    assert "line 8 (updates event 7, which the log does not hold)" in message
    assert "line 9 (update: expected an event's seq (an integer >= 0), got '0')" in message


def test_wall_time_lines_are_checked(tmp_path):
    path = write(tmp_path, HEADER, good(0), json.dumps({"wall_time_s": 10.0}),
                 json.dumps({"wall_time_s": "forever"}), json.dumps({"wall_time_s": -1}))
    log, message = load_warning(path)
    assert log.wall_time_s == 10.0
    assert "line 4 (wall_time_s: expected a number, got 'forever')" in message
    assert "line 5 (wall_time_s: expected seconds" in message


# -- recorders sharing a path ---------------------------------------------------------------------
def recorder(path, **kw):
    from neuronkit.recorder.recorder import CompileRecorder

    return CompileRecorder(path, device="cpu", backend="eager", rank=0, **kw)


def test_a_second_recorder_on_an_active_recorders_path_is_refused(tmp_path):
    from neuronkit.log.file_lock import LogPathInUseError

    path = tmp_path / "compile.jsonl"
    outer = recorder(path).start()
    try:
        outer.record(kind="eager_fallback", function="f", calls=1)
        with pytest.raises(LogPathInUseError, match=r"already the log of another CompileRecorder "
                                                    r"of this process.*nk\.rank_log_path"):
            recorder(path)  # before: truncated the outer recorder's file
        with pytest.raises(LogPathInUseError):
            recorder(tmp_path / "." / "compile.jsonl")  # the same file by another name
        outer.record(kind="eager_fallback", function="f", calls=2)
    finally:
        outer.stop()
    assert [e.calls for e in CompileLog.load(path).events] == [1, 2]
    after = recorder(path)  # a stopped recorder lets its path go
    after.record(kind="eager_fallback", function="g", calls=3)
    assert [e.function for e in CompileLog.load(path).events] == ["g"]


def test_a_restart_after_another_recorder_rewrote_the_file_is_refused(tmp_path):
    from neuronkit.log.file_lock import LogPathInUseError

    path = tmp_path / "compile.jsonl"
    first = recorder(path)
    with first:
        first.record(kind="eager_fallback", function="first", calls=1)
    with recorder(path) as second:
        second.record(kind="eager_fallback", function="second", calls=1)
    with pytest.raises(LogPathInUseError, match=r"changed since this recorder stopped"):
        first.start()  # appending would mix two logs in one file
    assert not first.active and len(first.events) == 1
    assert [e.function for e in CompileLog.load(path).events] == ["second"]
    first.log.save(tmp_path / "first.jsonl")  # what the error says: elsewhere, then go on
    with first:
        first.record(kind="eager_fallback", function="first again", calls=1)
    assert [e.function for e in CompileLog.load(tmp_path / "first.jsonl").events] == [
        "first", "first again"]
    third = recorder(tmp_path / "third.jsonl")
    with third:
        third.record(kind="eager_fallback", function="a", calls=1)
    with third:
        third.record(kind="eager_fallback", function="b", calls=1)
    assert [e.function for e in CompileLog.load(tmp_path / "third.jsonl").events] == ["a", "b"]


def test_a_stopped_recorder_whose_file_was_taken_keeps_its_events_in_memory(tmp_path):
    path = tmp_path / "compile.jsonl"
    first = recorder(path)
    with recorder(path) as second:
        second.record(kind="eager_fallback", function="second", calls=1)
        with pytest.warns(RuntimeWarning, match="could not write a compile event"):
            first.record(kind="eager_fallback", function="first", calls=1)
    assert [e.function for e in first.events] == ["first"] and first.log.path is None
    assert [e.function for e in CompileLog.load(path).events] == ["second"]


def test_a_folder_as_log_path_is_refused_clearly(tmp_path):
    with pytest.raises(IsADirectoryError, match=r"is a folder: pass a \.jsonl file"):
        recorder(tmp_path)


HOLDER = textwrap.dedent("""
    import sys
    from neuronkit.recorder.recorder import CompileRecorder
    rec = CompileRecorder(sys.argv[1], device="cpu", backend="eager", rank=0).start()
    rec.record(kind="eager_fallback", function="other process", calls=1)
    print("recording", flush=True)
    sys.stdin.read()                  # until the test lets go (or kills it)
""")


@pytest.mark.skipif(sys.platform == "win32", reason="flock: POSIX only")
def test_two_processes_on_one_path_and_a_killed_holder_leaves_no_lock(tmp_path):
    from neuronkit.log.file_lock import LogPathInUseError

    path = tmp_path / "compile.jsonl"
    child = subprocess.Popen([sys.executable, "-c", HOLDER, str(path)], stdin=subprocess.PIPE,
                             stdout=subprocess.PIPE, text=True)
    try:
        assert child.stdout is not None and child.stdout.readline().strip() == "recording"
        with pytest.raises(LogPathInUseError, match="a recorder in another process"):
            recorder(path)
        assert [e.function for e in CompileLog.load(path).events] == ["other process"]
    finally:
        child.kill()
        child.wait(60)
    with recorder(path) as rec:  # the OS dropped the dead process's lock
        rec.record(kind="eager_fallback", function="this process", calls=1)
    assert [e.function for e in CompileLog.load(path).events] == ["this process"]


# -- the fast path (events decoded together) and the line-by-line path agree --------------------
HAND = json.dumps({"function": "hand", "kind": "recompile", "seq": 3})  # another key order: the
# block it is in is read line by line
MUTATIONS = [
    {}, {"seq": -1}, {"seq": 1.0}, {"seq": True}, {"rank": -2}, {"calls": -1}, {"kernels": -3},
    {"graph_count": "1"}, {"duration_s": -0.1}, {"duration_s": 1}, {"started_at": "now"},
    {"kind": "exploit"}, {"kind": None}, {"neff_cache": "maybe"}, {"neff_cache": "disk_hit"},
    {"neff_compile_s": -1}, {"neff_compile_s": 3}, {"input_shapes": {"x": [1, "s0"]}},
    {"input_shapes": {"x": [1, 2.5]}}, {"input_shapes": {"x": 3}}, {"input_shapes": []},
    {"reasons": ["a", 1]}, {"reasons": "a"}, {"ops": {"aten::mm": 2}}, {"ops": {"aten::mm": -2}},
    {"ops": {"aten::mm": True}}, {"forecast": 1}, {"metrics": []}, {"function": 7},
    {"extra_field": "kept out"},
    # out of range: finite numbers no view can show, integers wider than 64 bits, deep nesting
    {"duration_s": 1e308}, {"neff_compile_s": 1e300}, {"started_at": 1e308}, {"started_at": -1e300},
    {"seq": 2**64}, {"rank": 2**63}, {"calls": 10**30}, {"graph_count": 2**60}, {"kernels": 2**60},
    {"ops": {"aten::mm": 10**20}}, {"input_shapes": {"x": [10**20]}}, {"input_shapes": {"x": [-1]}},
    {"metrics": {"a": 10**30}}, {"metrics": {"a": -(2**64)}}, {"metrics": {"a": [1, {"b": 2**64}]}},
    {"metrics": {"a": 1e308, "b": [1, "x", None, True, {"c": -2.5}]}},
    {"metrics": {"a": json.loads("[" * 40 + "]" * 40)}}, {"extra_field": 10**30},
    {"extra_field": json.loads("[" * 40 + "]" * 40)},
    # each bound, and just past it
    {"seq": MAX_COUNT}, {"seq": MAX_COUNT + 1}, {"rank": MAX_COUNT}, {"kernels": MAX_COUNT + 1},
    {"duration_s": MAX_SECONDS}, {"duration_s": MAX_SECONDS * (1 + 1e-9)},
    {"neff_compile_s": MAX_SECONDS}, {"neff_compile_s": MAX_SECONDS + 1},
    {"started_at": -MAX_TIME}, {"started_at": MAX_TIME}, {"started_at": MAX_TIME + 1},
    {"started_at": -MAX_TIME - 1}, {"input_shapes": {"x": [0, MAX_COUNT, "s0"]}},
    {"input_shapes": {"x": [MAX_COUNT + 1]}}, {"ops": {"aten::mm": MAX_COUNT}},
    {"ops": {"aten::mm": MAX_COUNT + 1}}, {"metrics": {"a": 2**63 - 1, "b": -(2**63)}},
    {"metrics": {"a": 2**63}}, {"metrics": {"a": -(2**63) - 1}},
    {"metrics": {"a": json.loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)}},
    {"metrics": {"a": json.loads('{"b": ' * MAX_DEPTH + "1" + "}" * MAX_DEPTH)}},
    {"metrics": {"a": json.loads("[" * (MAX_DEPTH + 1) + "]" * (MAX_DEPTH + 1))}},
    {"metrics": {"a": json.loads('{"b": ' * (MAX_DEPTH + 1) + "1" + "}" * (MAX_DEPTH + 1))}},
]


@pytest.mark.parametrize("change", MUTATIONS,
                         ids=lambda c: ",".join(f"{k}={v!r}" for k, v in c.items()) or "none")
def test_the_block_decoder_and_the_line_checker_agree(tmp_path, change):
    """Each line is judged the same whether its block decodes at once (msgspec) or line by line
    (the checker that names the field): a crafted value never slips through the fast path. A
    line the checker refuses is kept only as an event with its values out of bounds dropped."""
    data = {**json.loads(good(1)), **change}
    expected_ok = event_problem(data, set()) is None
    kept = repair_event(dict(data))[0] is None
    line = json.dumps(data)
    path = write(tmp_path, HEADER, good(0), line, good(2))
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = CompileLog.load(path)
    assert ([e.seq for e in log.events] == [0, data["seq"], 2]) is kept
    assert bool(caught) is not expected_ok
    assert all(event_problem(e.to_dict(), set()) is None for e in log.events)
    try:  # the C decoder alone, on this line: it accepts exactly what the checker accepts
        decode_event_lines(f"[{line}]".encode())
        decoded = True
    except (msgspec.ValidationError, msgspec.DecodeError, RecursionError):
        decoded = False
    assert decoded is expected_ok
    with warnings.catch_warnings(record=True):  # and the file read line by line agrees too
        warnings.simplefilter("always")
        by_line = CompileLog.load(write(tmp_path, HEADER, good(0), line, good(2), HAND, name="b"))
    assert ([e.seq for e in by_line.events] == [0, data["seq"], 2, 3]) is kept


def test_blocks_split_anywhere_keep_every_line_and_its_number(tmp_path, monkeypatch):
    """A file is read in blocks: lines cut by a block's end, a line longer than a block, and a
    bad line after several blocks are all read, and named by their real line number."""
    from neuronkit.log import reader as log_reader

    lines = [HEADER] + [good(i) for i in range(300)]
    lines[250] = good(249, kind="exploit")
    lines.insert(100, json.dumps({"update": 5, "neff_compile_s": 2.0, "neff_cache": "compiled"}))
    lines.insert(120, good(999, context="x" * 3000))  # longer than a block
    path = write(tmp_path, *lines)
    monkeypatch.setattr(log_reader, "_BLOCK", 1000)  # a few lines per block
    log, message = load_warning(path)
    assert len(log.events) == 300 and 249 not in {e.seq for e in log.events}
    assert "line 253 (kind: expected one of" in message  # after the header, an update, event 999
    assert log.events[5].neff_compile_s == 2.0 and log.events[5].neff_cache == "compiled"
    assert [e.seq for e in log.events][:120] == [*range(118), 999, 118]


def test_events_in_another_key_order_keep_their_place(tmp_path):
    """A hand-written event (keys in another order) between neuronkit's lines stays in order."""
    other = json.dumps({"function": "hand", "kind": "recompile", "seq": 1})
    path = write(tmp_path, HEADER, good(0), other, good(2))
    log = CompileLog.load(path)
    assert [(e.seq, e.function) for e in log.events] == [(0, "forward"), (1, "hand"), (2, "forward")]


# -- what reaches a terminal, numbers out of range, lines no parser can hold --------------------
TERMINAL_CONTROLS = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e"
                               "\u2066-\u2069\u2028\u2029]")


def test_the_warning_carries_no_escape_from_a_key_or_a_file_name(tmp_path):
    path = write(tmp_path, HEADER, good(0), json.dumps({"update": 0, "\u001b]0;title\u0007": 1}),
                 good(1, kind="\x1b[2J\u202e"), name="log\x1b]0;x\x07\u202e\n.jsonl")
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0]
    assert not TERMINAL_CONTROLS.search(message), repr(message)
    assert message.startswith(str(tmp_path / "log .jsonl"))  # the file, its controls dropped
    assert "line 3 ('\\x1b]0;title\\x07': an update line may set only" in message  # shown quoted
    assert "line 4 (kind: expected one of" in message


@pytest.mark.parametrize("fields, said", [
    ({"duration_s": 1e308}, "duration_s: expected seconds <= 1e+09 (31 years), got 1e+308"),
    ({"neff_compile_s": 1e300}, "neff_compile_s: expected seconds <= 1e+09"),
    ({"started_at": 1e308}, "started_at: expected a time within ±1e+10 s, got 1e+308"),
    ({"started_at": -1e300}, "started_at: expected a time within ±1e+10 s"),
    ({"rank": 10**30}, "rank: expected an integer <= 9007199254740991"),
    ({"calls": 10**300}, "calls: expected an integer <= 9007199254740991, got 1000"),
    ({"graph_count": 2**60}, "graph_count: expected an integer <="),
    ({"kernels": 2**60}, "kernels: expected an integer <="),
    ({"ops": {"aten::mm": 10**20}}, "ops: 'aten::mm' expected an integer <= 9007199254740991"),
    ({"input_shapes": {"x": [2, 10**20]}}, "input_shapes: 'x' expected a list of sizes"),
    ({"input_shapes": {"x": [2, -1]}}, "input_shapes: 'x' expected a list of sizes"),
    ({"metrics": {"a": [1, {"b": 10**30}]}}, "metrics: a number out of range"),
    ({"metrics": {"a": float("inf")}}, "metrics: a number out of range"),
    ({"metrics": {"a": json.loads("[" * 40 + "]" * 40)}}, "metrics: nested deeper than 8"),
])
def test_numbers_out_of_range_are_dropped_and_named_their_event_kept(tmp_path, fields, said):
    """Finite but absurd numbers (1e308 s, a 2**64 rank) once printed Infinity in report --json,
    broke the chart and the trace, and ran a text line to 659 columns: the value is dropped, not
    the compile it belongs to."""
    path = write(tmp_path, HEADER, good(0), good(1, **fields), good(2))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 1, 2]
    assert f"line 3 event 1 ({said}" in message
    assert all(event_problem(e.to_dict(), set()) is None for e in log.events)


def test_a_seq_out_of_range_skips_its_line(tmp_path):
    """``seq`` names the event (update lines point at it): out of range, the line is no event."""
    path = write(tmp_path, HEADER, good(0), good(1, seq=2**64), good(2))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == [0, 2]
    assert "line 3 (seq: expected an integer <= 9007199254740991, got 18446744073709551616)" in message


def test_wall_times_and_updates_out_of_range_are_skipped(tmp_path):
    header = json.dumps({"format": FORMAT, "version": 2, "wall_time_s": 1e308, "ranks": [0, 2**64]})
    path = write(tmp_path, header, good(0), json.dumps({"update": 0, "neff_compile_s": 1e300}),
                 json.dumps({"wall_time_s": 1e300}))
    log, message = load_warning(path)
    assert log.wall_time_s is None and log.events[0].neff_compile_s is None
    assert "line 1 (header wall_time_s: expected seconds <= 1e+09" in message
    assert "line 1 (header ranks: expected a list of ranks, got [0, 18446744073709551616])" in message
    assert "line 3 (neff_compile_s: expected seconds <= 1e+09" in message
    assert "line 4 (wall_time_s: expected seconds <= 1e+09" in message


HUGE = "1" * 5000  # more digits than Python's int() reads (4300)
DEEP = "[" * 100_000 + "]" * 100_000  # deeper than any parser recurses
UNREADABLE = {
    "huge seq": '{"seq": %s, "function": "f"}' % HUGE,
    "huge dim": '{"seq": 1, "function": "f", "input_shapes": {"x": [%s]}}' % HUGE,
    "deep metric": '{"seq": 1, "function": "f", "metrics": {"a": %s}}' % DEEP,
    "deep unknown field": '{"seq": 1, "function": "f", "from_the_future": %s}' % DEEP,
    "deep line": DEEP,
    "huge update": '{"update": %s, "neff_compile_s": 1}' % HUGE,
    "huge wall time": '{"wall_time_s": %s}' % HUGE,
}


@pytest.mark.parametrize("block", ["decoded together", "line by line"])
@pytest.mark.parametrize("line", UNREADABLE.values(), ids=UNREADABLE.keys())
def test_a_line_no_parser_can_hold_costs_only_that_line(tmp_path, line, block):
    path = write(tmp_path, HEADER, good(0), line, good(2), *([HAND] if block == "line by line" else []))
    log, message = load_warning(path)
    assert [e.seq for e in log.events] == ([0, 2, 3] if block == "line by line" else [0, 2])
    assert "skipped 1 bad line: line 3 (" in message


@pytest.mark.parametrize("block", ["decoded together", "line by line"])
@pytest.mark.parametrize("line", [
    '{"seq": 1, "function": "f", "started_at": -%s}' % HUGE,
    '{"seq": 1, "function": "f", "metrics": {"a": %s}}' % HUGE,
], ids=["huge time", "huge metric"])
def test_a_value_no_parser_can_hold_costs_only_that_value(tmp_path, line, block):
    path = write(tmp_path, HEADER, good(0), line, good(2), *([HAND] if block == "line by line" else []))
    log, message = load_warning(path)
    assert [e.seq for e in log.events][:3] == [0, 1, 2]
    assert "dropped 1 bad field value of 1 event" in message and "line 3 event 1 (" in message
    assert log.events[1].started_at == (log.events[0].started_at if "started_at" in line else 0.0)
    assert log.events[1].metrics == {}


@pytest.mark.parametrize("block", ["decoded together", "line by line"])
def test_an_unknown_fields_long_integer_goes_with_the_field(tmp_path, block):
    """An unknown field is dropped unread by the C decoder: the line-by-line reader agrees."""
    line = '{"seq": 1, "function": "f", "from_the_future": %s}' % HUGE
    path = write(tmp_path, HEADER, good(0), line, good(2), *([HAND] if block == "line by line" else []))
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        log = CompileLog.load(path)
    assert [e.seq for e in log.events][:3] == [0, 1, 2]


@pytest.mark.parametrize("header", [
    '{"format": "neuronkit-compile-log", "version": 2, "torch": %s}' % HUGE,
    '{"format": "neuronkit-compile-log", "version": 2, "torch": %s}' % DEEP,
    DEEP,
], ids=["huge", "deep field", "deep"])
def test_a_header_no_parser_can_hold_is_a_format_error_naming_the_file(tmp_path, header):
    path = write(tmp_path, header, good(0))
    with pytest.raises(LogFormatError, match=re.escape(str(path))):
        CompileLog.load(path)


def test_trace_and_recorder_warnings_carry_no_escape(tmp_path):
    """The other warnings that name a file: a TORCH_TRACE file's skipped lines, and ``say`` (a
    log write that failed, a compile torch could not record, at the user's file and line)."""
    from neuronkit.sources.sink import say

    (tmp_path / "dedicated_log_torch_trace_\x1b]0;x\x07\u202e.log").write_text("junk \x1b[31m\n")
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert len(CompileLog.from_torch_trace(tmp_path)) == 0
        say("could not write the log to /logs/x\x1b]0;t\x07.jsonl", "/src/m\x1b[2J\u202e.py:3")
    trace, written = caught
    assert "dedicated_log_torch_trace_.log: skipped 1 bad trace line" in str(trace.message)
    assert str(written.message) == "could not write the log to /logs/x.jsonl"
    assert written.filename == "/src/m.py" and written.lineno == 3
    said = "".join(str(w.message) + w.filename for w in caught)
    assert not TERMINAL_CONTROLS.search(said), repr(said)
