"""RecompileDashboard without a browser: drive it through its buttons, assert on traits and HTML.

``button.click()`` runs the button's on_click handlers exactly as a click in the browser does.
Generation tests compile the tiny model for real (eager backend); they share one loaded
dashboard and start each test from ``reset()`` (torch.compiler.reset() and a new log).
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from helpers.paths import SAMPLE_LOG
from neuronkit.apps.dashboard.inputs import parse_boundaries, sweep_lengths
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.views.charts import PNG_SIGNATURE
from neuronkit.views.html import events_table_html
from neuronkit.views.table import TABLE_ROWS
from neuronkit.widget import RecompileDashboard


def table_rows(html: str) -> list[str]:
    return re.findall(r'<tr class="nk-[a-z-]+">', html)


def classes(widget) -> set[str]:
    return set(widget._dom_classes)


def make_log(tmp_path: Path, lengths=(17, 33, 65), limit_hit: bool = True) -> Path:
    """A saved log: one function recompiling on input_ids dim 1, then a recompile-limit hit."""
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 1,
                             "device": "neuron", "backend": "neuron"})
    previous = None
    for i, n in enumerate(lengths):
        log.append(CompileEvent(
            compile_id=f"0/{i}", function="forward", location="model.py:10", backend="neuron",
            device="neuron", started_at=1000.0 + 70 * i, duration_s=60.0 + i,
            input_shapes={"input_ids": [1, n]},
            changed="" if previous is None else f"input_ids dim 1: {previous} -> {n}",
            reasons=[] if previous is None else
            [f"0/{i - 1}: tensor 'L['input_ids']' size mismatch at index 1. expected {previous}, "
             f"actual {n}"],
            kind="first" if previous is None else "recompile", graph_count=i + 1,
            context=f"step {i}"))
        previous = n
    if limit_hit:
        log.append(CompileEvent(
            compile_id="0/9", function="forward", location="model.py:10", backend="neuron",
            device="neuron", started_at=1300.0, duration_s=0.0, input_shapes={"input_ids": [1, 99]},
            changed=f"input_ids dim 1: {previous} -> 99",
            reasons=["torch._dynamo hit config.recompile_limit (8)"], kind="limit_hit",
            graph_count=len(lengths), context="step 9"))
    return log.save(tmp_path / "saved-log.jsonl")


# --------------------------------------------------------------------------- pure helpers

def test_parse_boundaries_accepts_lists_and_rejects_junk():
    assert parse_boundaries("128, 32,64") == [32, 64, 128]
    assert parse_boundaries("64;64") == [64]
    for bad in ("", "abc", "32,-1", "0", "32,x"):
        with pytest.raises(ValueError, match="32,64,128"):
            parse_boundaries(bad)


def test_sweep_lengths_grow_or_shuffle_within_the_longest():
    assert sweep_lengths(5, 128) == [8, 38, 68, 98, 128]
    assert sweep_lengths(1, 64) == [64]
    random_lengths = sweep_lengths(20, 50, "random", seed=3)
    assert len(random_lengths) == 20 and all(8 <= n <= 50 for n in random_lengths)
    assert random_lengths == sweep_lengths(20, 50, "random", seed=3)
    assert random_lengths != sweep_lengths(20, 50, "random", seed=4)
    with pytest.raises(ValueError, match="at least 1"):
        sweep_lengths(0, 64)
    with pytest.raises(ValueError, match="growing"):
        sweep_lengths(3, 64, "sideways")


def test_event_table_escapes_text_caps_rows_and_marks_limit_hits(tmp_path):
    log = CompileLog.load(make_log(tmp_path))
    log.events[1].context = "<script>alert(1)</script>"
    html = events_table_html(log)
    assert "<script>" not in html and "&lt;script&gt;" in html
    assert len(table_rows(html)) == 4
    assert html.count('class="nk-limit-hit"') == 1
    assert "LIMIT HIT" in html
    assert "input_ids dim 1: 17 -&gt; 33" in html       # the changed dimension, escaped
    # newest first
    assert html.index("step 9") < html.index("step 0")
    many = CompileLog([CompileEvent(function="f", started_at=float(i))
                       for i in range(TABLE_ROWS + 5)])
    html = events_table_html(many)
    assert len(table_rows(html)) == TABLE_ROWS
    assert f"{TABLE_ROWS + 5} compile events" in html and f"last {TABLE_ROWS}" in html
    assert "No compile events yet" in events_table_html(CompileLog())


# --------------------------------------------------------------------------- replay

def test_replay_shows_a_saved_log_with_model_controls_disabled(tmp_path):
    dash = RecompileDashboard.from_log(make_log(tmp_path))
    s = dash.state
    assert s.mode == "replay" and s.model is None and s.recorder is None
    assert repr(dash) == "<RecompileDashboard: replay of saved-log.jsonl>"
    assert s.event_count == 4 and s.graph_counts == {"forward": 3}
    assert len(table_rows(dash.events_table.value)) == 4
    assert 'class="nk-limit-hit"' in dash.events_table.value
    assert '<span class="nk-total-graphs">3</span>' in dash.graph_count.value
    assert "limit" in dash.advice.value.lower()                  # diagnose() found the limit hit
    assert bytes(dash.chart.value).startswith(PNG_SIGNATURE)
    assert "Replaying 4 compile events" in s.status and "no model" in s.status
    for control in (dash.load_button, dash.generate_button, dash.sweep_button, dash.model_path,
                    dash.prompt, dash.padding, dash.backend, dash.reset_button):
        assert control.disabled, control
    assert "replay" in dash.generate_button.tooltip
    assert s.device == "neuron" and "neuron" in s.device_note
    # export stays available; a click on Load (disabled in the browser) explains itself
    assert not dash.save_log_button.disabled and not dash.save_png_button.disabled
    dash.load_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "error" and "RuntimeError: Load is not available" in s.status
    assert "nk-status-error" in dash.status.value
    dash.close()


def test_shipped_sample_log_replays_with_recompiles_and_advice():
    """The sample was recorded on the tiny model with the current code: prompts of growing length,
    no padding, so each new length compiled a prefill and a decode graph (nk.generate fitted the
    recompile limit to each call: no limit hit)."""
    dash = RecompileDashboard.from_log(SAMPLE_LOG)
    s = dash.state
    events = s.log.events
    assert s.event_count == len(CompileLog.load(SAMPLE_LOG).events) > 3
    # the prefill's and the decode's first graphs, then a recompile of each per new length
    assert [e.kind for e in events[:2]] == ["first", "first"]
    assert {e.kind for e in events[2:]} == {"recompile"}
    assert sum(s.graph_counts.values()) == len(events)             # each event one graph
    assert all(e.changed for e in events[2:])                      # every recompile says why
    assert "no padding" in s.log.header["description"]
    assert "no padding" in dash.children[0].value                  # the replay note shows it
    assert 'class="nk-limit-hit"' not in dash.events_table.value
    assert "bucket" in dash.advice.value.lower()
    assert bytes(dash.chart.value).startswith(PNG_SIGNATURE)
    assert events[0].function in dash.chart_key.value
    dash.close()


def test_export_buttons_write_the_log_and_the_chart(tmp_path):
    dash = RecompileDashboard.from_log(make_log(tmp_path))
    dash.export_path.value = str(tmp_path / "out" / "session")   # the Text the user edits
    assert dash.state.export_path == str(tmp_path / "out" / "session")
    dash.save_log_button.click()
    written = tmp_path / "out" / "session.jsonl"
    assert dash.state.status_kind == "ok" and str(written) in dash.state.status
    again = CompileLog.load(written)
    assert [e.to_dict() for e in again.events] == [e.to_dict() for e in dash.log.events]
    dash.save_png_button.click()
    png = tmp_path / "out" / "session.png"
    assert dash.state.status_kind == "ok" and png.read_bytes().startswith(PNG_SIGNATURE)
    width = lambda data: int.from_bytes(data[16:20], "big")  # noqa: E731  (PNG's IHDR)
    # the file carries its legend; the dashboard shows the key beside a narrower image
    assert width(png.read_bytes()) == 900 and width(bytes(dash.chart.value)) == 660
    # a name with a dot keeps it (run.2024.01 stays run.2024.01.png, never run.2024.png)
    assert dash.export_png(tmp_path / "direct.whatever") == tmp_path / "direct.whatever.png"
    # the export is a copy: later events do not leak into the exported file
    dash.log.append(CompileEvent(function="late"))
    assert len(CompileLog.load(written).events) == len(again.events)
    dash.close()


def test_an_error_while_drawing_lands_in_the_status_area(tmp_path, monkeypatch):
    import neuronkit.apps.dashboard.widget as widget

    dash = RecompileDashboard.from_log(make_log(tmp_path))

    def broken(log, **options):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(widget, "dashboard_chart", broken)
    dash._on_events()                                            # what a new event triggers
    assert dash.state.status_kind == "error"
    assert dash.state.error == "ValueError: cannot draw this"
    assert "ValueError: cannot draw this" in dash.status.value
    assert "Traceback" in dash.status.value                      # the detail is kept, folded
    dash.close()


def test_a_bad_log_file_raises_a_clear_error(tmp_path):
    bad = tmp_path / "not-a-log.jsonl"
    bad.write_text('{"hello": 1}\n')
    with pytest.raises(ValueError, match="not a neuronkit compile log"):
        RecompileDashboard.from_log(bad)


# --------------------------------------------------------------------------- live, no model yet

def test_live_dashboard_before_loading(tiny_model_path):
    dash = RecompileDashboard(tiny_model_path, backend="eager")
    s = dash.state
    assert repr(dash) == "<RecompileDashboard: live>"
    assert s.mode == "live" and not s.loaded
    assert "cpu" in s.device_options and s.device == "cpu"
    assert "no Neuron" in s.device_note and "torch-neuronx" in s.device_note
    assert s.backend_options == ["eager", "aot_eager", "inductor", "none"]
    assert dash.generate_button.disabled and "press Load first" in dash.generate_button.tooltip
    assert not dash.load_button.disabled
    assert dash.model_path.value == str(tiny_model_path)
    expected = {dash.generate_button: "nk-generate", dash.load_button: "nk-load",
                dash.events_table: "nk-events-table", dash.chart: "nk-chart",
                dash.status: "nk-status", dash.advice: "nk-advice",
                dash.graph_count: "nk-graph-count", dash.output_text: "nk-output-text"}
    for control, css in expected.items():
        assert css in classes(control)
    assert "nk-dashboard" in classes(dash)
    # state and widgets are linked both ways
    dash.max_new_tokens.value = 7
    assert s.max_new_tokens == 7
    s.boundaries = "16,48"
    assert dash.boundaries.value == "16,48"
    dash.generate_button.click()                                 # no model yet: said so
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "error" and "press Load first" in s.status
    dash.close()


def test_bad_model_path_shows_the_error_and_reenables_load(tmp_path, monkeypatch):
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    missing = tmp_path / "no-such-model"
    dash = RecompileDashboard(missing, backend="eager")
    busy_seen = []
    dash.state.observe(lambda c: busy_seen.append((c["new"], dash.load_button.disabled)), "busy")
    dash.load_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    s = dash.state
    assert s.status_kind == "error" and not s.loaded and not s.busy
    assert s.error.startswith("ModelNotFoundError") and "no-such-model" in s.error
    assert "nk-status-error" in dash.status.value and "no-such-model" in dash.status.value
    assert busy_seen == [(True, True), (False, False)]           # disabled while loading only
    assert dash.generate_button.disabled
    dash.close()


# --------------------------------------------------------------------------- live, real compiles

@pytest.fixture(scope="module")
def loaded(tiny_model_path):
    dash = RecompileDashboard(tiny_model_path, backend="eager", dtype="float32")
    dash.load_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert dash.state.loaded, dash.state.status
    yield dash
    dash.close()


@pytest.fixture
def dash(loaded):
    loaded.reset()
    assert loaded.state.event_count == 0 and loaded.state.status_kind == "ok"
    loaded.state.padding, loaded.state.boundaries = "none", "32,64,128"
    loaded.state.max_new_tokens, loaded.state.sweep_count = 8, 3
    loaded.state.sweep_order = "growing"
    return loaded


def test_load_shows_where_the_parameters_are(loaded):
    assert loaded.state.placement_ok
    assert "placement ok" in loaded.state.placement and "on cpu" in loaded.state.placement
    assert "nk-good" in loaded.placement.value
    assert "Loaded tiny-qwen3" in loaded.state.status
    assert not loaded.generate_button.disabled


@pytest.mark.slow
def test_generate_click_records_and_draws_each_compile(dash):
    s = dash.state
    during = []                                   # table rows seen while generate() still runs
    dash.events_table.observe(lambda c: during.append((s.busy, len(table_rows(c["new"])))),
                              "value")
    disabled_while_busy = []
    s.observe(lambda c: disabled_while_busy.append(
        (c["new"], dash.generate_button.disabled, dash.load_button.disabled)), "busy")
    dash.generate_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "ok", s.error_detail
    assert s.event_count >= 1 and s.event_count == len(s.log.events)
    assert (True, 1) in during                    # drawn live, before generate() returned
    assert len(table_rows(dash.events_table.value)) == s.event_count
    assert sum(s.graph_counts.values()) >= 1
    total = sum(s.graph_counts.values())
    assert f'<span class="nk-total-graphs">{total}</span>' in dash.graph_count.value
    assert s.advice and dash.advice.value.count("nk-advice-item") == len(s.advice)
    assert s.generated_text.strip() and "nk-text" in dash.output_text.value
    assert "tokens/s" in s.run_summary
    assert bytes(dash.chart.value).startswith(PNG_SIGNATURE)
    assert disabled_while_busy == [(True, True, True), (False, False, False)]
    # the same prompt again: the graph exists, nothing new compiles
    before = s.event_count
    dash.generate_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "ok" and s.event_count == before


@pytest.mark.slow
def test_sweep_recompiles_with_naive_padding_and_less_with_buckets(dash):
    s = dash.state
    dash.sweep_button.click()                     # 3 growing lengths, no padding
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "ok", s.error_detail
    naive = sum(s.graph_counts.values())
    assert naive > 1 and naive == 2 * len(set(s.prompt_lengths))   # a prefill + a decode each
    assert "recompile" in {e.kind for e in s.log.events}
    assert re.search(r"static cache|changed", dash.advice.value)
    assert len(s.prompt_lengths) == 3 and not dash.plan_button.disabled
    dash.plan_button.click()                      # plan_buckets over the 3 lengths
    assert s.padding == "buckets" and parse_boundaries(s.boundaries)[-1] >= max(s.prompt_lengths)

    dash.reset()
    s.padding, s.boundaries = "buckets", "64,128"
    dash.sweep_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "ok", s.error_detail
    bucketed = sum(s.graph_counts.values())
    assert 2 <= bucketed <= 4 and bucketed < naive             # prefill + decode per bucket
    assert "padding buckets" in s.status


@pytest.mark.slow
def test_prompt_longer_than_the_buckets_is_reported(dash):
    s = dash.state
    s.padding, s.boundaries = "buckets", "4"
    dash.generate_button.click()
    dash.state.wait()  # the button runs it in a worker thread
    assert s.status_kind == "error" and "longer than the largest bucket" in s.status
    assert not s.busy and not dash.generate_button.disabled


def test_state_alone_drives_a_replay(tmp_path):
    """DashboardState works without any widget (what the view only draws)."""
    state = DashboardState.replay(make_log(tmp_path, lengths=(8, 16), limit_hit=False))
    assert state.mode == "replay" and state.event_count == 2
    assert state.graph_counts == {"forward": 2}
    assert state.export_log(tmp_path / "copy").name == "copy.jsonl"
    with pytest.raises(RuntimeError, match="replay"):
        state.generate("hi")
    assert state.status_kind == "error"


def test_replay_needs_no_torch():
    """from_log works where torch is not importable yet (Binder start-up, a laptop)."""
    import subprocess
    import sys

    code = ("import sys\nfrom neuronkit.widget import RecompileDashboard\n"
            f"dash = RecompileDashboard.from_log({str(SAMPLE_LOG)!r})\n"
            "assert dash.state.event_count > 0\n"
            "print(sorted(m for m in ('torch', 'transformers') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    assert out.stdout.strip() == "[]"


def test_on_neuron_the_dashboard_offers_neuron_first(fake_neuron):
    """With (a fake) torch-neuronx and 2 devices: neuron is the default, cpu the alternative."""
    dash = RecompileDashboard()
    s = dash.state
    assert s.device_options == ["neuron", "cpu"] and s.device == "neuron"
    assert s.backend_options == ["neuron", "none"] and s.backend == "neuron"
    assert "2 Neuron device(s)" in s.device_note
    assert list(dash.device.options) == ["neuron", "cpu"] and dash.backend.value == "neuron"
    dash.close()


# --------------------------------------------------------------------------- review fixes

def test_export_keeps_the_wall_time_for_the_compile_share(tmp_path):
    log = CompileLog.load(make_log(tmp_path))
    log.wall_time_s = 500.0
    state = DashboardState(log=log)
    written = state.export_log(tmp_path / "again")
    assert CompileLog.load(written).wall_time_s == 500.0


def test_events_table_names_functions_like_the_chart_and_counts():
    events = [CompileEvent(seq=0, function="forward", location="a/layers.py:10"),
              CompileEvent(seq=1, function="forward", location="b/model.py:20", kind="recompile")]
    html = events_table_html(CompileLog(events))
    assert "forward (layers.py:10)" in html and "forward (model.py:20)" in html


def test_backend_choices_follow_the_selected_device(fake_neuron):
    """On a Neuron host, choosing cpu offers the CPU backends (not 'neuron'), and back."""
    dash = RecompileDashboard()
    s = dash.state
    assert s.backend == "neuron"
    dash.device.value = "cpu"                       # the user picks cpu in the dropdown
    assert "neuron" not in s.backend_options and "eager" in s.backend_options
    assert s.backend == "eager" and dash.backend.value == "eager"
    assert list(dash.backend.options) == s.backend_options
    dash.device.value = "neuron"
    assert s.backend_options == ["neuron", "none"] and s.backend == "neuron"
    assert dash.backend.value == "neuron"
    dash.close()


def test_load_starts_a_new_log_when_device_or_backend_changed(tiny_model_path):
    state = DashboardState(tiny_model_path, device="cpu", backend="eager", dtype="float32")
    state.recorder.log.append(CompileEvent(function="earlier"))   # a log that is not empty
    state.backend = "aot_eager"
    state.load()
    assert state.loaded
    assert (state.recorder.device, state.recorder.backend) == ("cpu", "aot_eager")
    assert state.log.header["backend"] == "aot_eager" and not state.log.events
    same = state.recorder
    state.load()                                    # nothing changed: the log is kept
    assert state.recorder is same
    state.close()


def test_shipped_sample_logs_carry_no_machine_paths():
    """The samples travel with the repository: no folder of the machine that recorded them, and
    contexts that match how they were run (no buckets: each batch's own length)."""
    for sample in sorted(SAMPLE_LOG.parent.glob("*.jsonl")):
        text = sample.read_text()
        for prefix in ("/work", "/tmp", "/home", "/root", "/usr", "site-packages"):
            assert prefix not in text, (sample.name, prefix)
        if sample.name.endswith("_traffic.jsonl"):  # request lengths (neuronkit buckets), no log
            continue
        log = CompileLog.load(sample)
        assert all(": bucket " not in e.context for e in log.events), sample.name
