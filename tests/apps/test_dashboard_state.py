"""The dashboard's state for minutes-long compiles: a worker thread, Stop, progress, compiles in
progress, runs kept and uploaded, and the defects found by probing it (each with its test)."""
from __future__ import annotations

import time
from pathlib import Path

import pytest

from neuronkit.apps.dashboard.exports import export_target
from neuronkit.apps.dashboard.runs import run_name
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT
from neuronkit.log.compile_log import CompileLog
from neuronkit.setup.load_errors import ModelNotFoundError
from neuronkit.sources.starts import CompileStart


def saved(tmp_path: Path, name: str, functions=("forward",), rank: int = 0) -> bytes:
    log = CompileLog(header={"format": FORMAT, "version": 2, "device": "cpu", "backend": "eager"})
    for i, f in enumerate(functions):
        log.append(CompileEvent(function=f, kind="first" if i == 0 else "recompile", rank=rank,
                                started_at=100.0 + i, duration_s=0.5,
                                input_shapes={"x": [1, 8 * (i + 1)]}))
    return log.save(tmp_path / name).read_bytes()


@pytest.fixture(scope="module")
def live(tiny_model_path):
    state = DashboardState(tiny_model_path, device="cpu", backend="eager", dtype="float32")
    state.max_new_tokens = 2
    state.load()
    yield state
    state.close()


# -- defects found by probing the state ------------------------------------------------------
def test_export_names_with_dots_keep_their_name(tmp_path):
    assert export_target(tmp_path / "run.2024.01", ".jsonl", "log").name == "run.2024.01.jsonl"
    assert export_target(tmp_path / "chart.v2", ".png", "chart").name == "chart.v2.png"
    assert export_target(tmp_path / "log.jsonl", ".jsonl", "log").name == "log.jsonl"
    folder = str(tmp_path / "out") + "/"
    assert export_target(folder, ".jsonl", "compile-log") == tmp_path / "out" / "compile-log.jsonl"
    assert export_target(tmp_path, ".png", "chart") == tmp_path / "chart.png"
    with pytest.raises(ValueError, match="file name"):
        export_target("  ", ".png", "chart")


def test_a_failed_generate_does_not_feed_the_planner(live):
    live.reset()
    live.padding, live.boundaries = "buckets", "8"
    before = list(live.prompt_lengths)
    with pytest.raises(ValueError, match="longer than the largest bucket"):
        live.generate("the cat sat on a mat while rain fell over quiet hills and rivers ran")
    assert live.prompt_lengths == before and "ValueError" in live.error
    live.padding = "none"
    live.generate("the cat sat")
    assert len(live.prompt_lengths) == len(before) + 1
    assert live.plan()  # planning works without a Reset


def test_switching_the_device_after_load_never_mislabels_the_log(live):
    live.reset()
    header = dict(live.log.header)
    live.device = "neuron"  # what the device selector would do on a Trainium host
    try:
        with pytest.raises(RuntimeError, match="loaded on cpu, but the device chosen now is neuron"):
            live.generate("the cat")
        assert live.log.header["device"] == header["device"] == "cpu"
        assert not live.log.events
    finally:
        live.device = "cpu"
        live.backend = "eager"


def test_a_failed_load_keeps_the_model_already_loaded(live, tmp_path):
    model = live.model
    path = live.model_path
    live.model_path = str(tmp_path / "no-such-model")
    try:
        with pytest.raises(ModelNotFoundError):
            live.load()
        assert live.model is model and live.loaded and live.error
        live.generate("still works")
    finally:
        live.model_path = path


# -- a free kernel: the worker thread, progress and Stop -------------------------------------------
def test_a_sweep_in_the_background_reports_progress_and_stops_between_batches(live):
    live.reset()
    live.sweep_count, live.padding = 6, "none"
    seen, maxima = [], []
    live.observe(lambda change: seen.append(change["new"]), "progress")
    live.observe(lambda change: maxima.append(change["new"]), "progress_max")
    worker = live.start("sweep")
    with pytest.raises(RuntimeError, match="still busy"):
        live.start("generate")
    deadline = time.monotonic() + 120
    while live.progress < 1 and time.monotonic() < deadline:
        time.sleep(0.02)
    live.stop()
    worker.join(120)
    assert not worker.is_alive() and not live.busy
    assert live.status.startswith("Stopped after ") and "of 6 batches" in live.status
    done = int(live.status.split()[2])
    assert 1 <= done < 6 and live.progress == done and 1 in seen
    assert len(live.prompt_lengths) == done and live.log.events  # what was recorded stays
    assert "batches" in live.eta
    assert maxima == [6]  # the bar counts the sweep's prompts, never one generate call's batch


def test_an_error_in_the_background_lands_in_the_status(live):
    live.reset()
    live.padding, live.boundaries = "buckets", "4"
    live.prompt = "the cat sat on a mat while rain fell over quiet hills"
    live.start("generate").join(120)
    assert live.status_kind == "error" and "ValueError" in live.error and live.error_detail
    live.padding = "none"


def test_compiles_in_progress_are_shown_while_they_run(live):
    live.reset()
    rows: list[list[dict]] = []
    live.observe(lambda change: rows.append(change["new"]), "compiling")
    live.generate("the cat sat on")
    started = [r for snapshot in rows for r in snapshot]
    assert started and all(r["phase"] == "dynamo" for r in started)
    assert any("forward" in r["function"] for r in started)
    assert live.compiling == [] and rows[-1] == []  # every compile ended


def test_a_started_compile_ticks_until_it_ends(monkeypatch):
    from neuronkit.apps.dashboard import compiling as dashboard_compiling

    monkeypatch.setattr(dashboard_compiling, "TICK_S", 0.01)
    state = DashboardState(log=CompileLog())
    state.compiles._starts, state.compiles._ticker = {}, None
    start = CompileStart(compile_id="0/0", function="M.forward[decode]",
                         input_shapes={"input_ids": [1, 1]}, started_at=time.time() - 42)
    state._on_start(start)
    assert state.compiling[0]["function"] == "M.forward[decode]"
    assert state.compiling[0]["shapes"] == "input_ids[1, 1]"
    deadline = time.monotonic() + 5
    while state.tick < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert state.tick >= 3
    import dataclasses
    state._on_start(dataclasses.replace(start, ended_at=time.time()))
    assert state.compiling == []


# -- runs: keep, upload, show ------------------------------------------------------------------
def test_uploaded_logs_become_runs_and_several_are_also_merged(tmp_path):
    state = DashboardState(log=CompileLog())
    files = [("rank0.jsonl", saved(tmp_path, "a.jsonl", ("f", "f"), rank=0)),
             ("rank1.jsonl", saved(tmp_path, "b.jsonl", ("f", "g", "g"), rank=1)),
             ("notes.txt", b"not a log\n")]
    added = state.open_uploads(files)
    assert added == ["rank0.jsonl", "rank1.jsonl", "2 logs merged"]
    assert state.shown_run == "2 logs merged" and len(state.log.events) == 5
    assert "notes.txt" in state.status and state.event_count == 5
    state.show_run("rank0.jsonl")
    assert len(state.log.events) == 2 and state.event_count == 2
    assert state.status == "Showing 'rank0.jsonl': 2 compile events"
    state.show_run("")
    assert state.status == "Showing 'the replayed log': 0 compile events"
    with pytest.raises(KeyError, match="no run named"):
        state.show_run("nope")
    with pytest.raises(ValueError, match="no log could be read"):
        state.open_uploads([("x.jsonl", b"")])


def test_an_upload_name_is_cleaned_and_made_unique():
    assert run_name("a\x1b[2Jb\nc", []) == "ab c"  # the whole escape sequence goes
    assert run_name("log", ["log", "log (2)"]) == "log (3)"
    assert len(run_name("x" * 500, [])) == 60


def test_keep_run_is_a_snapshot(live):
    live.reset()
    live.generate("the cat")
    kept = live.keep_run()
    n = len(live.run_log(kept).events)
    live.generate("the cat sat on a mat while rain fell")
    assert len(live.run_log(kept).events) == n < len(live.session_log.events)
    assert kept in live.run_names


def hold_generate_until_stop(monkeypatch):
    """The worker's generate waits for Stop before it starts: Stop then lands before its first
    batch however the threads are scheduled (a busy machine once let the worker in first)."""
    from neuronkit.apps.dashboard import session as dashboard_session

    real = dashboard_session.generate

    def held(*args, stop, **kwargs):
        assert stop.wait(60), "Stop never reached the worker"
        return real(*args, stop=stop, **kwargs)
    monkeypatch.setattr(dashboard_session, "generate", held)


def test_stop_right_after_start_is_not_lost(live, monkeypatch):
    """Stop pressed before the worker thread got going still stops it (before any batch)."""
    hold_generate_until_stop(monkeypatch)
    live.reset()
    live.sweep_count, live.padding = 4, "none"
    worker = live.start("sweep")
    live.stop()
    worker.join(120)
    assert live.status == ("Stopped after 0 of 4 batches; what was recorded stays in the log")
    assert not live.log.events and not live.busy and not live.stopping


def test_the_run_summary_gives_the_throughput_without_compiles(live, monkeypatch):
    import dataclasses

    from neuronkit.apps.dashboard import session as dashboard_session

    real = dashboard_session.generate

    def timed(*args, **kwargs):  # the real run, with times that make the line exact
        return dataclasses.replace(real(*args, **kwargs), wall_s=10.0, new_tokens=120,
                                   tokens_per_s=12.0, events=[CompileEvent(duration_s=4.0)])
    monkeypatch.setattr(dashboard_session, "generate", timed)
    live.padding = "none"
    live.generate("the cat sat")
    assert ", 10.00 s, 12 tokens/s (20 tokens/s without the 4.00 s of compiles), padding " \
           "waste" in live.run_summary


def test_a_generate_stopped_before_its_batch_keeps_the_last_summary(live, monkeypatch):
    live.reset()
    live.padding = "none"
    live.generate("the cat sat")
    summary, text = live.run_summary, live.generated_text
    hold_generate_until_stop(monkeypatch)
    worker = live.start("generate")
    live.stop()
    worker.join(120)
    assert live.status == "Stopped before generating: Stop was pressed"
    assert (live.run_summary, live.generated_text) == (summary, text)


def test_advice_is_diagnosed_again_only_when_the_log_changed(monkeypatch):
    from neuronkit.apps.dashboard import state as dashboard_state

    calls = []
    real = dashboard_state.diagnose
    monkeypatch.setattr(dashboard_state, "diagnose",
                        lambda log, **options: calls.append(1) or real(log, **options))
    state = DashboardState(log=CompileLog())
    assert len(calls) == 1
    state.refresh()
    assert len(calls) == 1  # nothing changed: the findings are kept
    state.log.append(CompileEvent(function="f", kind="first"))
    state.refresh()
    assert len(calls) == 2 and state.event_count == 1
    with state._action("an action"):  # an action may update events in place (NEFF times)
        pass
    state.refresh()
    assert len(calls) == 3


# -- exports never overwrite what they were not asked to --------------------------------------------
def test_save_log_never_overwrites_the_replayed_log(tmp_path):
    path = tmp_path / "run.jsonl"
    path.write_bytes(saved(tmp_path, "run.jsonl", ("f", "f")) + b"{a line it cannot read\n")
    with pytest.warns(UserWarning, match="not JSON"):
        state = DashboardState.replay(path)
    before = path.read_bytes()
    for overwrite in (False, True):
        with pytest.raises(FileExistsError, match=r"the replayed log.*another name"):
            state.export_log(path, overwrite=overwrite)  # before: rewritten, its bad line gone
        assert path.read_bytes() == before
        assert state.status_kind == "error" and "run.jsonl" in state.status
    assert state.export_log(tmp_path / "copy").name == "copy.jsonl"
    assert state.status_kind == "ok"


def test_save_log_and_chart_refuse_an_existing_file_unless_asked(tmp_path):
    state = DashboardState(log=CompileLog([CompileEvent(function="f", kind="first")]))
    for export, name in ((state.export_log, "earlier.jsonl"), (state.export_png, "earlier.png")):
        earlier = tmp_path / name
        earlier.write_bytes(b"an earlier export")
        with pytest.raises(FileExistsError, match=r"already exists.*another name.*overwrite=True"):
            export(earlier)  # before: overwritten without asking
        assert earlier.read_bytes() == b"an earlier export"
        assert state.status_kind == "error" and name in state.status
        assert export(earlier, overwrite=True) == earlier
        assert earlier.read_bytes() != b"an earlier export" and state.status_kind == "ok"


# -- padding -----------------------------------------------------------------------------------------
def test_padding_max_pads_every_prompt_to_the_largest_boundary(live):
    live.reset()
    live.padding, live.boundaries = "max", "16, 8,12"
    assert live.buckets().boundaries == (16,)
    tokens = len(live.tokenizer("the cat")["input_ids"])  # fewer than 8: the smallest bucket fits
    result = live.generate("the cat")
    assert result.buckets.boundaries == (16,)
    assert result.padding_waste == pytest.approx(1 - tokens / 16)
    live.padding = "buckets"
    assert live.generate("the cat").padding_waste == pytest.approx(1 - tokens / 8)


def test_a_log_of_wrong_typed_events_built_in_memory_replays():
    """Values of the wrong type in events built by hand (a log from a file is checked line by
    line) show as unknown: the dashboard's advice, counts and views never raise on them."""
    events = [CompileEvent(function="f", location="m.py:1", kind="first", duration_s="<img>",
                           input_shapes={"x": [1, "?"]}, rank="r"),
              CompileEvent(function=["not", "text"], kind="recompile", duration_s=None,
                           input_shapes={"x": {"dims": 3}}, reasons=[None], started_at="later"),
              CompileEvent(function="f", location="m.py:1", kind="limit_hit", calls="many",
                           ops={"add": "two"})]
    state = DashboardState(log=CompileLog(events))
    assert state.event_count == 3 and sum(state.graph_counts.values()) == 2
    assert state.advice and all(a.title for a in state.advice)
    assert [e.duration_s for e in events[:2]] == ["<img>", None]   # the events given stay as they are
