"""RecompileDashboard: load a model, generate, and watch every compile appear, in a notebook.

    from neuronkit.widget import RecompileDashboard
    dash = RecompileDashboard()          # the embedded tiny model; press Load, then Generate
    dash                                  # display it
    RecompileDashboard.from_log("compile-log.jsonl")   # replay a saved log, no model needed

Stock ipywidgets showing the HTML views (``views/html.py``) and a matplotlib PNG. All state lives
in ``dash.state`` (a :class:`~neuronkit.apps.dashboard.state.DashboardState`); this module only
draws it and turns clicks into its actions. Every control carries an ``nk-…`` CSS class for tests
and custom styling.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Any, Callable

import ipywidgets as w
from traitlets import link

from neuronkit.log.compile_log import CompileLog
from neuronkit.views.charts import dashboard_chart, png_bytes
from neuronkit.apps.dashboard.state import DTYPES, PADDINGS, SWEEP_ORDERS, DashboardState
from neuronkit.views.html import (STYLE, advice_html, chart_key_html, graph_counts_html, replay_note,
                                  status_html)
from neuronkit.views.safe import html_text, strip_control
from neuronkit.apps.dashboard.panels import UPLOAD_ACCEPT, ComparePanel, TablePanel, compiling_html

__all__ = ["RecompileDashboard"]

CHART_EVERY_S = 0.5       # redraw the chart at most this often while events stream in
PADDING_LABELS = {"none": "none (each prompt its own length)", "max": "pad to the largest bucket",
                  "buckets": "buckets"}
LOAD_TIP = "load_model() on the chosen device, then check_placement()"
OPTION_WIDTH = 80         # a device/backend label longer than this is cut (a replayed header's)

# -------------------------------------------------------------------------- the widget

def _styled(widget: w.Widget, css_class: str, **layout: Any) -> Any:
    widget.add_class(css_class)
    for key, value in layout.items():
        setattr(widget.layout, key, value)
    return widget


def _options(values: Any) -> list[Any]:
    """Dropdown options for device/backend names: the values as the state holds them, shown
    with clean labels. A replayed log's header may hold anything: where a name is not one clean
    line (control or bidi characters, newlines, very long), it gets a (label, value) pair whose
    label is cleaned and cut short; plain names stay plain options."""
    values = list(values)
    labels = []
    for value in values:
        label = " ".join(strip_control(value, keep_newlines=False).split()) or "?"
        if len(label) > OPTION_WIDTH:
            label = label[:OPTION_WIDTH - 1] + "…"
        labels.append(label)
    if labels == [str(v) for v in values]:
        return values
    return list(zip(labels, values, strict=True))


def _panel(title: str, *rows: w.Widget, css_class: str) -> w.VBox:
    box = w.VBox([w.HTML(f'<div class="nk-section">{html_text(title)}</div>'), *rows],
                 layout=w.Layout(border="1px solid #ddd", padding="4px 8px", margin="4px 0"))
    return _styled(box, css_class)


class RecompileDashboard(w.VBox):
    """Load a model, generate, and see each compile: when, why, how long, and what to do.

    ``RecompileDashboard(model_path=None, device=None, dtype=None, backend=None)`` starts a live
    session (``model_path`` None: the embedded tiny model); ``from_log(path)`` replays a saved log.
    The methods ``load()``, ``generate()``, ``sweep()``, ``plan()``, ``export_log()``,
    ``export_png()`` do what the buttons do, and raise on error (the buttons show it instead).
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 device: str | None = None, dtype: str | None = None,
                 backend: str | None = None, state: DashboardState | None = None,
                 **inputs: Any) -> None:
        self.state = state or DashboardState(model_path, device=device, dtype=dtype,
                                             backend=backend, **inputs)
        s = self.state
        self._chart_at = 0.0
        self._chart_stale = False
        self._drawing = False
        label = {"description_width": "90px"}
        # model panel
        self.model_path = _styled(w.Text(description="Model", style=label,
                                         placeholder="empty: the embedded tiny model"),
                                  "nk-model-path", width="420px")
        self.device = _styled(w.Dropdown(options=_options(s.device_options), description="Device",
                                         style=label), "nk-device", width="220px")
        self.dtype = _styled(w.Dropdown(options=DTYPES, description="dtype", style=label),
                             "nk-dtype", width="220px")
        self.load_button = self._button("Load", "nk-load", lambda: s.start("load"), "primary",
                                        LOAD_TIP)
        self.device_note = _styled(w.HTML(), "nk-device-note")
        self.placement = _styled(w.HTML(), "nk-placement")
        # generation panel
        self.prompt = _styled(w.Textarea(description="Prompt", style=label, rows=2),
                              "nk-prompt", width="640px")
        self.max_new_tokens = _styled(w.BoundedIntText(min=1, max=1024, description="New tokens",
                                                       style=label), "nk-max-new-tokens",
                                      width="180px")
        self.padding = _styled(w.Dropdown(options=[(PADDING_LABELS[p], p) for p in PADDINGS],
                                          description="Padding", style=label), "nk-padding",
                               width="360px")
        self.boundaries = _styled(w.Text(description="Buckets", style=label,
                                         placeholder="e.g. 32,64,128"), "nk-buckets",
                                  width="260px")
        self.plan_button = self._button("Plan from prompts", "nk-plan", self.plan, "",
                                        "plan_buckets() over the prompt lengths sent so far")
        self.backend = _styled(w.Dropdown(options=_options(s.backend_options), description="Backend",
                                          style=label), "nk-backend", width="220px")
        self.generate_button = self._button("Generate", "nk-generate",
                                            lambda: s.start("generate"), "success",
                                            "generate() under the compile recorder")
        self.sweep_count = _styled(w.BoundedIntText(min=1, max=64, description="Sweep",
                                                    style=label), "nk-sweep-count", width="160px")
        self.sweep_order = _styled(w.Dropdown(options=SWEEP_ORDERS), "nk-sweep-order",
                                   width="110px")
        self.sweep_button = self._button("Sweep", "nk-sweep", lambda: s.start("sweep"), "info",
                                         "send prompts of growing or random lengths, one by one")
        self.stop_button = self._button("Stop", "nk-stop", s.stop, "danger",
                                        "end the run after the current batch (what was recorded "
                                        "stays)")
        self.reset_button = self._button("Reset graphs", "nk-reset", self.reset, "warning",
                                         "torch.compiler.reset(): forget every compiled graph in "
                                         "this kernel, start a new log")
        # status and live view
        self.status = _styled(w.HTML(), "nk-status")
        self.progress = _styled(w.IntProgress(min=0, max=1, bar_style="info"), "nk-progress",
                                width="300px", visibility="hidden")
        self.eta = _styled(w.HTML(), "nk-eta")
        self.compiling = _styled(w.HTML(), "nk-compiling")
        # runs: upload logs, keep the session's, pick what the views show
        self.upload = _styled(w.FileUpload(accept=UPLOAD_ACCEPT, multiple=True,
                                           description="Open logs"), "nk-upload")
        self.keep_button = self._button("Keep run", "nk-keep-run", s.keep_run, "",
                                        "keep a copy of this session's log, to compare with a "
                                        "later run")
        self.run = _styled(w.Dropdown(description="Show", style=label), "nk-run",
                           width="360px")
        self.chart = _styled(w.Image(format="png"), "nk-chart", width="100%",
                             max_width="660px", height="auto", flex="1 1 420px")
        self.chart_key = _styled(w.HTML(), "nk-chart-key", flex="0 1 240px",
                                 margin="0 0 0 8px")
        self.graph_count = _styled(w.HTML(), "nk-graph-count")
        self.advice = _styled(w.HTML(), "nk-advice")
        self.table_panel = TablePanel(s.fail)
        self.events_table = self.table_panel.html  # the table's HTML (as before: tests read it)
        self.output_text = _styled(w.HTML(), "nk-output-text")
        self.export_path = _styled(w.Text(description="Export to", style=label), "nk-export-path",
                                   width="420px")
        self.save_log_button = self._button("Save log (JSONL)", "nk-save-log", self.export_log,
                                            "", "write the session's compile log")
        self.save_png_button = self._button("Save chart (PNG)", "nk-save-png", self.export_png,
                                            "", "write the chart as a PNG")

        for control, trait in ((self.model_path, "model_path"), (self.device, "device"),
                               (self.dtype, "dtype"), (self.prompt, "prompt"),
                               (self.max_new_tokens, "max_new_tokens"), (self.padding, "padding"),
                               (self.boundaries, "boundaries"), (self.backend, "backend"),
                               (self.sweep_count, "sweep_count"), (self.sweep_order, "sweep_order"),
                               (self.export_path, "export_path")):
            link((s, trait), (control, "value"))

        mode = "live session" if s.mode == "live" else replay_note(s.source, s.log.header)
        header = w.HTML(f'{STYLE}<h3 class="nk-title">neuronkit · recompile dashboard</h3>'
                        f'<div class="nk-muted">{mode}</div>')
        row = lambda *c: w.HBox(list(c), layout=w.Layout(flex_flow="row wrap",  # noqa: E731
                                                          align_items="center"))
        model_panel = _panel("Model", row(self.model_path, self.device, self.dtype,
                                          self.load_button),
                             self.device_note, self.placement, css_class="nk-model-panel")
        gen_panel = _panel("Generation", self.prompt,
                           row(self.max_new_tokens, self.padding, self.boundaries,
                               self.plan_button),
                           row(self.backend, self.generate_button, self.sweep_count,
                               self.sweep_order, self.sweep_button, self.reset_button),
                           css_class="nk-generation-panel")
        advice = w.VBox([w.HTML('<div class="nk-section">Advice</div>'), self.advice],
                        layout=w.Layout(flex="1 1 420px", margin="0 0 0 16px"))
        counts = w.VBox([self.graph_count], layout=w.Layout(flex="0 1 380px"))
        live = _panel("Compiles", w.HBox([self.chart, self.chart_key],
                                         layout=w.Layout(flex_flow="row wrap",
                                                         align_items="flex-start")),
                      w.HBox([counts, advice], layout=w.Layout(flex_flow="row wrap")),
                      self.table_panel, css_class="nk-live-panel")
        text_panel = _panel("Generated text", self.output_text, css_class="nk-text-panel")
        export = row(self.export_path, self.save_log_button, self.save_png_button)
        self.compare_panel = ComparePanel(s)
        runs = _panel("Runs", row(self.upload, self.run, self.keep_button), self.compare_panel,
                      css_class="nk-runs")
        status = row(self.status, self.progress, self.eta, self.stop_button)
        super().__init__([header, model_panel, gen_panel, runs, status, self.compiling, live,
                          text_panel, export])
        self.add_class("nk-dashboard")
        if s.mode == "replay":  # only what applies to a saved log: no disabled live controls
            for part in (model_panel, gen_panel, text_panel, self.keep_button, self.stop_button,
                         self.progress, self.eta):
                part.layout.display = "none"
        self.upload.observe(self._on_upload, "value")
        self.run.observe(self._on_run_picked, "value")

        s.observe(self._show_status, ["status", "status_kind", "error_detail"])
        s.observe(self._sync_controls, ["busy", "loaded", "prompt_lengths", "mode", "stopping"])
        s.observe(self._show_progress, ["progress", "progress_max", "busy"])
        s.observe(self._on_events, "event_count")
        s.observe(self._on_busy, "busy")
        s.observe(self._show_model, ["placement", "placement_ok", "device_note"])
        s.observe(self._show_text, ["generated_text", "run_summary"])
        s.observe(self._show_advice, "advice")
        s.observe(self._show_backends, "backend_options")
        s.observe(self._show_compiling, ["compiling", "tick"])
        s.observe(self._show_eta, ["eta", "busy"])
        s.observe(self._show_runs, ["run_names", "shown_run"])
        self._show_runs()
        self._show_eta()
        self._show_status()
        self._sync_controls()
        self._show_model()
        self._show_text()
        self._show_advice()
        try:
            self.redraw()
        except Exception as exc:  # a log the chart cannot draw still shows its table and advice
            self.state.fail(exc)

    def _show_compiling(self, change: Any = None) -> None:
        try:
            self.compiling.value = compiling_html(self.state.compiling)
        except Exception as exc:
            self.state.fail(exc)

    def _show_eta(self, change: Any = None) -> None:
        s = self.state
        self.eta.value = f'<span class="nk-muted">{html_text(s.eta)}</span>' if s.busy else ""

    def _show_runs(self, change: Any = None) -> None:
        s = self.state
        own = "this session" if s.mode == "live" else "the replayed log"
        self.compare_panel.set_runs(own, list(s.run_names), live=s.mode == "live")
        options = [(own, ""), *((n, n) for n in s.run_names)]  # run names are clean
        if list(self.run.options) != options:
            self.run.options = options
        if self.run.value != s.shown_run:
            self.run.value = s.shown_run

    def _on_run_picked(self, change: Any) -> None:
        try:
            if change["new"] != self.state.shown_run:
                self.state.show_run(change["new"])
                self.redraw()
        except Exception as exc:  # shown in the status area, never lost
            self.state.fail(exc)

    def _on_upload(self, change: Any) -> None:
        files = change["new"]
        if not files:
            return
        try:
            self.state.open_uploads([(f["name"], bytes(f["content"])) for f in files])
            self.redraw()
        except Exception as exc:  # shown in the status area, never lost
            self.state.fail(exc)

    def _show_backends(self, change: Any = None) -> None:
        """The backend choices follow the selected device (the state keeps its backend)."""
        with self.backend.hold_trait_notifications():
            self.backend.options = _options(self.state.backend_options)
        if self.state.backend in self.state.backend_options:
            self.backend.value = self.state.backend

    @classmethod
    def from_log(cls, path: str | os.PathLike[str]) -> "RecompileDashboard":
        """Replay a saved compile log (JSONL): chart, table, advice; no model, no torch needed."""
        return cls(state=DashboardState.replay(path))

    def __repr__(self) -> str:
        s = self.state
        name = strip_control(Path(s.source).name, keep_newlines=False)  # no escapes on a tty
        what = "live" if s.mode == "live" else f"replay of {name}"
        return f"<RecompileDashboard: {what}>"

    # -- actions (what the buttons call) -----------------------------------------------
    def load(self) -> None:
        self.state.load()

    def generate(self, prompt: str | None = None) -> Any:
        return self.state.generate(prompt)

    def sweep(self) -> list[Any]:
        return self.state.sweep()

    def plan(self) -> str:
        return self.state.plan()

    def reset(self) -> None:
        self.state.reset()

    def export_log(self, path: str | os.PathLike[str] | None = None) -> Path:
        return self.state.export_log(path)

    def export_png(self, path: str | os.PathLike[str] | None = None) -> Path:
        return self.state.export_png(path)

    @property
    def log(self) -> CompileLog:
        return self.state.log

    def close(self) -> None:
        self.state.close()
        super().close()

    # -- drawing ----------------------------------------------------------------------
    def redraw(self, full: bool = True) -> None:
        """Draw the event table; if ``full``, also the graph counter, the advice (``diagnose()``)
        and the chart (while a run goes on: at most every CHART_EVERY_S, and when it ends).
        Everything is read from ``state.log``."""
        if self._drawing:  # refresh() below changes event_count, whose observer calls us
            return
        self._drawing = True
        try:
            self._draw(full)
        finally:
            self._drawing = False

    def _draw(self, full: bool) -> None:
        log = self.state.log
        if full:
            self.state.refresh()          # the advice observer redraws the advice
            self.graph_count.value = graph_counts_html(log)  # with the chart: a pass over all
            self.table_panel.show(log, self.state.advice)
            figure = dashboard_chart(log, legend=False)  # the key beside it, as HTML
            self.chart.value = png_bytes(figure)
            self.chart_key.value = chart_key_html(getattr(figure, "key", []))
            self._chart_at, self._chart_stale = time.monotonic(), False
        else:  # a live event: appended to the table's index, the page drawn again
            self.table_panel.show(log, self.state.advice)

    def _on_events(self, change: Any = None) -> None:
        try:
            due = not self.state.busy or time.monotonic() - self._chart_at >= CHART_EVERY_S
            self.redraw(full=due)
            self._chart_stale = self._chart_stale or not due
        except Exception as exc:
            self.state.fail(exc)

    def _on_busy(self, change: Any) -> None:
        if change["new"]:
            return
        try:  # a run ended: NEFF times resolved at its safe points reach the rows shown
            self.table_panel.refresh_all()
            if self._chart_stale:
                self._on_events()
        except Exception as exc:
            self.state.fail(exc)

    def _button(self, text: str, css_class: str, action: Callable[[], Any], style: str,
                tooltip: str) -> w.Button:
        button = _styled(w.Button(description=text, button_style=style, tooltip=tooltip),
                         css_class)

        def on_click(_: w.Button) -> None:
            try:
                action()
            except Exception as exc:  # shown in the status area, never lost
                if not self.state.error:
                    self.state.fail(exc)

        button.on_click(on_click)
        return button

    def _show_status(self, change: Any = None) -> None:
        s = self.state
        self.status.value = status_html(s.status_kind, s.status, s.error_detail)

    def _show_progress(self, change: Any = None) -> None:
        s = self.state
        self.progress.max = max(s.progress_max, 1)
        self.progress.value = min(s.progress, self.progress.max)
        self.progress.layout.visibility = "visible" if s.busy and s.progress_max else "hidden"

    def _show_model(self, change: Any = None) -> None:
        s = self.state
        self.device_note.value = f'<div class="nk-muted">{html_text(s.device_note)}</div>'
        if s.placement:
            css = "nk-good" if s.placement_ok else "nk-bad"
            self.placement.value = f'<pre class="{css}">{html_text(s.placement)}</pre>'
        else:
            self.placement.value = ""

    def _show_advice(self, change: Any = None) -> None:
        self.advice.value = advice_html(self.state.advice)

    def _show_text(self, change: Any = None) -> None:
        s = self.state
        self.output_text.value = (f'<pre class="nk-text">{html_text(s.generated_text)}</pre>'
                                  f'<div class="nk-muted">{html_text(s.run_summary)}</div>'
                                  if s.generated_text else
                                  '<div class="nk-muted">Nothing generated yet.</div>')

    def _sync_controls(self, change: Any = None) -> None:
        s = self.state
        replay, busy = s.mode == "replay", s.busy
        why = None
        if replay:
            why = "replay of a saved log: no model is loaded"
        elif busy:
            why = "busy: wait for the current action to finish"
        for control in (self.model_path, self.device, self.dtype, self.load_button,
                        self.reset_button, self.prompt, self.max_new_tokens, self.padding,
                        self.boundaries, self.backend, self.sweep_count, self.sweep_order):
            control.disabled = bool(why)
        needs_model = why or (None if s.loaded else "press Load first")
        for button in (self.generate_button, self.sweep_button):
            button.disabled = bool(needs_model)
            button.tooltip = needs_model or "generate() under the compile recorder"
        self.plan_button.disabled = bool(why or not s.prompt_lengths)
        self.load_button.tooltip = why or LOAD_TIP
        for button in (self.save_log_button, self.save_png_button, self.keep_button):
            button.disabled = busy
        self.upload.disabled = busy
        self.stop_button.disabled = not busy or s.stopping
