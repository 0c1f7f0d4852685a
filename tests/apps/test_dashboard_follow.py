"""The dashboard's follow mode without a browser: ``RecompileDashboard.follow(folder)`` while a
thread writes two rank logs, the "Follow a run folder" control, errors in the poll thread, and
hostile text from the logs and the path.

The poll interval is shortened (``following.POLL_S``) so each test takes a fraction of a second.
"""
from __future__ import annotations

import re
import threading
import time
from pathlib import Path
from typing import Callable

import pytest

import neuronkit.apps.dashboard.following as following
from neuronkit.apps.dashboard.following import rank_text
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.charts import PNG_SIGNATURE
from neuronkit.widget import RecompileDashboard

WAIT_S = 10.0


@pytest.fixture(autouse=True)
def fast_polls(monkeypatch):
    monkeypatch.setattr(following, "POLL_S", 0.02)


def wait_for(condition: Callable[[], bool], what: str, timeout: float = WAIT_S) -> None:
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.01)


def rank_log(folder: Path, rank: int, host: str = "node-a", **header) -> CompileLog:
    """A rank's log being written, as ``neuronkit record`` writes it (header first)."""
    return CompileLog(path=folder / f"{host.strip('<>/')[:8]}.rank{rank}.jsonl",
                      header={"format": FORMAT, "version": 3, "device": "cpu", "backend": "eager",
                              "rank": rank, "host": host, **header})


def event(i: int, rank: int, function: str = "train_step", **fields) -> CompileEvent:
    """The ``i``-th compile of ``function`` on ``rank``: a new sequence length each time."""
    n = 64 * (i + 1)
    return CompileEvent(**{
        "compile_id": f"0/{i}", "function": function, "location": "train.py:12",
        "backend": "eager", "device": "cpu", "started_at": 1000.0 + 10 * i + rank,
        "duration_s": 2.0 + i, "input_shapes": {"tokens": [8, n]}, "rank": rank,
        "kind": "first" if i == 0 else "recompile", "graph_count": i + 1,
        "changed": f"tokens dim 1: {n - 64} -> {n}" if i else "",
        "reasons": [f"tensor 'tokens' size mismatch at index 1. expected {n - 64}, actual {n}"]
        if i else [], "context": f"step {i}", **fields})


def rows(html: str) -> int:
    return len(re.findall(r"<tr class=", html))


def test_the_dashboard_follows_two_rank_logs_until_the_run_finishes(tmp_path):
    """A thread writes two rank logs in three phases; after the polls the dashboard shows what
    was written (state, table, graph counts, ranks), its status says which ranks are still
    open, and "run finished" once both logs are closed; then it shows what a replay of the
    merged logs shows."""
    folder = tmp_path / "logs"
    folder.mkdir()
    go = [threading.Event() for _ in range(3)]
    done = [threading.Event() for _ in range(3)]

    def job() -> None:
        logs = [rank_log(folder, 0), rank_log(folder, 1)]
        go[0].wait(WAIT_S)
        for rank, log in enumerate(logs):
            log.append(event(0, rank))
        done[0].set()
        go[1].wait(WAIT_S)
        for i in (1, 2):
            for rank, log in enumerate(logs):
                log.append(event(i, rank))
        logs[0].set_wall_time(40.0)                    # rank 0 ends first
        done[1].set()
        go[2].wait(WAIT_S)
        logs[1].set_wall_time(42.0)
        done[2].set()

    writer = threading.Thread(target=job, daemon=True)
    writer.start()
    dash = RecompileDashboard.follow(folder)
    s = dash.state
    try:
        assert s.mode == "follow" and s.model is None and s.follow_active
        assert repr(dash) == "<RecompileDashboard: following logs>"
        assert "following <b>" in dash.children[0].value and "logs" in dash.children[0].value
        assert dash.follow_path.value == str(folder) and dash.follow_path.disabled
        assert not dash.follow_stop_button.disabled and dash.follow_button.disabled
        go[0].set()
        done[0].wait(WAIT_S)
        wait_for(lambda: s.status.endswith("; 2 compile events"), "the first two events")
        assert s.status == (f"Following {folder}: 2 logs, ranks 0, 1; still open: ranks 0, 1; "
                            "2 compile events")
        assert s.status_kind == "busy" and not s.follow_finished
        assert rows(dash.events_table.value) == 2 and s.graph_counts == {"train_step": 2}

        go[1].set()
        done[1].wait(WAIT_S)
        wait_for(lambda: s.status.endswith("still open: rank 1; 6 compile events"),
                 "rank 0's log closed")
        assert rows(dash.events_table.value) == 6
        assert s.graph_counts == {"train_step": 6}
        assert '<span class="nk-total-graphs">6</span>' in dash.graph_count.value
        assert [v for _, v in dash.table_panel.rank.options][1:] == [0, 1]   # ranks as merged
        assert [e.rank for e in s.log.events] == [0, 1, 0, 1, 0, 1]         # in start order
        assert "train_step" in dash.advice.value

        go[2].set()
        done[2].wait(WAIT_S)
        wait_for(lambda: not s.follow_active, "the end of the polls")
        assert s.follow_finished and s.status_kind == "ok"
        assert s.status == f"Followed {folder}: run finished, 2 logs (ranks 0, 1) all closed; " \
                           "6 compile events"
        assert dash.follow_stop_button.disabled and not dash.follow_button.disabled
        assert bytes(dash.chart.value).startswith(PNG_SIGNATURE)

        replay = RecompileDashboard.from_log(folder)     # the same logs, merged and replayed
        try:
            assert s.graph_counts == replay.state.graph_counts
            assert [a.title for a in s.advice] == [a.title for a in replay.state.advice]
            assert any("compile time is" in a.title for a in s.advice)   # the wall time is in
            assert dash.events_table.value == replay.events_table.value
            assert dash.graph_count.value == replay.graph_count.value
            assert dash.advice.value == replay.advice.value
        finally:
            replay.close()
    finally:
        dash.close()
    writer.join(WAIT_S)


def test_a_folder_with_no_log_yet_is_waited_for(tmp_path):
    folder = tmp_path / "later"
    dash = RecompileDashboard.follow(folder)
    s = dash.state
    try:
        assert s.follow_active and s.event_count == 0
        assert s.status.startswith(f"Following {folder}: no log yet")
        folder.mkdir()
        log = rank_log(folder, 0)
        log.append(event(0, 0))
        wait_for(lambda: s.status.endswith("; 1 compile event"), "the log that appeared")
        assert "1 log, rank 0; still open: rank 0; 1 compile event" in s.status
        dash.follow_stop_button.click()                      # Stop: what was read stays
        wait_for(lambda: not s.follow_active, "the stop")
        assert s.status.startswith(f"Stopped following {folder}: 1 log, rank 0")
        assert s.status_kind == "info" and s.event_count == 1
        log.append(event(1, 0))
        time.sleep(10 * following.POLL_S)
        assert s.event_count == 1                            # no poll after Stop
    finally:
        dash.close()


def test_an_exception_in_the_poll_thread_is_shown_in_the_widget(tmp_path, monkeypatch):
    folder = tmp_path / "logs"
    folder.mkdir()
    rank_log(folder, 0).append(event(0, 0))
    dash = RecompileDashboard.follow(folder)
    s = dash.state
    try:
        assert s.event_count == 1

        def broken() -> list:
            raise OSError("the shared disk went away <b>now</b>")

        monkeypatch.setattr(s.poller.follower, "poll", broken)
        wait_for(lambda: s.status_kind == "error", "the error")
        assert s.error == "OSError: the shared disk went away <b>now</b>"
        assert "OSError: the shared disk went away &lt;b&gt;now&lt;/b&gt;" in dash.status.value
        assert "Traceback" in dash.status.value and "<b>now" not in dash.status.value
        wait_for(lambda: not s.follow_active, "the polls to end")
        assert not dash.follow_button.disabled               # Follow again, once fixed
        assert s.event_count == 1                            # what was read stays
    finally:
        dash.close()


def test_an_exception_while_drawing_a_poll_is_shown_too(tmp_path, monkeypatch):
    import neuronkit.apps.dashboard.widget as widget

    folder = tmp_path / "logs"
    folder.mkdir()
    log = rank_log(folder, 0)
    dash = RecompileDashboard.follow(folder)
    try:
        monkeypatch.setattr(widget, "dashboard_chart",
                            lambda *a, **k: (_ for _ in ()).throw(ValueError("cannot draw")))
        log.append(event(0, 0))
        wait_for(lambda: dash.state.status_kind == "error", "the drawing error")
        assert "ValueError: cannot draw" in dash.status.value
    finally:
        dash.close()


def test_hostile_text_in_the_logs_and_the_path_is_escaped(tmp_path):
    folder = tmp_path / "run <img src=x onerror=alert(1)> \x1b[31m\u202e"
    folder.mkdir()
    log = rank_log(folder, 0, host="<script>alert('host')</script>",
                   description="<script>alert('description')</script>")
    log.append(event(0, 0, function="<script>alert('f')</script>",
                     context="<img src=y onerror=alert(2)>"))
    log.append(event(1, 0, function="<script>alert('f')</script>",
                     reasons=["<svg onload=alert(3)>"]))
    dash = RecompileDashboard.follow(folder)
    try:
        s = dash.state
        assert s.event_count == 2
        shown = [dash.children[0].value, dash.status.value, dash.events_table.value,
                 dash.graph_count.value, dash.advice.value, dash.chart_key.value]
        for html in shown:
            assert not re.search(r"<(script|img|svg)", html), html
            assert "\x1b" not in html and "\u202e" not in html
        assert "&lt;img src=x onerror=alert(1)&gt;" in dash.status.value
        assert "&lt;img src=x onerror=alert(1)&gt;" in dash.children[0].value
        assert "&lt;script&gt;alert(&#x27;f&#x27;)&lt;/script&gt;" in dash.events_table.value
        assert "\x1b" not in repr(dash) and "\u202e" not in repr(dash)
        for name, _ in dash.table_panel.function.options:
            assert "\x1b" not in name
    finally:
        dash.close()


def test_the_follow_control_of_a_live_dashboard_shows_the_run_beside_the_session(
        tmp_path, tiny_model_path):
    """Typed into the Follow box of a live dashboard: the folder becomes a run, shown and kept
    up to date; the session's own log stays one pick away; an empty box says what to type."""
    folder = tmp_path / "job-logs"
    folder.mkdir()
    log = rank_log(folder, 0)
    log.append(event(0, 0))
    dash = RecompileDashboard(tiny_model_path, backend="eager")
    s = dash.state
    try:
        assert s.mode == "live" and not s.follow_active and dash.follow_stop_button.disabled
        dash.follow_button.click()                           # nothing typed
        assert s.status_kind == "error" and "run folder" in s.error
        dash.follow_path.value = str(folder)
        dash.follow_button.click()
        assert s.follow_active and s.shown_run == "following job-logs"
        assert s.event_count == 1 and rows(dash.events_table.value) == 1
        assert dash.run.value == "following job-logs"
        log.append(event(1, 0))
        wait_for(lambda: s.status.endswith("; 2 compile events"), "the second event")
        assert rows(dash.events_table.value) == 2
        assert "Following" in s.status and "still open: rank 0" in s.status
        dash.run.value = ""                                  # this session: nothing compiled yet
        assert s.event_count == 0
        log.append(event(2, 0))
        wait_for(lambda: len(s.run_log("following job-logs").events) == 3, "the third event")
        assert s.event_count == 0 and rows(dash.events_table.value) == 0   # still the session
        dash.run.value = "following job-logs"
        assert s.event_count == 3
        dash.follow_stop_button.click()
        wait_for(lambda: not s.follow_active, "the stop")
        assert "Stopped following" in s.status
    finally:
        dash.close()


def test_close_ends_the_polls(tmp_path):
    dash = RecompileDashboard.follow(tmp_path)
    thread = dash.state.poller.thread
    assert thread is not None and thread.is_alive()
    dash.close()
    thread.join(WAIT_S)
    assert not thread.is_alive() and not dash.state.follow_active


def test_state_alone_follows(tmp_path):
    """No widget: ``DashboardState.following(path)`` and ``poll()`` on demand."""
    rank_log(tmp_path, 3).append(event(0, 3))
    state = DashboardState.following(tmp_path)
    try:
        assert state.event_count == 1 and state.log.events[0].rank == 3
        assert state.log.header["ranks"] == [3] and state.advice is not None
    finally:
        state.close()


def test_rank_text_names_ranges_and_stays_short():
    assert rank_text([]) == "no rank"
    assert rank_text([0]) == "rank 0"
    assert rank_text([0, 1]) == "ranks 0, 1"
    assert rank_text([0, 1, 2, 3, 7]) == "ranks 0-3, 7"
    many = rank_text(list(range(0, 512, 2)))
    assert many.startswith("ranks 0, 2, 4") and "(256 ranks)" in many and len(many) < 80
