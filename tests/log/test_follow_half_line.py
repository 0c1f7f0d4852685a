"""The follower given a read that holds one whole line and half of the next: it keeps the half,
gives both events once the rest is written, and warns of no bad line."""
from __future__ import annotations

import json
import warnings

import pytest

import neuronkit as nk


def line(seq: int, function: str) -> bytes:
    return json.dumps({"seq": seq, "function": function, "kind": "first",
                       "started_at": 100.0 + seq, "duration_s": 1.0}).encode() + b"\n"


def header() -> bytes:
    return json.dumps({"format": "neuronkit-compile-log", "version": 3, "rank": 0}).encode() + b"\n"


@pytest.mark.parametrize("header_read_first", [True, False], ids=["header read before",
                                                                   "header in the same read"])
@pytest.mark.parametrize("cut", [1, 20, -1], ids=["one byte", "mid-line", "all but the newline"])
def test_a_whole_line_and_half_the_next_give_both_events_after_the_rest(tmp_path, cut,
                                                                        header_read_first):
    path = tmp_path / "node.rank0.jsonl"
    first, second = line(0, "f"), line(1, "g·é")           # non-ASCII: a cut may split a character
    cut = len(second) + cut if cut < 0 else cut
    follower = nk.follow(tmp_path)
    with warnings.catch_warnings():
        warnings.simplefilter("error")                       # a bad-line warning fails the test
        with open(path, "wb") as fh:
            fh.write(header() if header_read_first else b"")
        assert follower.poll() == []
        with open(path, "ab") as fh:                         # one write: a line and a half
            fh.write((b"" if header_read_first else header()) + first + second[:cut])
        assert [e.function for e in follower.poll()] == ["f"]
        assert follower.poll() == []                         # nothing new: the half still waits
        with open(path, "ab") as fh:
            fh.write(second[cut:])
        assert [e.function for e in follower.poll()] == ["g·é"]
    assert [(e.seq, e.function) for e in follower.log.events] == [(0, "f"), (1, "g·é")]
    assert nk.CompileLog.load(path).events[1].function == "g·é"  # the file itself is whole
