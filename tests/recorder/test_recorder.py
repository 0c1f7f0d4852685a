"""CompileRecorder against real Dynamo compiles (eager backend, dynamic=False) of a small module."""
from __future__ import annotations

import inspect
import logging
import subprocess
import sys
import textwrap
import threading
import time
import warnings

import pytest
import torch
import torch._dynamo

import neuronkit as nk
from neuronkit.log.compile_log import CompileLog
from neuronkit.sources import dynamo as sources


class Net(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x):
        return self.proj(x).relu().sum(-1)


FORWARD_LINE = inspect.getsourcelines(Net.forward)[1]


@pytest.fixture
def net(compiler_reset):
    return torch.compile(Net(), backend="eager", dynamic=False)


@pytest.fixture(autouse=True)
def _no_rank_env(monkeypatch):
    monkeypatch.delenv("RANK", raising=False)


def run(model, *lengths: int) -> None:
    for n in lengths:
        model(torch.randn(2, n, 4))


def hook_state() -> dict:
    """Everything the recorder may touch in torch's logging and Dynamo's callbacks."""
    from torch._dynamo.callback import callback_handler

    trace = logging.getLogger("torch.__trace")
    limit = logging.getLogger("torch._dynamo.convert_frame")
    return {"trace_handlers": [h for h in trace.handlers  # torch's own lazy handler drops itself
                               if type(h).__name__ != "LazyTraceHandler"],
            "trace_level": trace.level,
            "limit_filters": list(limit.filters), "limit_handlers": list(limit.handlers),
            "dynamo_handlers": list(logging.getLogger("torch._dynamo").handlers),
            "dynamo_level": logging.getLogger("torch._dynamo").level,
            "start_callbacks": list(callback_handler.start_callbacks),
            "end_callbacks": list(callback_handler.end_callbacks)}


def test_one_event_per_distinct_shape_with_shapes_changes_and_reasons(net):
    t0 = time.time()
    with nk.CompileRecorder() as rec:
        run(net, 3, 5, 9)
    t1 = time.time()
    events = rec.events
    assert [e.kind for e in events] == ["first", "recompile", "recompile"]
    assert [e.input_shapes for e in events] == [{"x": [2, n, 4]} for n in (3, 5, 9)]
    assert [e.changed for e in events] == ["", "x dim 1: 3 -> 5", "x dim 1: 5 -> 9"]
    assert [e.graph_count for e in events] == [1, 2, 3]
    assert [e.seq for e in events] == [0, 1, 2]
    assert events[0].reasons == []
    assert events[1].reasons == [f"{events[0].compile_id}: tensor 'x' size mismatch at index 1. "
                                 "expected 3, actual 5"]
    # every cached graph's failed guard, not only the first
    assert sorted(events[2].reasons) == sorted([
        f"{events[0].compile_id}: tensor 'x' size mismatch at index 1. expected 3, actual 9",
        f"{events[1].compile_id}: tensor 'x' size mismatch at index 1. expected 5, actual 9"])
    assert len({e.compile_id for e in events}) == 3
    for e in events:
        assert e.function == "forward"
        assert e.location == f"{__file__}:{FORWARD_LINE}"
        assert e.backend == "eager"
        assert e.device == nk.detect().device
        assert e.rank == 0
        assert t0 <= e.started_at <= t1
        assert 0 < e.duration_s < t1 - t0
        assert e.metrics["dynamo"]["graph_node_count"] > 0


def test_a_changed_python_number_is_reported_from_its_guard(compiler_reset):
    def scale(x, n):
        return x * n

    fn = torch.compile(scale, backend="eager", dynamic=False)
    with nk.CompileRecorder() as rec:
        fn(torch.ones(2), 2)
        fn(torch.ones(2), 3)
    assert [e.input_shapes for e in rec.events] == [{"x": [2]}, {"x": [2]}]
    assert rec.events[1].changed == "a Python int/flag changed: n == 2"
    assert rec.events[1].reasons[0].startswith(f"{rec.events[0].compile_id}: n == 2")


def test_a_seen_shape_records_nothing(net):
    with nk.CompileRecorder() as rec:
        run(net, 3, 5, 3, 5, 3)
    assert [e.input_shapes["x"][1] for e in rec.events] == [3, 5]


def test_recompile_limit_is_recorded_and_said(net):
    with torch._dynamo.config.patch(recompile_limit=2), nk.CompileRecorder() as rec:
        run(net, 3, 5)
        with pytest.warns(RuntimeWarning, match=r"forward hit torch\._dynamo\.config\.recompile_"
                                                r"limit \(2 graphs\).*EAGER"):
            out = net(torch.ones(2, 7, 4))
        run(net, 11)  # torch now runs eager without compiling: no new event
    assert torch.allclose(out, net._orig_mod(torch.ones(2, 7, 4)))
    assert [e.kind for e in rec.events] == ["first", "recompile", "limit_hit"]
    hit = rec.events[-1]
    assert hit.function == "forward" and hit.location.endswith(f":{FORWARD_LINE}")
    assert hit.input_shapes == {"x": [2, 7, 4]}
    assert hit.changed == "x dim 1: 5 -> 7"
    assert hit.graph_count == 2
    assert len(hit.reasons) == 2 and all("actual 7" in r for r in hit.reasons)
    assert hit.metrics["limit"] == {"name": "recompile_limit", "value": 2}
    assert rec.log.graph_counts() == {"forward": 2}


def test_records_across_dynamo_reset(net):
    with nk.CompileRecorder() as rec:
        run(net, 3)
        torch._dynamo.reset()  # wipes Dynamo's caches and callbacks
        run(net, 3, 5)
        torch.compiler.reset()
        run(net, 6)
    assert [(e.kind, e.graph_count, e.input_shapes["x"][1]) for e in rec.events] == [
        ("first", 1, 3), ("first", 1, 3), ("recompile", 2, 5), ("first", 1, 6)]
    assert rec.events[2].changed == "x dim 1: 3 -> 5"


def test_torch_set_logs_during_recording_does_not_unhook_it(net):
    with nk.CompileRecorder() as rec:
        run(net, 3)
        torch._logging.set_logs(dynamo=logging.ERROR)  # torch resets its handlers here
        try:
            run(net, 5)
        finally:
            torch._logging.set_logs()  # back to torch's defaults
    assert [e.input_shapes["x"][1] for e in rec.events] == [3, 5]


def test_stop_restores_logging_and_hooks_even_when_the_body_raises(net):
    before = hook_state()
    with pytest.raises(ValueError, match="from the body"):
        with nk.CompileRecorder() as rec:
            run(net, 3)
            assert hook_state() != before  # it really hooked something
            raise ValueError("from the body")
    assert hook_state() == before
    assert not rec.active and len(rec.events) == 1
    run(net, 5)  # compiles, unrecorded
    assert len(rec.events) == 1


def _sin_and_cos() -> dict:
    """Two different compiled functions, for the tests that compile from two threads."""
    def f(x):
        return x.sin() * 2

    def g(x):
        return x.cos() + 1

    return {"f": torch.compile(f, backend="eager", dynamic=False),
            "g": torch.compile(g, backend="eager", dynamic=False)}


def test_two_threads_compiling_at_once(compiler_reset):
    fns = _sin_and_cos()
    barrier = threading.Barrier(2)
    errors: list[BaseException] = []

    def work(name: str) -> None:
        try:
            barrier.wait()
            for n in (2, 3, 4, 5):
                fns[name](torch.randn(n))
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    with nk.CompileRecorder() as rec:
        threads = [threading.Thread(target=work, args=(name,)) for name in fns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
    assert not errors
    assert not sources.TAP.errors
    for name in fns:
        mine = [e for e in rec.events if e.function == name]
        assert [e.input_shapes for e in mine] == [{"x": [n]} for n in (2, 3, 4, 5)]
        assert [e.graph_count for e in mine] == [1, 2, 3, 4]
        assert mine[2].changed == "x dim 0: 3 -> 4"
    assert [e.seq for e in rec.events] == list(range(8))


@pytest.fixture
def torch_stderr():
    """What torch's own log handlers write (they hold the stderr stream of import time)."""
    import io

    out = io.StringIO()
    handlers = {h for name in ("torch", "torch._dynamo", "torch._dynamo.convert_frame")
                for h in logging.getLogger(name).handlers
                if type(h) is logging.StreamHandler}  # torch's, not pytest's capture handlers
    assert handlers, "torch's log handlers were not found"
    saved = [(h, h.setStream(out)) for h in handlers]
    yield out
    for handler, stream in saved:
        handler.setStream(stream)


def test_quiet_keeps_torch_lines_off_stderr(net, capfd, torch_stderr):
    with torch._dynamo.config.patch(recompile_limit=1):
        with nk.CompileRecorder(quiet=True), pytest.warns(RuntimeWarning):
            run(net, 3, 5)
        assert torch_stderr.getvalue() == ""
        captured = capfd.readouterr()
        assert captured.err == "" and captured.out == ""
        torch.compiler.reset()
        with nk.CompileRecorder(quiet=False), pytest.warns(RuntimeWarning):
            run(net, 3, 5)
        assert "hit config.recompile_limit" in torch_stderr.getvalue()


def test_subscribers_get_each_event_after_it_is_logged(net):
    rec = nk.CompileRecorder()
    seen: list[tuple[int, int]] = []
    unsubscribe = rec.subscribe(lambda e: seen.append((e.seq, len(rec.log))))
    with rec:
        run(net, 3, 5)
        unsubscribe()
        run(net, 7)
    assert seen == [(0, 1), (1, 2)]
    with pytest.raises(TypeError, match="callable"):
        rec.subscribe("not a function")


def test_a_failing_subscriber_breaks_neither_recording_nor_the_compile(net):
    rec = nk.CompileRecorder()
    good: list[int] = []
    rec.subscribe(lambda e: 1 / 0)
    rec.subscribe(lambda e: good.append(e.seq))
    with pytest.warns(RuntimeWarning, match="subscriber raised") as caught, rec:
        run(net, 3, 5, 7)
    assert len([w for w in caught if "subscriber" in str(w.message)]) == 1  # warned once
    assert len(rec.events) == 3 and good == [0, 1, 2]
    assert len(rec.subscriber_errors) == 3
    assert all(isinstance(e, ZeroDivisionError) for e in rec.subscriber_errors)


def test_context_labels(net):
    with nk.CompileRecorder(context="setup") as rec:
        run(net, 3)
        with rec.context("step 1"):
            run(net, 5)
            with rec.context("step 1 / eval"):
                run(net, 7)
            run(net, 9)
        run(net, 11)
        rec.set_context("step 2")
        run(net, 13)
    assert [e.context for e in rec.events] == ["setup", "step 1", "step 1 / eval", "step 1",
                                               "setup", "step 2"]


def test_context_labels_are_per_thread(compiler_reset):
    fns = _sin_and_cos()
    inside = threading.Barrier(2)  # both labels are set before either thread compiles
    errors: list[BaseException] = []

    def work(rec: nk.CompileRecorder, name: str) -> None:
        try:
            with rec.context(f"thread {name}"):
                inside.wait(30)
                for n in (2, 3, 4):
                    fns[name](torch.randn(n))
                inside.wait(30)  # neither leaves (restoring a label) before both are done
            assert rec.current_context == "main"
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    with nk.CompileRecorder(context="main") as rec:
        rec.set_context("main thread only")
        threads = [threading.Thread(target=work, args=(rec, name)) for name in fns]
        for t in threads:
            t.start()
        for t in threads:
            t.join(60)
        assert rec.current_context == "main thread only"
        fns["f"](torch.randn(9))
    assert not errors
    for name in fns:
        mine = [e for e in rec.events if e.function == name and e.input_shapes["x"] != [9]]
        assert len(mine) == 3 and {e.context for e in mine} == {f"thread {name}"}
    assert rec.events[-1].context == "main thread only"


def test_torch_recompile_user_context_hook(net):
    with nk.CompileRecorder() as rec:
        unregister = rec.register_recompile_context()
        try:
            with rec.context("epoch 2"):
                run(net, 3)
        finally:
            unregister()
        run(net, 5)
    assert rec.events[0].metrics["dynamo"]["recompile_user_contexts"] == ["epoch 2"]
    assert "recompile_user_contexts" not in rec.events[1].metrics["dynamo"]


def test_several_recorders_each_see_every_event(net):
    outer = nk.CompileRecorder(context="outer").start()
    try:
        run(net, 3)
        with nk.CompileRecorder(context="inner") as inner:
            run(net, 5)
        run(net, 7)
    finally:
        outer.stop()
    assert [e.input_shapes["x"][1] for e in outer.events] == [3, 5, 7]
    assert [(e.input_shapes["x"][1], e.context) for e in inner.events] == [(5, "inner")]
    assert outer.events[1].context == "outer"
    assert outer.events[1].compile_id == inner.events[0].compile_id


def test_restart_continues_the_same_log_and_keeps_wall_time(net, tmp_path):
    path = tmp_path / "log.jsonl"
    rec = nk.CompileRecorder(path)
    with rec:
        run(net, 3)
    first_wall = rec.log.wall_time_s
    run(net, 5)  # not recorded
    with rec:
        run(net, 7)
    assert [e.seq for e in rec.events] == [0, 1]
    assert rec.log.wall_time_s > first_wall > 0
    loaded = CompileLog.load(path)
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in rec.events]
    assert loaded.wall_time_s == pytest.approx(rec.log.wall_time_s)
    assert loaded.header["device"] == rec.device
    assert loaded.header["backend"] == ""                  # not told one: the events say theirs
    share = loaded.summary()[0]["share_of_wall"]
    assert 0 < share <= 1


KILLED_RECORDING = textwrap.dedent("""
    import os, signal, sys, torch
    import neuronkit as nk
    fn = torch.compile(lambda x: x * 2, backend="eager", dynamic=False)
    rec = nk.CompileRecorder(sys.argv[1], device="cpu", backend="eager").start()
    for n in (2, 3, 4):
        fn(torch.ones(n))
    with open(sys.argv[1], "a") as fh:          # killed while the next line is half written
        fh.write('{"seq": 3, "compile_id": "0/3", "function": "<lam')
    os.kill(os.getpid(), signal.SIGKILL)
""")


@pytest.mark.slow  # a fresh Python importing torch (~5 s on 2 cores)
def test_a_log_from_a_killed_recording_process_keeps_every_event(tmp_path):
    path = tmp_path / "killed.jsonl"
    proc = subprocess.run([sys.executable, "-c", KILLED_RECORDING, str(path)], timeout=300,
                          capture_output=True, text=True)
    assert proc.returncode == -9, proc.stderr
    with pytest.warns(UserWarning, match="truncated last line"):
        log = CompileLog.load(path)
    assert [(e.kind, e.input_shapes) for e in log.events] == [
        ("first", {"x": [2]}), ("recompile", {"x": [3]}), ("recompile", {"x": [4]})]
    assert log.wall_time_s is None  # never stopped


def test_backend_is_read_from_the_compile(compiler_reset):
    fn = torch.compile(lambda x: x * 3, backend="aot_eager", dynamic=False)
    with nk.CompileRecorder(backend="eager") as rec:
        fn(torch.randn(3))
    assert rec.backend == "eager" and rec.events[0].backend == "aot_eager"


def test_a_failed_compile_is_recorded_and_still_raises(compiler_reset):
    def broken(gm, example_inputs):
        raise RuntimeError("backend exploded")

    fn = torch.compile(lambda x: x + 1, backend=broken)
    with nk.CompileRecorder() as rec, pytest.raises(Exception, match="backend exploded"):
        fn(torch.randn(2))
    (event,) = rec.events
    assert event.kind == "failed" and event.backend == "broken"
    assert "backend exploded" in event.metrics["dynamo"]["fail_reason"]
    assert event.reasons == ["backend='broken' raised: RuntimeError: backend exploded"]
    assert rec.log.graph_counts() == {}


@torch._dynamo.disable
def _eager_hook(x):  # what FSDP does to its hooks: Dynamo may not trace them
    return x + 1


def test_a_graph_break_on_a_disabled_function_is_recorded_with_its_reason(compiler_reset):
    import contextlib

    @contextlib.contextmanager
    def gathered():  # a break inside this block cannot resume: Dynamo skips the whole frame
        yield

    def step(x):
        with gathered():
            return _eager_hook(x) * 2

    with nk.CompileRecorder() as rec:
        out = torch.compile(step, backend="eager")(torch.ones(3))
    assert out.tolist() == [4.0, 4.0, 4.0]  # it ran, eagerly
    (event,) = rec.events
    dynamo = event.metrics["dynamo"]
    assert (event.kind, event.function, dynamo["fail_type"]) == ("graph_break", "step",
                                                                 "Unsupported")
    first_line = dynamo["fail_reason"].splitlines()[0]  # torch's full message stays in metrics
    assert len(dynamo["fail_reason"]) > 160 and "disable" in first_line
    assert event.reasons == [first_line]
    assert rec.log.graph_counts() == {}


def test_rank_comes_from_the_argument_then_the_environment(monkeypatch):
    monkeypatch.setenv("RANK", "3")
    assert nk.CompileRecorder().rank == 3
    assert nk.CompileRecorder(rank=1).rank == 1
    with pytest.raises(ValueError, match="rank"):
        nk.CompileRecorder(rank=-1)


def test_event_device_is_where_the_compile_ran_not_the_setting(net):
    with torch._dynamo.config.patch(recompile_limit=1), \
            nk.CompileRecorder(device="neuron", backend="neuron") as rec:
        run(net, 3)
        with pytest.warns(RuntimeWarning, match="EAGER"):
            run(net, 5)  # refused: torch traces no tensors, the function's last device is kept
    assert rec.log.header["device"] == "neuron"  # the setting stays in the header
    assert [(e.kind, e.device) for e in rec.events] == [("first", "cpu"), ("limit_hit", "cpu")]


def test_event_device_falls_back_to_the_recorder_without_input_tensors(compiler_reset):
    fn = torch.compile(lambda n: torch.ones(n) * 2, backend="eager", dynamic=False)
    with nk.CompileRecorder(device="neuron", backend="eager") as rec:
        fn(3)
    assert [e.device for e in rec.events] == ["neuron"]


def test_compiles_never_read_neuron_metrics(fake_neuron, compiler_reset):
    """get_dynamo_metrics() synchronizes the device (the contract fake counts it, as the source's
    ndb/metrics.py:217-227 does it): reading it inside a compile would serialise compilation and
    could eat the user's async error (tests/sources/test_neuron_native.py has the rest)."""
    fn = torch.compile(lambda x: x - 1, backend="eager", dynamic=False)
    with nk.CompileRecorder() as rec:
        fn(torch.randn(2))
        fn(torch.randn(3))
        assert fake_neuron.sync_calls == [] and len(rec.events) == 2


def test_a_log_file_that_cannot_be_written_costs_no_event(fake_neuron, net, tmp_path,
                                                          monkeypatch):
    """The dashboard and the Trainer callback (subscribers) see what the log holds in memory."""
    import shutil

    monkeypatch.setattr(sources.TAP, "errors", [])  # this test's errors only
    folder = tmp_path / "gone"
    broken = nk.CompileRecorder(folder / "log.jsonl")
    seen: list[int] = []
    broken.subscribe(lambda e: seen.append(e.seq))
    shutil.rmtree(folder)
    folder.write_text("a file where the log's folder was")  # the log cannot be written again
    with pytest.warns(RuntimeWarning) as caught:
        with broken, nk.CompileRecorder() as healthy:
            run(net, 3, 5)
    messages = [str(w.message) for w in caught]
    assert len([m for m in messages if "could not write" in m]) == 1  # said once
    assert [e.input_shapes["x"][1] for e in healthy.events] == [3, 5]
    assert [e.input_shapes["x"][1] for e in broken.events] == [3, 5]
    assert seen == [0, 1]  # every event reached the subscribers
    assert len(broken.write_errors) >= 3  # the log at start, two events, the wall time
    assert all("neuron" not in e.metrics for e in healthy.events)
    assert not sources.TAP.errors


def test_a_log_folder_deleted_before_start_is_written_again(net, tmp_path):
    import shutil

    folder = tmp_path / "gone"
    rec = nk.CompileRecorder(folder / "log.jsonl")
    shutil.rmtree(folder)
    with rec:
        run(net, 3, 5)
    loaded = CompileLog.load(folder / "log.jsonl")
    assert [e.to_dict() for e in loaded.events] == [e.to_dict() for e in rec.events]
    assert loaded.header == rec.log.header and loaded.wall_time_s == rec.log.wall_time_s


def test_nested_recorders_on_one_path_are_refused_and_the_outer_log_is_kept(net, tmp_path):
    import re

    from neuronkit.log.file_lock import LogPathInUseError

    path = tmp_path / "compile.jsonl"
    with nk.CompileRecorder(path):
        run(net, 3)
        with pytest.raises(LogPathInUseError, match=re.escape(str(path))):
            nk.CompileRecorder(path)
        run(net, 5)
    assert [e.input_shapes["x"][1] for e in CompileLog.load(path).events] == [3, 5]


def test_no_neuron_metrics_without_torch_neuronx(no_neuron, net):
    with nk.CompileRecorder() as rec:
        run(net, 3)
    assert "neuron" not in rec.events[0].metrics


def test_warnings_as_errors_break_neither_the_compile_nor_recording(net):
    rec = nk.CompileRecorder()
    rec.subscribe(lambda e: 1 / 0)
    with torch._dynamo.config.patch(recompile_limit=1), warnings.catch_warnings(), rec:
        warnings.simplefilter("error")
        run(net, 3, 5)  # a limit hit and two subscriber errors, all would-be warnings
    assert [e.kind for e in rec.events] == ["first", "limit_hit"]
    assert len(rec.subscriber_errors) == 2 and not sources.TAP.errors


def test_no_warning_and_no_event_outside_the_recorder(net):
    rec = nk.CompileRecorder()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        run(net, 3)
    assert rec.events == [] and not rec.active


def test_nested_with_blocks_stop_the_recorder_only_at_the_outermost_exit(net):
    rec = nk.CompileRecorder()
    with rec:
        run(net, 3)
        with rec:
            run(net, 5)
        assert rec.active  # before: the inner exit stopped it
        run(net, 7)
    assert not rec.active
    assert [e.input_shapes["x"][1] for e in rec.events] == [3, 5, 7]
    with rec:  # and again, after the outermost exit
        run(net, 9)
    assert not rec.active and len(rec.events) == 4


def test_a_default_recorder_claims_no_backend_the_code_did_not_use(tmp_path, compiler_reset):
    """The header names a backend only when told one: code compiled with another backend than
    the one nk.detect() picks (here aot_eager) gets a report that names the events' backend."""
    import json as _json

    from neuronkit.views.text import format_report

    path = tmp_path / "log.jsonl"
    fn = torch.compile(lambda x: x * 2 + 1, backend="aot_eager", dynamic=False)
    with nk.CompileRecorder(path):
        fn(torch.ones(3))
    header = _json.loads(path.read_text().splitlines()[0])
    assert header["backend"] in ("", "aot_eager")
    assert "backend aot_eager" in format_report(CompileLog.load(path)).splitlines()[0]
    told = nk.CompileRecorder(tmp_path / "told.jsonl", backend="inductor")
    assert told.log.header["backend"] == "inductor"
    told.log.release()


def test_a_log_recorded_under_the_test_fake_says_synthetic(fake_neuron, tmp_path):
    """The fake has no package metadata: the header names it, and every view reads that as
    synthetic (a log of the fake must never pass for a Trainium measurement)."""
    from neuronkit.events.facts import is_synthetic
    from neuronkit.views.text import format_report

    with nk.CompileRecorder(log_path=tmp_path / "fake.jsonl") as rec:
        pass
    header = CompileLog.load(tmp_path / "fake.jsonl").header
    assert header["torch_neuronx"] == "fake (tests/neuron_fake) 0.1.0" and is_synthetic(header)
    assert "SYNTHETIC" in format_report(rec.log).splitlines()[0]


def test_a_log_recorded_without_torch_neuronx_is_not_synthetic(tmp_path):
    from neuronkit.events.facts import is_synthetic

    with nk.CompileRecorder(log_path=tmp_path / "cpu.jsonl"):
        pass
    header = CompileLog.load(tmp_path / "cpu.jsonl").header
    assert header["torch_neuronx"] is None and not is_synthetic(header)


def test_each_recorder_starts_each_function_with_a_first_graph(compiler_reset):
    """A second recording of a function compiled in the first: its first graph there is
    ``first`` (the code held 2 graphs before, said in the metrics), not a recompile against the
    earlier recording's last graph; a new graph after it is a recompile against it."""
    def f(x):
        return x * 2

    compiled = torch.compile(f, backend="eager", dynamic=False)
    with nk.CompileRecorder() as one:
        compiled(torch.ones(4))
        compiled(torch.ones(8))
    with nk.CompileRecorder() as two:
        compiled(torch.ones(12))
        compiled(torch.ones(16))
    assert [e.kind for e in one.events] == ["first", "recompile"]
    assert [e.kind for e in two.events] == ["first", "recompile"]
    assert two.events[0].changed == "" and two.events[0].metrics["code_graphs_before"] == 2
    assert two.events[1].changed == "x dim 0: 12 -> 16"
