"""The dashboard's control panels, one function each: model, generation, runs (with the follow
row), exports. Each
builds its widgets, links their values to the session's traits, turns clicks into the state's
actions, switches its controls off while busy or in a replay, and returns its box with the
widgets the dashboard names."""
from __future__ import annotations

from typing import Any, Callable

import ipywidgets as w
from traitlets import link

from neuronkit.apps.dashboard.compare_panel import ComparePanel
from neuronkit.apps.dashboard.controls import (
    action_button,
    follow,
    hide_in_replay,
    options,
    row,
    section,
    styled,
)
from neuronkit.apps.dashboard.inputs import DTYPES, PADDINGS, SWEEP_ORDERS
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.safe import html_text

__all__ = ["model_panel", "generation_panel", "runs_panel", "follow_row", "exports_row", "LABEL",
           "PADDING_LABELS", "LOAD_TIP", "GENERATE_TIP", "UPLOAD_ACCEPT", "FOLLOW_TIP"]

LABEL = {"description_width": "90px"}
PADDING_LABELS = {"none": "none (each prompt its own length)", "max": "pad to the largest bucket",
                  "buckets": "buckets"}
LOAD_TIP = "load_model() on the chosen device, then check_placement()"
GENERATE_TIP = "generate() under the compile recorder"
UPLOAD_ACCEPT = ".jsonl,.json,.log,.txt,application/json,text/plain"
FOLLOW_TIP = ("show a job's compiles while it runs: the folder its ranks write their logs to "
              "(neuronkit record --log-dir), or one log; read again about once a second")


def _link(state: DashboardState, **controls: w.Widget) -> None:
    """Each control's value and the session trait of its name, kept equal both ways."""
    for trait, control in controls.items():
        link((state.session, trait), (control, "value"))


def _why_off(state: DashboardState) -> str | None:
    """Why the model and generation controls are off now (None: they are on)."""
    if state.mode != "live":
        return state.session.no_model_reason
    if state.busy:
        return "busy: wait for the current action to finish"
    return None


def model_panel(state: DashboardState) -> tuple[w.VBox, w.Text, w.Dropdown, w.Dropdown, w.Button,
                                                w.HTML, w.HTML]:
    """Model path, device, dtype, Load; the device note and the placement check.
    Returns (box, model_path, device, dtype, load_button, device_note, placement)."""
    model_path = styled(w.Text(description="Model", style=LABEL,
                               placeholder="empty: the embedded tiny model"),
                        "nk-model-path", width="420px")
    device = styled(w.Dropdown(options=options(state.device_options), description="Device",
                               style=LABEL), "nk-device", width="220px")
    dtype = styled(w.Dropdown(options=DTYPES, description="dtype", style=LABEL), "nk-dtype",
                   width="220px")
    load = action_button("Load", "nk-load", lambda: state.start("load"), "primary", LOAD_TIP,
                         state.show_error)
    device_note = styled(w.HTML(), "nk-device-note")
    placement = styled(w.HTML(), "nk-placement")
    _link(state, model_path=model_path, device=device, dtype=dtype)

    def show_model(_: Any = None) -> None:
        device_note.value = f'<div class="nk-muted">{html_text(state.device_note)}</div>'
        css = "nk-good" if state.placement_ok else "nk-bad"
        placement.value = (f'<pre class="{css}">{html_text(state.placement)}</pre>'
                           if state.placement else "")

    def sync(_: Any = None) -> None:
        why = _why_off(state)
        for control in (model_path, device, dtype, load):
            control.disabled = bool(why)
        load.tooltip = why or LOAD_TIP

    follow(state, ["placement", "placement_ok", "device_note"], show_model)
    follow(state, ["busy", "mode"], sync)
    box = section("Model", row(model_path, device, dtype, load), device_note, placement,
                  css_class="nk-model-panel")
    hide_in_replay(state, box)
    return box, model_path, device, dtype, load, device_note, placement


def generation_panel(state: DashboardState) -> tuple[Any, ...]:
    """Prompt, new tokens, padding and buckets, backend; Plan, Generate, Sweep, Reset.
    Returns (box, prompt, max_new_tokens, padding, boundaries, plan_button, backend,
    generate_button, sweep_count, sweep_order, sweep_button, reset_button)."""
    report = state.show_error
    prompt = styled(w.Textarea(description="Prompt", style=LABEL, rows=2), "nk-prompt",
                    width="640px")
    max_new_tokens = styled(w.BoundedIntText(min=1, max=1024, description="New tokens",
                                             style=LABEL), "nk-max-new-tokens", width="180px")
    padding = styled(w.Dropdown(options=[(PADDING_LABELS[p], p) for p in PADDINGS],
                                description="Padding", style=LABEL), "nk-padding", width="360px")
    boundaries = styled(w.Text(description="Buckets", style=LABEL, placeholder="e.g. 32,64,128"),
                        "nk-buckets", width="260px")
    plan = action_button("Plan from prompts", "nk-plan", state.plan, "",
                         "plan_buckets() over the prompt lengths sent so far", report)
    backend = styled(w.Dropdown(options=options(state.backend_options), description="Backend",
                                style=LABEL), "nk-backend", width="220px")
    generate = action_button("Generate", "nk-generate", lambda: state.start("generate"),
                             "success", GENERATE_TIP, report)
    sweep_count = styled(w.BoundedIntText(min=1, max=64, description="Sweep", style=LABEL),
                         "nk-sweep-count", width="160px")
    sweep_order = styled(w.Dropdown(options=SWEEP_ORDERS), "nk-sweep-order", width="110px")
    sweep = action_button("Sweep", "nk-sweep", lambda: state.start("sweep"), "info",
                          "send prompts of growing or random lengths, one by one", report)
    reset = action_button("Reset graphs", "nk-reset", state.reset, "warning",
                          "torch.compiler.reset(): forget every compiled graph in this kernel, "
                          "start a new log", report)
    _link(state, prompt=prompt, max_new_tokens=max_new_tokens, padding=padding,
          boundaries=boundaries, backend=backend, sweep_count=sweep_count, sweep_order=sweep_order)

    def show_backends(_: Any = None) -> None:
        """The backend choices follow the selected device (the state keeps its backend)."""
        with backend.hold_trait_notifications():
            backend.options = options(state.backend_options)
        if state.backend in state.backend_options:
            backend.value = state.backend

    def sync(_: Any = None) -> None:
        why = _why_off(state)
        for control in (reset, prompt, max_new_tokens, padding, boundaries, backend, sweep_count,
                        sweep_order):
            control.disabled = bool(why)
        needs_model = why or (None if state.loaded else "press Load first")
        for button in (generate, sweep):
            button.disabled = bool(needs_model)
            button.tooltip = needs_model or GENERATE_TIP
        plan.disabled = bool(why or not state.prompt_lengths)

    state.observe(show_backends, "backend_options")
    follow(state, ["busy", "loaded", "prompt_lengths", "mode"], sync)
    box = section("Generation", prompt, row(max_new_tokens, padding, boundaries, plan),
                  row(backend, generate, sweep_count, sweep_order, sweep, reset),
                  css_class="nk-generation-panel")
    hide_in_replay(state, box)
    return (box, prompt, max_new_tokens, padding, boundaries, plan, backend, generate,
            sweep_count, sweep_order, sweep, reset)


def runs_panel(state: DashboardState, redraw: Callable[[], None]) -> tuple[Any, ...]:
    """Open logs, pick the run shown, keep the session's log, follow a run folder, compare two
    runs; ``redraw`` draws the run picked. Returns (box, upload, run, keep_button,
    compare_panel, follow_path, follow_button, follow_stop_button)."""
    upload = styled(w.FileUpload(accept=UPLOAD_ACCEPT, multiple=True, description="Open logs"),
                    "nk-upload")
    run = styled(w.Dropdown(description="Show", style=LABEL), "nk-run", width="360px")
    keep = action_button("Keep run", "nk-keep-run", state.keep_run, "",
                         "keep a copy of this session's log, to compare with a later run",
                         state.show_error)
    compare = ComparePanel(state.runs, state.fail)

    def on_upload(change: Any) -> None:
        files = change["new"]
        if not files:
            return
        try:
            state.open_uploads([(f["name"], bytes(f["content"])) for f in files])
            redraw()
        except Exception as exc:  # shown in the status area, never lost
            state.fail(exc)

    def on_pick(change: Any) -> None:
        try:
            if change["new"] != state.shown_run:
                state.show_run(change["new"])
                redraw()
        except Exception as exc:  # shown in the status area, never lost
            state.fail(exc)

    def show_runs(_: Any = None) -> None:
        own = state.runs.own_name
        compare.set_runs(own, list(state.run_names), live=state.mode == "live")
        choices = [(own, ""), *((n, n) for n in state.run_names)]  # run names are clean
        if list(run.options) != choices:
            run.options = choices
        if run.value != state.shown_run:
            run.value = state.shown_run

    def sync(_: Any = None) -> None:
        keep.disabled = upload.disabled = state.busy

    upload.observe(on_upload, "value")
    run.observe(on_pick, "value")
    follow(state, ["run_names", "shown_run"], show_runs)
    follow(state, "busy", sync)
    hide_in_replay(state, keep)
    follows, follow_path, follow_button, follow_stop = follow_row(state, redraw)
    box = section("Runs", row(upload, run, keep), follows, compare, css_class="nk-runs")
    return box, upload, run, keep, compare, follow_path, follow_button, follow_stop


def follow_row(state: DashboardState, redraw: Callable[[], None]) -> tuple[
        w.HBox, w.Text, w.Button, w.Button]:
    """A run folder to follow while its job writes it, Follow, and Stop following; the status
    line says what the follower finds. Returns (box, follow_path, follow_button, stop_button)."""
    path = styled(w.Text(description="Run folder", style=LABEL,
                         placeholder="logs a running job writes (neuronkit record --log-dir)"),
                  "nk-follow-path", width="420px")

    def start() -> None:
        state.follow()
        redraw()

    follow_button = action_button("Follow a run folder", "nk-follow", start, "info", FOLLOW_TIP,
                                  state.fail)
    stop = action_button("Stop following", "nk-follow-stop", state.stop_following, "danger",
                         "stop reading the followed logs (what was read stays)", state.fail)
    link((state.poller, "follow_path"), (path, "value"))

    def sync(_: Any = None) -> None:
        path.disabled = follow_button.disabled = state.follow_active
        stop.disabled = not state.follow_active

    follow(state, "follow_active", sync)
    return row(path, follow_button, stop), path, follow_button, stop


def exports_row(state: DashboardState) -> tuple[w.HBox, w.Text, w.Button, w.Button]:
    """Where to export, Save log (JSONL), Save chart (PNG).
    Returns (box, export_path, save_log_button, save_png_button)."""
    path = styled(w.Text(description="Export to", style=LABEL), "nk-export-path", width="420px")
    save_log = action_button("Save log (JSONL)", "nk-save-log", state.export_log, "",
                             "write the session's compile log", state.show_error)
    save_png = action_button("Save chart (PNG)", "nk-save-png", state.export_png, "",
                             "write the chart as a PNG", state.show_error)
    _link(state, export_path=path)

    def sync(_: Any = None) -> None:
        save_log.disabled = save_png.disabled = state.busy

    follow(state, "busy", sync)
    return row(path, save_log, save_png), path, save_log, save_png
