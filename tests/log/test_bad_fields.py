"""One absurd value in an event line (a 1e308 start, a 10**30 size, a NaN duration) costs that
value, not the compile: the event is kept with the value dropped, one warning names the line, the
event and the field, and every view of the log works."""
from __future__ import annotations

import json
import warnings

import pytest

from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT, FORMAT_VERSION, LogWarning, event_problem
from neuronkit.log.compile_log import CompileLog

HEADER = json.dumps({"format": FORMAT, "version": FORMAT_VERSION, "device": "cpu"})
T0 = 1_700_000_000.0


def line(n: int, **fields) -> str:
    event = CompileEvent(seq=n, compile_id=f"0/{n}", function="forward", location="m.py:1",
                         started_at=T0 + n, duration_s=0.5, input_shapes={"x": [2, 3 + n]},
                         kind="first" if n == 0 else "recompile", changed="x dim 1",
                         reasons=["x.size()[1] == 3"])
    return json.dumps({**event.to_dict(), **fields})  # NaN as the recorder's json.dumps writes it


def write(tmp_path, *lines: str):
    path = tmp_path / "run.jsonl"
    path.write_text("".join(f"{text}\n" for text in lines) + json.dumps({"wall_time_s": 60.0}) + "\n")
    return path


def absurd_log(tmp_path):
    return write(tmp_path, HEADER, line(0), line(1, started_at=1e308),
                 line(2, input_shapes={"x": [2, 10**30], "mask": [2, 5]}),
                 line(3, duration_s=float("nan")), line(4))


def load(path) -> tuple[CompileLog, str]:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        log = CompileLog.load(path)
    assert len(caught) == 1 and caught[0].category is LogWarning, [str(w.message) for w in caught]
    return log, str(caught[0].message)


def test_one_absurd_value_drops_that_value_not_the_event(tmp_path):
    log, message = load(absurd_log(tmp_path))
    assert [e.seq for e in log.events] == [0, 1, 2, 3, 4]  # every compile is still there
    one, two, three = log.events[1:4]
    assert one.started_at == T0 and one.duration_s == 0.5  # the start of the event before it
    assert two.input_shapes == {"x": [2, "?"], "mask": [2, 5]}  # the size alone is dropped
    assert three.duration_s == 0.0 and three.started_at == T0 + 3
    assert all(event_problem(e.to_dict(), set()) is None for e in log.events)
    assert "dropped 3 bad field values of 3 events" in message and "kept 5 events" in message
    assert "line 3 event 1 (started_at: expected a time within ±1e+10 s, got 1e+308)" in message
    assert "line 4 event 2 (input_shapes: 'x' expected a list of sizes, got [2, 10000" in message
    assert "line 5 event 3 (duration_s: expected seconds (a finite number >= 0), got nan)" in message
    assert "skipped" not in message


def test_several_bad_values_of_one_event_are_each_named(tmp_path):
    path = write(tmp_path, HEADER, line(0, rank=-1, calls=10**20, neff_cache="somewhere",
                                        ops={"aten::mm": 2, "aten::add": -4},
                                        metrics={"ok": 1, "big": 2**70}))
    log, message = load(path)
    event = log.events[0]
    assert (event.rank, event.calls, event.neff_cache) == (0, 0, None)
    assert event.ops == {"aten::mm": 2} and event.metrics == {"ok": 1}
    assert event.started_at == T0 and event.input_shapes == {"x": [2, 3]}  # the rest untouched
    assert "dropped 5 bad field values of 1 event and kept it" in message
    for said in ("rank: expected an integer >= 0", "calls: expected an integer <=", "neff_cache:",
                 "ops: 'aten::add' expected an integer >= 0", "metrics: a number out of range"):
        assert f"line 2 event 0 ({said}" in message


def test_a_first_event_without_a_start_is_placed_at_the_next_start(tmp_path):
    log, message = load(write(tmp_path, HEADER, line(0, started_at=float("inf")), line(1)))
    assert [e.started_at for e in log.events] == [T0 + 1, T0 + 1]  # not at 0: no 56-year timeline
    assert "line 2 event 0 (started_at: expected a finite time, got inf)" in message


def test_a_line_that_is_no_event_is_still_skipped(tmp_path):
    """The protections stay: a wrong type, an unknown kind or a bad seq is no event."""
    path = write(tmp_path, HEADER, line(0, duration_s="slow"), line(1, kind="exploit"),
                 line(2, seq=-1), line(3, duration_s=-1.0), line(4))
    log, message = load(path)
    assert [e.seq for e in log.events] == [3, 4]
    assert "skipped 3 bad lines" in message and "dropped 1 bad field value of 1 event" in message


def test_a_log_with_dropped_values_saves_and_loads_clean(tmp_path):
    log, _ = load(absurd_log(tmp_path))
    saved = log.save(tmp_path / "copy.jsonl")
    log.release()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        again = CompileLog.load(saved)
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in log.events]


def test_every_view_of_a_log_with_dropped_values_works(tmp_path):
    import neuronkit as nk
    from neuronkit.views.chrome_trace import write_chrome_trace
    from neuronkit.views.report_json import report_data
    from neuronkit.views.text import format_events, format_report, format_summary

    log, _ = load(absurd_log(tmp_path))
    events = format_events(log)
    assert events.count("forward") >= 5 and "nan" not in events.lower()
    assert "forward" in format_summary(log)
    advice = nk.diagnose(log)
    assert advice and log.summary()[0]["graphs"] == 5
    data = report_data(log, limit=None)
    text = json.dumps(data, allow_nan=False)  # no NaN or Infinity reaches JSON
    assert data["counts"]["events"] == 5 and "1e+308" not in text
    assert "forward" in format_report(log, limit=None)
    trace = json.loads(write_chrome_trace(log, tmp_path / "t.json").read_text())
    assert len([e for e in trace["traceEvents"] if e["ph"] == "X"]) == 5


def test_the_chart_of_a_log_with_dropped_values_draws(tmp_path):
    pytest.importorskip("matplotlib")
    from neuronkit.views.charts import save_png, timeline

    log, _ = load(absurd_log(tmp_path))
    png = save_png(timeline(log), tmp_path / "t.png")
    assert png.read_bytes().startswith(b"\x89PNG")
