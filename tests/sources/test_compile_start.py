"""Compiles in progress: CompileStart notifications and ``rec.compiling``, on real CPU compiles
(eager backend) and, for the NEFF build phase, through the torch-neuronx contract fake."""
from __future__ import annotations

import threading
import time

import pytest
import torch

import neuronkit as nk
from neuron_fake import installed_fake
from neuronkit.sources import dynamo as sources
from neuronkit.sources.starts import CompileStart


def double_sum(x, y):
    return (x * 2 + y).sum()


def sleepy_backend(seconds: float):
    def backend(gm, example_inputs):
        time.sleep(seconds)
        return gm.forward
    return backend


def recorded(rec: nk.CompileRecorder) -> list:
    """Starts and events in the order subscribers saw them."""
    seen: list = []
    rec.subscribe_starts(seen.append)
    rec.subscribe(seen.append)
    return seen


def test_a_start_comes_before_its_event_and_matches_it(compiler_reset):
    fn = torch.compile(double_sum, backend="eager", dynamic=False)
    with nk.CompileRecorder(rank=2, context="step 1") as rec:
        seen = recorded(rec)
        fn(torch.ones(3), torch.ones(3))
    begun, first_input, traced, ended, event = seen
    assert isinstance(begun, CompileStart) and not begun.ended and begun.phase == "dynamo"
    assert begun.function == event.function == "double_sum"
    assert begun.location == event.location and begun.location.endswith(
        f":{double_sum.__code__.co_firstlineno}")
    assert begun.input_shapes == {} and begun.seq is None          # not traced yet
    assert (first_input.id, first_input.input_shapes, first_input.traced) == (
        begun.id, {"x": [3]}, False)                               # shown as soon as traced
    assert (traced.id, traced.input_shapes, traced.backend, traced.traced) == (
        begun.id, {"x": [3], "y": [3]}, "eager", True)             # all, before the backend
    assert ended.id == begun.id and ended.ended and ended.seq == event.seq == 0
    assert ended.started_at <= ended.ended_at and ended.elapsed_s >= 0
    assert (begun.compile_id, begun.rank, begun.context) == (event.compile_id, 2, "step 1")
    assert begun.matches(event) and ended.matches(event)
    assert event.started_at == pytest.approx(begun.started_at, abs=1.0)
    assert rec.compiling == {} and not sources.TAP.errors


def test_a_recompile_is_a_new_start_and_nothing_stays_in_progress(compiler_reset):
    fn = torch.compile(double_sum, backend="eager", dynamic=False)
    with nk.CompileRecorder() as rec:
        seen = recorded(rec)
        fn(torch.ones(3), torch.ones(3))
        fn(torch.ones(3), torch.ones(3))                   # warm: nothing new
        fn(torch.ones(5), torch.ones(5))
        assert rec.compiling == {}
    starts = [s for s in seen if isinstance(s, CompileStart)]
    events = [e for e in seen if not isinstance(e, CompileStart)]
    assert [e.kind for e in events] == ["first", "recompile"]
    assert len({s.id for s in starts}) == 2 and len(starts) == 8     # begun, 2 updates, ended
    for event in events:
        mine = [s for s in starts if s.matches(event)]
        assert [(s.traced, s.ended) for s in mine] == [(False, False), (False, False),
                                                       (True, False), (True, True)]
        assert seen.index(mine[-1]) < seen.index(event)             # ended, then the event
    assert [s.input_shapes for s in starts if s.ended] == [{"x": [3], "y": [3]},
                                                         {"x": [5], "y": [5]}]
    assert [s.compile_id for s in starts if s.ended] == ["0/0", "0/1"]


def test_graph_breaks_failures_and_limit_hits_leave_nothing_in_progress(compiler_reset):
    def breaks(x):
        x = x + 1
        torch._dynamo.graph_break()
        return x * 2

    def failing(gm, example_inputs):
        raise ValueError("backend failed on purpose")

    with torch._dynamo.config.patch(recompile_limit=1), nk.CompileRecorder() as rec, \
            pytest.warns(RuntimeWarning, match="recompile_limit"):
        seen = recorded(rec)
        torch.compile(breaks, backend="eager")(torch.ones(2))
        with pytest.raises(Exception, match="backend failed on purpose"):
            torch.compile(lambda x: x + 1, backend=failing)(torch.ones(2))
        limited = torch.compile(lambda x: x * 3, backend="eager", dynamic=False)
        limited(torch.ones(2))
        limited(torch.ones(4))                             # refused: no compile starts
        assert rec.compiling == {}
    starts = [s for s in seen if isinstance(s, CompileStart)]
    kinds = [e.kind for e in rec.events]
    assert "graph_break" in kinds and "failed" in kinds and kinds[-1] == "limit_hit"
    assert {s.id for s in starts} == {s.id for s in starts if s.ended}   # every start ended
    ended = [s for s in starts if s.ended]
    assert not any(s.matches(rec.events[-1]) for s in ended)             # the refused call
    assert all(any(s.matches(e) for e in rec.events) for s in ended)
    assert any(s.function == "breaks" for s in ended)


def test_a_failing_start_subscriber_is_reported_and_compiling_goes_on(compiler_reset):
    fn = torch.compile(double_sum, backend="eager", dynamic=False)
    rec = nk.CompileRecorder()
    good: list[CompileStart] = []
    rec.subscribe_starts(lambda s: 1 / 0)
    rec.subscribe_starts(good.append)
    with pytest.warns(RuntimeWarning, match="subscriber raised") as caught, rec:
        assert fn(torch.ones(3), torch.ones(3)).item() == 9.0
        fn(torch.ones(4), torch.ones(4))
    assert len([w for w in caught if "subscriber" in str(w.message)]) == 1   # said once
    assert len(rec.events) == 2 and len(good) == 8
    assert len(rec.subscriber_errors) == 8
    assert all(isinstance(e, ZeroDivisionError) for e in rec.subscriber_errors)
    assert not sources.TAP.errors and rec.compiling == {}
    with pytest.raises(TypeError, match="callable"):
        rec.subscribe_starts("not a function")  # type: ignore[arg-type]


def test_a_slow_compile_is_seen_in_progress_from_another_thread(compiler_reset):
    fn = torch.compile(double_sum, backend=sleepy_backend(0.5), dynamic=False)
    snapshots: list[dict[int, CompileStart]] = []
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            snapshots.append(rec.compiling)
            time.sleep(0.01)

    with nk.CompileRecorder() as rec:
        watcher = threading.Thread(target=watch)
        watcher.start()
        try:
            fn(torch.ones(2, 8), torch.ones(2, 8))
        finally:
            done.set()
            watcher.join()
        assert rec.compiling == {}
    busy = [s for snap in snapshots for s in snap.values()]
    assert len(busy) >= 10                                 # ~0.5 s seen, every 10 ms
    assert {s.function for s in busy} == {"double_sum"}
    assert {s.compile_id for s in busy} == {rec.events[0].compile_id}
    assert [s.input_shapes for s in busy if s.traced][-1] == {"x": [2, 8], "y": [2, 8]}
    assert max(s.elapsed_s for s in busy) > 0.3 and not any(s.ended for s in busy)


def test_every_recorder_is_told_and_unsubscribing_stops_it(compiler_reset):
    fn = torch.compile(double_sum, backend="eager", dynamic=False)
    with nk.CompileRecorder(rank=0) as a, nk.CompileRecorder(rank=1) as b:
        seen_a, seen_b = recorded(a), []
        unsubscribe = b.subscribe_starts(seen_b.append)
        fn(torch.ones(3), torch.ones(3))
        unsubscribe()
        fn(torch.ones(6), torch.ones(6))
    assert [s.rank for s in seen_a if isinstance(s, CompileStart)] == [0] * 8
    assert [s.rank for s in seen_b] == [1] * 4 and seen_b[-1].matches(b.events[0])
    assert not seen_b[-1].matches(a.events[0])             # another rank's event


def test_stop_ends_what_is_still_open():
    rec = nk.CompileRecorder(rank=4).start()
    seen: list[CompileStart] = []
    rec.subscribe_starts(seen.append)
    rec.receive_start(CompileStart(compile_id="9/0", function="f"))
    assert [(s.rank, s.compile_id) for s in rec.compiling.values()] == [(4, "9/0")]
    rec.stop()
    assert rec.compiling == {} and [s.ended for s in seen] == [False, True]
    assert seen[1].id == seen[0].id and seen[1].seq is None   # ended without an event


# ---- the NEFF build on native Neuron, through the contract fake ---------------------------

def neuron_compiled():
    return torch.compile(lambda x: (x * 2).sum(), backend="neuron", dynamic=False)


def test_the_neff_build_is_a_device_phase_ended_at_the_safe_point(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=95.5)
        fn = neuron_compiled()
        with nk.CompileRecorder() as rec:
            seen = recorded(rec)
            fn(torch.ones(3))
            event = rec.events[0]
            assert [type(x).__name__ for x in seen] == ["CompileStart"] * 4 + [
                "CompileEvent", "CompileStart"]                # dynamo's, the event, the build
            building = seen[-1]
            assert (building.phase, building.seq, building.ended) == ("device", 0, False)
            assert building.matches(event) and building.id != seen[0].id
            assert (building.function, building.input_shapes, building.backend) == (
                event.function, {"x": [3]}, "neuron")
            assert list(rec.compiling.values()) == [building] and fake.sync_count == 0
            fn(torch.ones(3))                              # warm: nothing new starts
            assert len(seen) == 6
            rec.safe_point()
            assert rec.compiling == {} and fake.sync_count == 1
            assert event.neff_compile_s == 95.5
            assert seen[-1].id == building.id and seen[-1].ended and seen[-1].phase == "device"


def test_an_async_error_keeps_the_build_open_until_a_safe_point_resolves_it(clean_env):
    with installed_fake(build_type="DEV") as fake:
        fake.plan("compiled", duration_s=10.0)
        with nk.CompileRecorder() as rec:
            neuron_compiled()(torch.ones(3))
            fake.inject_async_error("the user's device fault")
            with pytest.raises(RuntimeError, match="the user's device fault"):
                rec.safe_point()
            assert [s.phase for s in rec.compiling.values()] == ["device"]
            rec.safe_point()
            assert rec.compiling == {} and rec.events[0].neff_cache == "compiled"


def test_launch_blocking_builds_inside_dynamo_so_no_device_phase(clean_env, monkeypatch):
    monkeypatch.setenv("NEURON_LAUNCH_BLOCKING", "1")
    with installed_fake() as fake:
        fake.plan("compiled", duration_s=30.0)
        with nk.CompileRecorder() as rec:
            seen = recorded(rec)
            neuron_compiled()(torch.ones(3))
            assert rec.compiling == {}
    assert {s.phase for s in seen if isinstance(s, CompileStart)} == {"dynamo"}
