"""What `neuronkit report` says of a file that is no compile log, and of a log cut short: plain
words on what the file is not and what to give instead, a warning without Python's source line,
and the note that the run was killed or is still running."""
from __future__ import annotations

import json
import warnings

import pytest

from neuronkit.apps.cli import EXIT_ERROR, EXIT_OK, main
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION, LogFormatError, LogWarning
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log

HEADER = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu"})
KILLED = "killed, or still running"


def event_line(n: int) -> str:
    return json.dumps(CompileEvent(seq=n, function="forward", started_at=100.0 + n,
                                   duration_s=0.5, kind="first" if n == 0 else "recompile").to_dict())


def log_file(tmp_path, name: str, *, closed: bool, cut: bool = False):
    """A log of two events: closed (a wall-time line last), or not; ``cut``: a last line cut
    mid-way, as a killed writer leaves it."""
    text = "\n".join([HEADER, event_line(0), event_line(1)]) + "\n"
    text += json.dumps({"wall_time_s": 10.0}) + "\n" if closed else ""
    text += event_line(2)[:25] if cut else ""
    path = tmp_path / name
    path.write_text(text)
    return path


@pytest.mark.parametrize("name, data, what", [
    ("timeline.png", b"\x89PNG\r\n\x1a\n\x00\x00\x00\rIHDR", "it is not text"),
    ("notes.txt", b"step,loss\n1,2.0\n", "its first line is not JSON"),
    ("report.json", b'{\n  "format": "neuronkit-report"\n}\n', "its first line is not JSON"),
    ("other.jsonl", b'{"hello": 1}\n', "its first line is JSON but no neuronkit header"),
])
def test_a_file_that_is_no_log_is_named_in_plain_words(tmp_path, capsys, name, data, what):
    path = tmp_path / name
    path.write_bytes(data)
    assert main(["report", str(path)]) == EXIT_ERROR
    err = capsys.readouterr().err
    assert err.startswith(f"neuronkit report: error: {path} is not a neuronkit compile log: {what}")
    assert "neuronkit record -- python" in err and "CompileRecorder(log_path=" in err  # what to give
    assert "Expecting" not in err and "char 0" not in err  # not the JSON decoder's words
    assert err.count("\n") == 1


def test_a_truncated_log_warns_without_a_source_line_and_says_it_was_not_closed(tmp_path, capsys):
    path = log_file(tmp_path, "run.jsonl", closed=False, cut=True)
    assert main(["report", str(path)]) == EXIT_OK
    out, err = capsys.readouterr()
    assert f"ended without closing its log ({KILLED})" in out
    assert err == (f"neuronkit report: warning: {path}: skipped 1 bad line: line 4 (truncated last "
                   "line: the writer stopped mid-line); kept 2 events\n")


def test_the_warning_points_at_its_callers_line_not_neuronkits(tmp_path):
    """In Python (a notebook, a script) the warning names the caller's line, whichever neuronkit
    function read the log (it named neuronkit/log/open.py, a line the user never wrote)."""
    path = log_file(tmp_path, "run.jsonl", closed=True, cut=True)
    for read in (CompileLog.load, open_log):
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            read(path)
        assert [(w.category, w.filename) for w in caught] == [(LogWarning, __file__)]


def test_a_closed_log_has_no_note_and_an_unclosed_one_has(tmp_path, capsys):
    closed = log_file(tmp_path, "closed.jsonl", closed=True)
    assert main(["report", str(closed)]) == EXIT_OK
    assert KILLED not in capsys.readouterr().out
    assert CompileLog.load(closed).closed is True
    running = CompileLog.load(log_file(tmp_path, "running.jsonl", closed=False))
    assert running.closed is False and running.header["unclosed_ranks"] == [0]


def test_logs_merged_by_the_report_keep_the_note(tmp_path, capsys):
    """Two logs named on the command line: the one not closed is still said."""
    closed = log_file(tmp_path, "a.jsonl", closed=True)
    killed = tmp_path / "b.jsonl"
    killed.write_text(json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "rank": 1}) + "\n"
                      + event_line(0) + "\n")
    assert main(["report", str(closed), str(killed)]) == EXIT_OK
    assert f"({KILLED}): rank(s) 1" in capsys.readouterr().out
    merged = CompileLog.merge([CompileLog.load(closed), CompileLog.load(killed)])
    assert merged.header["unclosed_ranks"] == [1]
    assert "unclosed_ranks" not in CompileLog.merge([CompileLog.load(closed)]).header


def test_an_empty_file_and_a_binary_header_are_format_errors(tmp_path):
    empty = tmp_path / "empty.jsonl"
    empty.write_bytes(b"")
    with pytest.raises(LogFormatError, match="is empty: not a neuronkit compile log"):
        CompileLog.load(empty)
    binary = tmp_path / "blob.jsonl"
    binary.write_bytes(b"\x00\x01\x02{}\n")
    with pytest.raises(LogFormatError, match="it is not text"):
        CompileLog.load(binary)
