"""nk.follow: logs read while they are written, across a folder, from where the last poll
stopped; merged logs of hosts whose clocks disagree aligned on their barrier; unclosed logs named."""
from __future__ import annotations

import json

import pytest

import neuronkit as nk
from neuronkit.events.event import CompileEvent
from neuronkit.log.rank_logs import merge_logs
from neuronkit.views.text import format_report


def rank_log(folder, rank: int, host: str = "a", **header) -> nk.CompileLog:
    log = nk.CompileLog(path=folder / f"{host}.rank{rank}.jsonl",
                        header={"format": "neuronkit-compile-log", "version": 3, "rank": rank,
                                "host": host, **header})
    return log


def event(function: str = "f", at: float = 100.0, kind: str = "first", **fields) -> CompileEvent:
    return CompileEvent(function=function, kind=kind, started_at=at, duration_s=1.0, **fields)


def test_poll_returns_only_what_was_written_since(tmp_path):
    follower = nk.follow(tmp_path)
    assert follower.poll() == [] and not follower.finished
    zero = rank_log(tmp_path, 0)
    zero.append(event("f", 100.0))
    assert [e.function for e in follower.poll()] == ["f"]
    one = rank_log(tmp_path, 1)                              # a rank that appears later
    one.append(event("g", 101.0))
    zero.append(event("h", 102.0))
    assert [(e.function, e.rank) for e in follower.poll()] == [("g", 1), ("h", 0)]
    assert follower.poll() == []
    assert [e.seq for e in follower.log.events] == [0, 1, 2]
    assert follower.log.header["ranks"] == [0, 1] and follower.unclosed_ranks == [0, 1]
    zero.set_wall_time(5.0)
    one.set_wall_time(5.0)
    follower.poll()
    assert follower.finished and follower.unclosed_ranks == []


def test_a_half_written_line_waits_for_the_next_poll(tmp_path):
    log = rank_log(tmp_path, 0)
    follower = nk.follow(tmp_path)
    follower.poll()
    line = json.dumps({"seq": 0, "function": "f", "kind": "first", "started_at": 1.0})
    with open(log.path, "a") as fh:
        fh.write(line[:20])
    assert follower.poll() == []
    with open(log.path, "a") as fh:
        fh.write(line[20:] + "\n")
    assert [e.function for e in follower.poll()] == ["f"]


def test_updates_resolve_the_events_already_returned(tmp_path):
    log = rank_log(tmp_path, 0)
    follower = nk.follow(tmp_path / "a.rank0.jsonl")          # one file
    log.append(event("f", neff_compile_s=None))
    [first] = follower.poll()
    log.update(0, neff_compile_s=120.0, neff_cache="compiled")
    assert follower.poll() == [] and first.neff_compile_s == 120.0


def test_the_file_is_read_on_never_again_from_the_start(tmp_path, monkeypatch):
    log = rank_log(tmp_path, 0)
    for n in range(50):
        log.append(event(f"f{n}", 100.0 + n))
    follower = nk.follow(tmp_path)
    assert len(follower.poll()) == 50
    reads = []
    real_open = open

    def counting(path, mode="r", *args, **kwargs):
        handle = real_open(path, mode, *args, **kwargs)
        if "b" in mode:
            seek = handle.seek
            handle.seek = lambda offset, *a: (reads.append(offset), seek(offset, *a))[1]
        return handle
    monkeypatch.setattr("builtins.open", counting)
    log.append(event("last", 200.0))
    assert [e.function for e in follower.poll()] == ["last"]
    assert reads == [log.path.stat().st_size - len(json.dumps(log.events[-1].to_dict())) - 1]


def test_a_killed_writers_events_stay_and_it_is_named(tmp_path):
    zero, one = rank_log(tmp_path, 0), rank_log(tmp_path, 1)
    zero.append(event("f", 100.0))
    one.append(event("f", 100.0))
    one.append(event("f", 101.0, kind="recompile"))          # then killed: no close line
    zero.set_wall_time(3.0)
    follower = nk.follow(tmp_path)
    assert len(follower.poll()) == 3 and follower.unclosed_ranks == [1]
    assert not follower.finished
    merged = merge_logs(tmp_path)
    assert merged.header["unclosed_ranks"] == [1]
    assert "ended without closing its log (killed, or still running): rank(s) 1" in format_report(merged)


def test_hosts_whose_clocks_differ_by_37_s_merge_aligned(tmp_path):
    true_barrier = 1_000.0
    a, b = rank_log(tmp_path, 0, host="node-a"), rank_log(tmp_path, 1, host="node-b")
    a.set_clock(true_barrier, host="node-a")
    b.set_clock(true_barrier + 37.0, host="node-b")          # node-b's clock runs 37 s ahead
    a.append(event("step", true_barrier + 5.0))
    b.append(event("step", true_barrier + 5.2 + 37.0))      # the same moment, 0.2 s later
    merged = merge_logs(tmp_path)
    starts = {e.rank: e.started_at for e in merged.events}
    assert abs(starts[1] - starts[0]) < 1.0 and starts[1] == pytest.approx(starts[0] + 0.2)
    assert merged.header["clock_offsets"] == {"node-b": 37.0}
    assert "clocks aligned at the first barrier: node-b +37.000 s" in format_report(merged)
    follower = nk.follow(tmp_path)
    follower.poll()
    live = {e.rank: e.started_at for e in follower.log.events}
    assert live == pytest.approx(starts) and follower.offsets == {"node-b": 37.0}


def test_the_clock_line_of_a_saved_log_survives(tmp_path):
    log = rank_log(tmp_path, 0)
    log.set_clock(5.0, host="a")
    log.save(tmp_path / "copy.jsonl")
    assert nk.CompileLog.load(tmp_path / "copy.jsonl").clock == {"barrier_at": 5.0, "host": "a"}


@pytest.mark.parametrize("clock", [{"barrier_at": "soon"}, {"barrier_at": 1e300}, [1],
                                   {"barrier_at": 1.0, "host": {"x": 1}}])
def test_a_bad_clock_line_is_skipped_with_a_warning(tmp_path, clock):
    path = tmp_path / "a.rank0.jsonl"
    path.write_text(json.dumps({"format": "neuronkit-compile-log", "version": 3}) + "\n"
                    + json.dumps({"clock": clock}) + "\n")
    with pytest.warns(UserWarning, match="clock"):
        log = nk.CompileLog.load(path)
    assert log.clock is None


def test_stragglers_are_named_with_the_time_the_others_waited(tmp_path):
    zero, one = rank_log(tmp_path, 0), rank_log(tmp_path, 1)
    for log in (zero, one):
        log.append(event("step", 100.0, input_shapes={"x": [8]}))
    one.append(CompileEvent(function="step", kind="recompile", started_at=110.0, duration_s=30.0,
                            input_shapes={"x": [5]}, neff_compile_s=90.0, neff_cache="compiled"))
    advice = next(a for a in nk.diagnose(merge_logs(tmp_path)) if "ranks compiled" in a.title)
    assert advice.numbers["waited_s"] == {1: 120.0}
    assert "about 120.0 s the others waited for it" in advice.detail


def test_a_log_its_writer_removed_is_no_longer_waited_for(tmp_path):
    kept, empty = rank_log(tmp_path, 0), rank_log(tmp_path, 1, host="launcher")
    follower = nk.follow(tmp_path)
    follower.poll()
    kept.set_wall_time(1.0)
    empty.release()
    empty.path.unlink()                                      # a launcher that compiled nothing
    follower.poll()
    assert follower.finished and list(follower.logs) == [kept.path]


def test_a_rank_that_has_not_written_yet_is_waited_for(tmp_path):
    zero = rank_log(tmp_path, 0, world_size=2)
    zero.set_wall_time(1.0)
    follower = nk.follow(tmp_path)
    follower.poll()
    assert not follower.finished                             # rank 1 of 2 has no log yet
    rank_log(tmp_path, 1, world_size=2).set_wall_time(1.0)
    follower.poll()
    assert follower.finished
