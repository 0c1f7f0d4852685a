"""CompileEvent / CompileLog: the JSONL file, crash safety, summary, Chrome trace, merge."""
from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import function_labels, short_label
from neuronkit.events.schema import FORMAT, FORMAT_VERSION, LogFormatError
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.chrome_trace import write_chrome_trace


def event(function="forward", started_at=100.0, duration_s=0.5, n=3, kind="recompile", rank=0,
          **kw) -> CompileEvent:
    return CompileEvent(compile_id=kw.pop("compile_id", "0/0"), function=function,
                        location=kw.pop("location", "m.py:1"), backend="eager", device="cpu",
                        started_at=started_at,
                        duration_s=duration_s, input_shapes={"x": [2, n]}, kind=kind, rank=rank,
                        **kw)


def test_header_names_format_versions_device_and_backend(tmp_path):
    from importlib import metadata

    import neuronkit
    from neuronkit.recorder.header import default_header

    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path, header=default_header())   # what a recorder writes
    header = json.loads(path.read_text().splitlines()[0])
    assert header["format"] == FORMAT and header["version"] == FORMAT_VERSION
    assert header["neuronkit"] == neuronkit.__version__
    assert header["torch"] == metadata.version("torch")
    assert header["transformers"] == metadata.version("transformers")
    assert {"device", "backend"} <= set(header) and log.header == header
    bare = CompileLog(path=tmp_path / "bare.jsonl")   # the data layer alone: format and version
    assert bare.header == {"format": FORMAT, "version": FORMAT_VERSION}


def test_each_event_is_on_disk_as_soon_as_it_is_appended(tmp_path):
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    for i in range(3):
        log.append(event(n=i, compile_id=f"0/{i}"))
        lines = path.read_text().splitlines()
        assert len(lines) == i + 2
        last = json.loads(lines[-1])
        assert last["seq"] == i and last["input_shapes"] == {"x": [2, i]}
    loaded = CompileLog.load(path)
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in log.events]
    assert loaded.header == {**log.header, "unclosed_ranks": [0]} and loaded.path == path


KILLED_WRITER = textwrap.dedent("""
    import os, signal, sys
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog
    log = CompileLog(path=sys.argv[1])
    for i in range(3):
        log.append(CompileEvent(compile_id=f"0/{i}", function="forward", input_shapes={"x": [i]}))
    with open(sys.argv[1], "a") as fh:      # the process dies in the middle of the next line
        fh.write('{"seq": 3, "compile_id": "0/3", "funct')
        fh.flush()
    os.kill(os.getpid(), signal.SIGKILL)
""")


def test_a_log_from_a_killed_process_keeps_every_complete_event(tmp_path):
    path = tmp_path / "killed.jsonl"
    proc = subprocess.run([sys.executable, "-c", KILLED_WRITER, str(path)], timeout=120)
    assert proc.returncode == -9
    with pytest.warns(UserWarning, match=r"line 5 \(truncated last line"):
        log = CompileLog.load(path)
    assert [(e.seq, e.compile_id, e.input_shapes) for e in log.events] == [
        (i, f"0/{i}", {"x": [i]}) for i in range(3)]


def test_a_damaged_line_in_the_middle_is_skipped_with_a_warning(tmp_path):
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    log.append(event(compile_id="0/0"))
    with open(path, "a") as fh:
        fh.write("{not json\n")
    log.append(event(compile_id="0/1"))
    with pytest.warns(UserWarning, match=r"line 3 \(not JSON"):
        loaded = CompileLog.load(path)
    assert [e.compile_id for e in loaded.events] == ["0/0", "0/1"]


@pytest.mark.parametrize("content, match", [
    ("", "empty"),
    ("step,loss\n1,2.0\n", "is not a neuronkit compile log: its first line is not JSON"),
    ('{"format": "something-else", "version": 1}\n', "is not a neuronkit compile log"),
    ('[1, 2, 3]\n', "is not a neuronkit compile log"),
    (json.dumps({"format": FORMAT, "version": FORMAT_VERSION + 1}) + "\n", "Upgrade neuronkit"),
    (json.dumps({"format": FORMAT, "version": "1"}) + "\n", "format version '1'"),
])
def test_foreign_or_newer_files_are_rejected_clearly(tmp_path, content, match):
    path = tmp_path / "other.jsonl"
    path.write_text(content)
    with pytest.raises(LogFormatError, match=match):
        CompileLog.load(path)


def test_missing_file(tmp_path):
    with pytest.raises(FileNotFoundError, match="compile log not found"):
        CompileLog.load(tmp_path / "nope.jsonl")


def test_wall_time_is_persisted_and_the_last_value_wins(tmp_path):
    path = tmp_path / "log.jsonl"
    log = CompileLog(path=path)
    log.append(event(duration_s=1.0))
    log.set_wall_time(4.0)
    log.append(event(duration_s=1.0))
    log.set_wall_time(8.0)
    loaded = CompileLog.load(path)
    assert len(loaded.events) == 2 and loaded.wall_time_s == 8.0
    assert loaded.summary()[0]["share_of_wall"] == pytest.approx(2.0 / 8.0)
    resaved = CompileLog.load(loaded.save(tmp_path / "copy.jsonl"))
    assert resaved.wall_time_s == 8.0 and len(resaved.events) == 2


def test_summary_per_function():
    log = CompileLog([event("forward", duration_s=1.0, n=3, kind="first"),
                      event("forward", duration_s=3.0, n=5),
                      event("forward", duration_s=0.0, n=7, kind="limit_hit"),
                      event("step", duration_s=2.0, n=3, kind="first")])
    rows = {row["function"]: row for row in log.summary()}
    assert rows["forward"]["graphs"] == 2 and rows["forward"]["limit_hits"] == 1
    assert rows["forward"]["distinct_shapes"] == 3
    assert rows["forward"]["compile_s"] == pytest.approx(4.0)
    assert rows["forward"]["mean_s"] == pytest.approx(2.0)
    assert rows["forward"]["share_of_wall"] is None  # wall time unknown
    assert rows["step"]["graphs"] == 1
    assert log.graph_counts() == {"forward": 2, "step": 1}
    assert log.total_compile_s == pytest.approx(6.0)


def test_functions_that_share_a_name_are_told_apart_by_place(tmp_path):
    log = CompileLog([event("forward", location="/a/operations.py:942", kind="first"),
                      event("forward", location="/m/modeling_qwen3.py:440", kind="first"),
                      event("forward", location="/m/modeling_qwen3.py:440", n=5),
                      event("forward", location="/m/modeling_qwen3.py:440", n=7, kind="failed"),
                      event("step", location="/t.py:3", kind="first")])
    assert log.graph_counts() == {"forward (operations.py:942)": 1,
                                  "forward (modeling_qwen3.py:440)": 2, "step": 1}
    rows = {row["function"]: row for row in log.summary()}
    assert rows["forward (modeling_qwen3.py:440)"]["graphs"] == 2
    assert rows["forward (modeling_qwen3.py:440)"]["failed"] == 1
    assert rows["forward (operations.py:942)"]["location"] == "/a/operations.py:942"
    trace = json.loads(write_chrome_trace(log, tmp_path / "t.json").read_text())["traceEvents"]
    assert {e["args"]["name"] for e in trace if e["name"] == "thread_name"} == {
        "forward (operations.py:942)", "forward (modeling_qwen3.py:440)", "step"}
    # the same file name in two folders: the full place
    same_file = function_labels([event("f", location="/a/x.py:1"),
                                 event("f", location="/b/x.py:1")])
    assert sorted(same_file.values()) == ["f (/a/x.py:1)", "f (/b/x.py:1)"]


def test_short_label_keeps_the_place_and_the_end_of_the_name():
    assert short_label("forward", 24) == "forward"
    assert short_label("torch_dynamo_resume_in_forward_at_375", 24) == "torch_dynamo_re…d_at_375"
    assert short_label("forward (modeling_qwen3.py:440)", 24) == "forward (modeling_qwen3.py:440)"
    assert short_label("forward_with_checkpointing (layers.py:89)", 24) == (
        "forward_wit… (layers.py:89)")


def test_compile_share_of_a_merged_log_is_per_rank():
    ranks = []
    for rank, (seconds, wall) in enumerate([(3.0, 10.0), (4.0, 9.0)]):
        log = CompileLog([event("forward", duration_s=seconds / 2, kind="first", rank=rank),
                          event("step", duration_s=seconds / 2, kind="first", rank=rank)])
        log.wall_time_s = wall
        ranks.append(log)
    merged = CompileLog.merge(ranks)
    assert merged.total_compile_s == pytest.approx(7.0)  # seconds add up all ranks
    # the rank that compiled longest (4 s) over the run's wall time (10 s), not 7 s / 10 s
    assert merged.compile_share() == pytest.approx(0.4)
    assert [row["share_of_wall"] for row in merged.summary()] == [pytest.approx(0.2)] * 2
    assert ranks[0].compile_share() == pytest.approx(0.3)
    assert CompileLog([event()]).compile_share() is None  # wall time unknown


def test_chrome_trace_is_valid_json_with_one_slice_per_event(tmp_path):
    log = CompileLog([event("forward", started_at=10.0, duration_s=0.5),
                      event("forward", started_at=11.0, duration_s=0.25, rank=1),
                      event("step", started_at=12.5, duration_s=1.0)])
    path = write_chrome_trace(log, tmp_path / "trace" / "t.json")
    data = json.loads(path.read_text())
    slices = [e for e in data["traceEvents"] if e["ph"] == "X"]
    assert len(slices) == 3
    assert [(s["ts"], s["dur"], s["pid"]) for s in slices] == [
        (0.0, 500000.0, 0), (1e6, 250000.0, 1), (2.5e6, 1e6, 0)]
    assert all(isinstance(e["tid"], int) and isinstance(e["pid"], int) for e in data["traceEvents"])
    names = {(e["pid"], e["tid"]): e["args"]["name"] for e in data["traceEvents"]
             if e["name"] == "thread_name"}
    assert sorted(names.values()) == ["forward", "forward", "step"]
    assert slices[0]["args"]["input_shapes"] == {"x": [2, 3]}


def test_merge_orders_ranks_by_time(tmp_path):
    rank0 = CompileLog([event(started_at=1.0, rank=0), event(started_at=3.0, rank=0)])
    rank0.wall_time_s = 10.0
    rank1 = CompileLog([event(started_at=2.0, rank=1)])
    rank1.wall_time_s = 12.0
    merged = CompileLog.merge([rank0, rank1])
    assert [(e.seq, e.rank, e.started_at) for e in merged.events] == [(0, 0, 1.0), (1, 1, 2.0),
                                                                       (2, 0, 3.0)]
    assert merged.header["ranks"] == [0, 1] and merged.wall_time_s == 12.0
    assert [e.seq for e in rank0.events] == [0, 0]  # the inputs are not renumbered
    merged.save(tmp_path / "merged.jsonl")
    assert len(CompileLog.load(tmp_path / "merged.jsonl")) == 3


def test_unknown_fields_are_ignored_on_load():
    e = CompileEvent.from_dict({"seq": 4, "function": "f", "from_the_future": 1})
    assert e.seq == 4 and e.function == "f"


def test_shared_view_helpers():
    from neuronkit.events.event import GRAPH_KINDS
    from neuronkit.events.facts import as_events

    events = [CompileEvent(kind=k) for k in ("first", "recompile", "limit_hit", "failed")]
    assert as_events(CompileLog(events)) == events and as_events(tuple(events)) == events
    with pytest.raises(TypeError, match="CompileLog"):
        as_events("log.jsonl")
    assert [e.kind for e in events if e.kind in GRAPH_KINDS] == ["first", "recompile"]
    assert CompileLog(events).graph_counts() == {"": 2}


def test_header_versions_come_from_device_package_version(monkeypatch):
    import neuronkit.setup.device as device
    from neuronkit.recorder.header import default_header

    monkeypatch.setattr(device, "package_version", lambda dist: f"v-{dist}")
    head = default_header()
    assert head["torch"] == "v-torch" and head["torch_neuronx"] == "v-torch-neuronx"
