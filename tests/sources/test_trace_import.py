"""CompileLog.from_torch_trace: torch's TORCH_TRACE files read into a compile log."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from neuronkit.apps.cli import main
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources.trace_import import is_trace_folder

# first compile, a recompile on a new shape, a new rank, a graph break, a recompile-limit hit;
# a live recorder in the same process saves what it saw to argv[1]
WORKLOAD = textwrap.dedent("""
    import sys
    import torch
    import neuronkit as nk

    def scale(x):
        return x * 2

    def noisy(x):
        y = x + 1
        print("graph break here")
        return y * 3

    def capped(x):
        return x - 1

    with nk.CompileRecorder(quiet=True) as recorder:
        compiled = torch.compile(scale, backend="eager", dynamic=False)
        compiled(torch.ones(2)); compiled(torch.ones(3)); compiled(torch.ones(4, 4))
        torch.compile(noisy, backend="eager", dynamic=False)(torch.ones(2))
        with torch._dynamo.config.patch(recompile_limit=1):
            limited = torch.compile(capped, backend="eager", dynamic=False)
            limited(torch.ones(2)); limited(torch.ones(5))
    recorder.log.save(sys.argv[1])
""")

COMPARED = ("compile_id", "kind", "function", "location", "input_shapes", "changed", "reasons",
            "graph_count", "device", "duration_s", "started_at")


# a module with a registered buffer (a rotary inv_freq) and parameters: none of them is an input
BUFFERED = textwrap.dedent("""
    import sys
    import torch
    import neuronkit as nk

    class Rotary(torch.nn.Module):
        def __init__(self):
            super().__init__()
            inv_freq = 1.0 / 10000 ** (torch.arange(0, 8, 2) / 8)
            self.register_buffer("inv_freq", inv_freq, persistent=False)
            self.proj = torch.nn.Linear(8, 8)

        def forward(self, x):
            freqs = torch.arange(x.shape[1])[:, None] * self.inv_freq
            return self.proj(x) + torch.cat([freqs.cos(), freqs.sin()], -1)

    with nk.CompileRecorder(quiet=True) as recorder:
        model = torch.compile(Rotary(), backend="eager", dynamic=False)
        model(torch.ones(2, 5, 8)); model(torch.ones(2, 7, 8))
    recorder.log.save(sys.argv[1])
""")


def _run_traced(workload: str, root: Path) -> tuple[Path, CompileLog]:
    """Run ``workload`` under TORCH_TRACE: its trace folder and the live recorder's log."""
    folder, live = root / "trace", root / "live.jsonl"
    env = {**os.environ, "TORCH_TRACE": str(folder)}
    proc = subprocess.run([sys.executable, "-c", workload, str(live)], env=env, timeout=300,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr
    return folder, CompileLog.load(live)


@pytest.fixture(scope="module")
def traced(tmp_path_factory) -> tuple[Path, CompileLog]:
    """A folder of torch trace files from one run of WORKLOAD, and the live recorder's log."""
    return _run_traced(WORKLOAD, tmp_path_factory.mktemp("traced"))


def _rows(log: CompileLog) -> list[dict]:
    return [{name: getattr(e, name) for name in COMPARED} for e in log.events]


@pytest.mark.slow  # a fresh Python importing torch and compiling (~6 s on 2 cores)
def test_the_trace_gives_the_events_the_live_recorder_saw(traced):
    folder, live = traced
    log = CompileLog.from_torch_trace(folder)
    assert _rows(log) == _rows(live)
    assert [e.kind for e in log.events] == ["first", "recompile", "recompile", "first",
                                            "graph_break", "first", "first", "limit_hit"]
    assert log.events[1].changed == "x dim 0: 2 -> 3"
    assert "size mismatch" in log.events[1].reasons[0]
    assert log.events[7].metrics["limit"] == {"name": "recompile_limit", "value": 1}
    assert all(e.duration_s > 0 for e in log.events if e.kind in ("first", "recompile"))
    assert [e.seq for e in log.events] == list(range(len(log.events)))
    assert {e.rank for e in log.events} == {0} and {e.backend for e in log.events} == {""}
    assert log.header["source"] == "torch_trace" and log.header["torch"]
    assert log.graph_counts() == live.graph_counts()


@pytest.mark.slow  # a fresh Python importing torch and compiling
def test_buffers_and_parameters_are_not_inputs_of_an_imported_trace(tmp_path):
    folder, live = _run_traced(BUFFERED, tmp_path)
    (trace_file,) = folder.glob("*.log")
    assert "._buffers['inv_freq']" in trace_file.read_text()  # the trace names the buffer
    log = CompileLog.from_torch_trace(folder)
    assert [e.input_shapes for e in live.events] == [{"x": [2, 5, 8]}, {"x": [2, 7, 8]}]
    assert [e.input_shapes for e in log.events] == [e.input_shapes for e in live.events]
    assert [e.changed for e in log.events] == ["", "x dim 1: 5 -> 7"]


def _tlparse() -> str | None:
    return shutil.which("tlparse") or shutil.which("tlparse", path=str(Path(sys.executable).parent))


@pytest.mark.slow
def test_the_compile_ids_are_those_tlparse_finds(traced, tmp_path):
    tlparse = _tlparse()
    if tlparse is None:
        if os.environ.get("NEURONKIT_REQUIRE_TLPARSE") == "1":
            pytest.fail("tlparse is not installed (NEURONKIT_REQUIRE_TLPARSE=1)")
        pytest.skip("tlparse is not installed (pip install tlparse)")
    folder, _ = traced
    (trace_file,) = folder.glob("*.log")
    out = tmp_path / "tl_out"
    proc = subprocess.run([tlparse, str(trace_file), "-o", str(out), "--no-browser"],
                          capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    directory = json.loads((out / "compile_directory.json").read_text())
    # "[1/0_1]": attempt 1 of compile 1/0 (restarted at a graph break); "[-/-]": no compile
    theirs = {key.strip("[]").partition("_")[0] for key in directory} - {"-/-"}
    assert {e.compile_id for e in CompileLog.from_torch_trace(folder).events} == theirs


@pytest.mark.slow
def test_ranks_come_from_the_file_names(traced, tmp_path):
    folder, live = traced
    (trace_file,) = folder.glob("*.log")
    shutil.copy(trace_file, tmp_path / "dedicated_log_torch_trace_rank_1_abc.log")
    one = CompileLog.from_torch_trace(tmp_path)
    assert {e.rank for e in one.events} == {1} and len(one) == len(live)
    shutil.copy(trace_file, tmp_path / "dedicated_log_torch_trace_rank_0_abc.log")
    both = CompileLog.from_torch_trace(tmp_path)
    assert len(both) == 2 * len(live) and both.header["ranks"] == [0, 1]
    assert [e.seq for e in both.events] == list(range(len(both)))


@pytest.mark.slow
def test_a_truncated_file_with_garbage_keeps_the_good_events(traced, tmp_path):
    folder, live = traced
    (trace_file,) = folder.glob("*.log")
    text = trace_file.read_text()
    cut = text.index('{"compilation_metrics": {"compile_id": "1/0"') + 200  # inside that record
    broken = tmp_path / "dedicated_log_torch_trace_broken.log"
    broken.write_text("garbage before anything\n" + text[:cut])
    with pytest.warns(UserWarning, match=r"broken\.log: skipped 2 bad trace lines: line 1 "):
        log = CompileLog.from_torch_trace(tmp_path)
    assert _rows(log) == _rows(live)[:3]  # 1/0 lost its metrics record: no event for it


@pytest.mark.slow
def test_report_and_dashboard_read_a_trace_folder(traced, capsys):
    folder, live = traced
    assert is_trace_folder(folder)
    assert main(["report", str(folder)]) == 0
    out = capsys.readouterr().out
    assert "scale" in out and "capped" in out
    assert main(["report", "--json", str(folder)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["counts"]["events"] == len(live)
    state = DashboardState.replay(folder)
    assert state.mode == "replay" and len(state.log) == len(live)
    assert state.graph_counts == live.graph_counts()


# -- hand-written traces: hostile and odd input, no torch run -------------------------------
def _line(record: dict, payload: str | None = None) -> str:
    text = f"V1201 08:00:00.123456 1234 torch/_dynamo/utils.py:1] {json.dumps(record)}\n"
    return text + "".join(f"\t{p}\n" for p in payload.splitlines()) if payload else text


def _compile(frame: int, n: int, size: list, **metrics) -> str:
    key = {"frame_id": frame, "frame_compile_id": n, "attempt": 0}
    m = {"compile_id": f"{frame}/{n}", "co_name": "fn", "co_filename": "/x/m.py",
         "co_firstlineno": 3, "accumulated_cache_size": n, "start_time": 100.0 + n,
         "entire_frame_compile_time_s": 0.5, **metrics}
    return (_line({"dynamo_start": {"stack": [{"line": 3, "name": "fn", "filename": 1}]}, **key})
            + _line({"describe_tensor": {"id": 0, "describer_id": n, "size": size,
                                         "device": "device(type='cpu')"}, **key})
            + _line({"describe_source": {"id": 0, "describer_id": n, "source": "L['x']"}, **key})
            + _line({"compilation_metrics": m, **key}))


def test_hostile_records_are_skipped_with_one_warning(tmp_path):
    reasons = _line({"artifact": {"name": "recompile_reasons", "encoding": "json"},
                     "frame_id": 0, "frame_compile_id": 1},
                    json.dumps(["0/0: tensor 'x' size mismatch at index 0. expected 2, actual 3"]))
    text = (_line({"str": ["/x/m.py", 1]}) + _compile(0, 0, [2]) + "\x00\x1b[31m junk\n"
            + _line({"compilation_metrics": "not an object", "frame_id": 5})
            + _compile(0, 9, [7], entire_frame_compile_time_s=float("nan"))
            + _compile(0, 8, [8], start_time=[1])
            + _line({"str": "no index"}) + "V1201 08:00:00.1 1 x.py:1] {\"a\": " + "[" * 100_000 + "\n"
            + reasons + _compile(0, 1, [3])
            + 'V1201 08:00:01.000000 1234 x.py:1] {"compilation_metrics": {"co_na')
    (tmp_path / "t.log").write_text(text)
    with pytest.warns(UserWarning, match=r"t\.log: skipped 7 bad trace lines") as caught:
        log = CompileLog.from_torch_trace(tmp_path)
    assert len(caught) == 1
    assert [(e.compile_id, e.kind, e.input_shapes, e.changed) for e in log.events] == [
        ("0/0", "first", {"x": [2]}, ""), ("0/1", "recompile", {"x": [3]}, "x dim 0: 2 -> 3")]
    assert log.events[0].location == "/x/m.py:3" and log.events[0].duration_s == 0.5


def test_the_rank_key_counts_when_the_name_has_none(tmp_path):
    (tmp_path / "t.log").write_text(_line({"str": ["/x/m.py", 1], "rank": 3}) + _compile(0, 0, [2]))
    assert [e.rank for e in CompileLog.from_torch_trace(tmp_path).events] == [3]


def test_folders_without_trace_files(tmp_path):
    with pytest.raises(FileNotFoundError, match="no torch trace files"):
        CompileLog.from_torch_trace(tmp_path)
    with pytest.raises(FileNotFoundError, match="not found"):
        CompileLog.from_torch_trace(tmp_path / "missing")
    (tmp_path / "t.log").write_text(_compile(0, 0, [2]))
    (tmp_path / "run.jsonl").write_text("")
    assert not is_trace_folder(tmp_path)  # a neuronkit log beside it: name the log instead
    assert main(["report", str(tmp_path)]) == 2


def test_a_backward_record_becomes_its_forwards_backward_event(tmp_path):
    key = {"frame_id": 0, "frame_compile_id": 0, "attempt": 0}
    backward = {"compile_id": "0/0", "is_forward": False, "start_time_us": 102_000_000,
                "duration_us": 250_000}
    (tmp_path / "t.log").write_text(_line({"str": ["/x/m.py", 1]}) + _compile(0, 0, [2])
                                    + _line({"bwd_compilation_metrics": backward, **key}))
    log = CompileLog.from_torch_trace(tmp_path)
    assert [(e.kind, e.compile_id, e.function, e.input_shapes) for e in log.events] == [
        ("first", "0/0", "fn", {"x": [2]}), ("backward", "0/0", "fn", {"x": [2]})]
    assert log.events[1].duration_s == 0.25 and log.events[1].started_at == 102.0
    assert log.graph_counts() == {"fn": 1}
