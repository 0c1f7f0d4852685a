"""RecompileDashboard: load a model, generate, and watch every compile appear, in a notebook.

    from neuronkit.widget import RecompileDashboard
    dash = RecompileDashboard()          # the embedded tiny model; press Load, then Generate
    dash                                  # display it
    RecompileDashboard.from_log("compile-log.jsonl")   # replay a saved log, no model needed

Stock ipywidgets plus a matplotlib PNG. All state lives in ``dash.state`` (a
:class:`~neuronkit.dashboard_state.DashboardState`); this module only draws it and turns clicks
into its actions. Every control carries an ``nk-…`` CSS class for tests and custom styling.
"""
from __future__ import annotations

import html
import os
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import ipywidgets as w
from traitlets import link

from ._torch_text import short_reason
from .dashboard_state import DTYPES, PADDINGS, SWEEP_ORDERS, DashboardState, chart_png
from .events import CompileLog, function_labels

__all__ = ["RecompileDashboard", "events_table_html", "graph_counts_html", "advice_html",
           "TABLE_ROWS"]

TABLE_ROWS = 200          # newest events shown in the table; the log keeps them all
CHART_EVERY_S = 0.5       # redraw the chart at most this often while events stream in
PADDING_LABELS = {"none": "none (each prompt its own length)", "max": "pad to the largest bucket",
                  "buckets": "buckets"}
KIND_LABELS = {"first": "first", "recompile": "recompile", "limit_hit": "LIMIT HIT: runs eager",
               "failed": "failed", "eager_fallback": "RAN EAGER"}
LOAD_TIP = "load_model() on the chosen device, then check_placement()"
STATUS_LABELS = {"info": "Ready", "busy": "Working", "ok": "Done", "error": "Error"}

STYLE = """<style>
.nk-dashboard { font-size: 13px; }
.nk-dashboard h3.nk-title { margin: 2px 0 4px 0; }
.nk-dashboard .nk-muted { color: #666; font-size: 12px; }
.nk-dashboard .nk-section { font-weight: 600; margin: 2px 0; }
.nk-dashboard .nk-scroll { max-height: 280px; overflow-y: auto; }
.nk-dashboard table.nk-table { border-collapse: collapse; font-size: 12px; width: 100%; }
.nk-dashboard table.nk-table th { text-align: left; border-bottom: 2px solid #ccc;
  padding: 2px 6px; }
.nk-dashboard table.nk-table td { border-bottom: 1px solid #eee; padding: 2px 6px;
  vertical-align: top; word-break: break-word; }
.nk-dashboard td.nk-nowrap { white-space: nowrap; }
.nk-dashboard tr.nk-limit-hit td { background: #fde0dc; color: #8a1c0c; font-weight: 600; }
.nk-dashboard tr.nk-failed td { background: #fff3cd; }
.nk-dashboard tr.nk-recompile td.nk-kind { color: #b35c00; font-weight: 600; }
.nk-dashboard tr.nk-eager-fallback td.nk-kind { color: #c00000; }
.nk-dashboard .nk-badge { display: inline-block; min-width: 52px; text-align: center;
  border-radius: 3px; padding: 0 6px; margin-right: 6px; color: white; font-size: 11px;
  font-weight: 600; line-height: 18px; background: #607d8b; }
.nk-dashboard .nk-status-error { color: #b00020; font-weight: 600; }
.nk-dashboard .nk-status-error .nk-badge { background: #b00020; }
.nk-dashboard .nk-status-ok .nk-badge { background: #2e7d32; }
.nk-dashboard .nk-status-busy .nk-badge { background: #b26a00; }
.nk-dashboard .nk-advice .widget-html-content, .nk-dashboard .nk-events-table .widget-html-content,
.nk-dashboard .nk-graph-count .widget-html-content,
.nk-dashboard .nk-output-text .widget-html-content { line-height: 1.35; }
.nk-dashboard img.nk-chart { height: auto; object-fit: contain; }
.nk-dashboard .nk-bad { color: #b00020; font-weight: 600; }
.nk-dashboard .nk-good { color: #1b6e20; }
.nk-dashboard .nk-advice-item { margin: 0 0 6px 0; }
.nk-dashboard pre.nk-text { white-space: pre-wrap; background: #f6f6f6; padding: 4px 6px;
  margin: 2px 0; max-height: 120px; overflow-y: auto; }
</style>"""


# -------------------------------------------------------------------------- pure HTML views

def _esc(value: Any) -> str:
    return html.escape(str(value), quote=True)


def events_table_html(log: CompileLog, limit: int = TABLE_ROWS) -> str:
    """The event table, newest first: time, function, changed dimension, reason, seconds, kind."""
    events = log.events
    if not events:
        return ('<div class="nk-muted">No compile events yet. Press Generate: the first call '
                'compiles the decode graph, and every new shape compiles another.</div>')
    t0 = min(e.started_at for e in events)
    labels = function_labels(events)  # the same names as the chart, counts and advice
    shown = events[-limit:][::-1]
    head = "".join(f"<th>{h}</th>" for h in
                   ("#", "time", "function", "changed", "reason", "seconds", "kind", "context"))
    rows = []
    for e in shown:
        reason = e.reasons[0] if e.reasons else ""
        more = f" (+{len(e.reasons) - 1} more)" if len(e.reasons) > 1 else ""
        short = short_reason(reason, width=90)
        cells = (f'<td class="nk-nowrap">{e.seq}</td>'
                 f'<td class="nk-nowrap">+{e.started_at - t0:.1f} s</td>'
                 f'<td class="nk-nowrap">{_esc(labels[e.function, e.location])}</td>'
                 f"<td>{_esc(e.changed or '—')}</td>"
                 f'<td title="{_esc(chr(10).join(e.reasons))}">{_esc(short)}{more}</td>'
                 f'<td class="nk-nowrap">{e.duration_s:.2f}</td>'
                 f'<td class="nk-kind">{_esc(KIND_LABELS.get(e.kind, e.kind))}</td>'
                 f"<td>{_esc(e.context)}</td>")
        rows.append(f'<tr class="nk-{e.kind.replace("_", "-")}">{cells}</tr>')
    note = (f"{len(events)} compile events, newest first"
            + (f"; showing the last {limit}" if len(events) > limit else ""))
    return (f'<div class="nk-muted">{note}</div><div class="nk-scroll">'
            f'<table class="nk-table nk-events"><thead><tr>{head}</tr></thead>'
            f'<tbody>{"".join(rows)}</tbody></table></div>')


def graph_counts_html(log: CompileLog) -> str:
    """Graphs per function (from ``log.summary()``), limit hits and compile seconds."""
    rows = log.summary()
    if not rows:
        return '<div class="nk-muted">0 graphs compiled</div>'
    total = sum(r["graphs"] for r in rows)
    body = "".join(
        f'<tr><td>{_esc(r["function"])}</td><td class="nk-count">{r["graphs"]}</td>'
        f'<td class="{"nk-bad" if r["limit_hits"] else ""}">{r["limit_hits"]}</td>'
        f'<td>{r["compile_s"]:.1f}</td></tr>' for r in rows)
    return (f'<div class="nk-section"><span class="nk-total-graphs">{total}</span> graph(s), '
            f'{log.total_compile_s:.1f} s compiling</div>'
            '<table class="nk-table"><thead><tr><th>function</th><th>graphs</th>'
            f'<th>limit hits</th><th>compile s</th></tr></thead><tbody>{body}</tbody></table>')


def advice_html(advices: Iterable[Any]) -> str:
    """``diagnose()`` findings: title, detail and the fix for each."""
    items = []
    for a in advices:
        severity = _esc(getattr(a, "severity", "info"))
        items.append(f'<div class="nk-advice-item nk-sev-{severity}"><b>{_esc(a.title)}</b>'
                     f'<div>{_esc(a.detail)}</div>'
                     + (f'<div><i>Fix:</i> {_esc(a.fix)}</div>' if a.fix else "") + "</div>")
    return "".join(items) or '<div class="nk-muted">No findings yet.</div>'


def replay_note(source: str, header: dict[str, Any]) -> str:
    """Where a replayed log came from: its file, versions, device and description."""
    made = ", ".join(f"{k} {header[k]}" for k in ("neuronkit", "torch", "torch_neuronx")
                     if header.get(k))
    note = (f"replay of <b>{_esc(Path(source).name)}</b> (no model loaded)"
            + (f" · recorded with {_esc(made)}" if made else ""))
    if header.get("description"):
        note += f"<br>{_esc(header['description'])}"
    return note


def status_html(kind: str, text: str, detail: str = "") -> str:
    badge = f'<span class="nk-badge">{STATUS_LABELS.get(kind, kind)}</span>'
    out = f'<div class="nk-status-{_esc(kind)}">{badge}{_esc(text)}</div>'
    if detail:
        out += f"<details><summary>traceback</summary><pre>{_esc(detail)}</pre></details>"
    return out


# -------------------------------------------------------------------------- the widget

def _styled(widget: w.Widget, css_class: str, **layout: Any) -> Any:
    widget.add_class(css_class)
    for key, value in layout.items():
        setattr(widget.layout, key, value)
    return widget


def _panel(title: str, *rows: w.Widget, css_class: str) -> w.VBox:
    box = w.VBox([w.HTML(f'<div class="nk-section">{_esc(title)}</div>'), *rows],
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
        label = {"description_width": "90px"}
        # model panel
        self.model_path = _styled(w.Text(description="Model", style=label,
                                         placeholder="empty: the embedded tiny model"),
                                  "nk-model-path", width="420px")
        self.device = _styled(w.Dropdown(options=s.device_options, description="Device",
                                         style=label), "nk-device", width="220px")
        self.dtype = _styled(w.Dropdown(options=DTYPES, description="dtype", style=label),
                             "nk-dtype", width="220px")
        self.load_button = self._button("Load", "nk-load", self.load, "primary", LOAD_TIP)
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
        self.backend = _styled(w.Dropdown(options=s.backend_options, description="Backend",
                                          style=label), "nk-backend", width="220px")
        self.generate_button = self._button("Generate", "nk-generate", self.generate, "success",
                                            "generate() under the compile recorder")
        self.sweep_count = _styled(w.BoundedIntText(min=1, max=64, description="Sweep",
                                                    style=label), "nk-sweep-count", width="160px")
        self.sweep_order = _styled(w.Dropdown(options=SWEEP_ORDERS), "nk-sweep-order",
                                   width="110px")
        self.sweep_button = self._button("Sweep", "nk-sweep", self.sweep, "info",
                                         "send prompts of growing or random lengths, one by one")
        self.reset_button = self._button("Reset graphs", "nk-reset", self.reset, "warning",
                                         "torch.compiler.reset(): forget every compiled graph in "
                                         "this kernel, start a new log")
        # status and live view
        self.status = _styled(w.HTML(), "nk-status")
        self.progress = _styled(w.IntProgress(min=0, max=1, bar_style="info"), "nk-progress",
                                width="300px", visibility="hidden")
        self.chart = _styled(w.Image(format="png"), "nk-chart", width="100%",
                             max_width="900px", height="auto")
        self.graph_count = _styled(w.HTML(), "nk-graph-count")
        self.advice = _styled(w.HTML(), "nk-advice")
        self.events_table = _styled(w.HTML(), "nk-events-table")
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
        live = _panel("Compiles", self.chart,
                      w.HBox([counts, advice], layout=w.Layout(flex_flow="row wrap")),
                      self.events_table, css_class="nk-live-panel")
        text_panel = _panel("Generated text", self.output_text, css_class="nk-text-panel")
        export = row(self.export_path, self.save_log_button, self.save_png_button)
        super().__init__([header, model_panel, gen_panel, row(self.status, self.progress), live,
                          text_panel, export])
        self.add_class("nk-dashboard")

        s.observe(self._show_status, ["status", "status_kind", "error_detail"])
        s.observe(self._sync_controls, ["busy", "loaded", "prompt_lengths", "mode"])
        s.observe(self._show_progress, ["progress", "progress_max", "busy"])
        s.observe(self._on_events, "event_count")
        s.observe(self._on_busy, "busy")
        s.observe(self._show_model, ["placement", "placement_ok", "device_note"])
        s.observe(self._show_text, ["generated_text", "run_summary"])
        s.observe(self._show_advice, "advice")
        s.observe(self._show_backends, "backend_options")
        self._show_status()
        self._sync_controls()
        self._show_model()
        self._show_text()
        self._show_advice()
        self.redraw()

    def _show_backends(self, change: Any = None) -> None:
        """The backend choices follow the selected device (the state keeps its backend)."""
        with self.backend.hold_trait_notifications():
            self.backend.options = list(self.state.backend_options)
        if self.state.backend in self.backend.options:
            self.backend.value = self.state.backend

    @classmethod
    def from_log(cls, path: str | os.PathLike[str]) -> "RecompileDashboard":
        """Replay a saved compile log (JSONL): chart, table, advice; no model, no torch needed."""
        return cls(state=DashboardState.replay(path))

    def __repr__(self) -> str:
        s = self.state
        what = "live" if s.mode == "live" else f"replay of {Path(s.source).name}"
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
        """Draw the event table and the graph counter; if ``full``, also refresh the advice
        (``diagnose()``) and redraw the chart. Everything is read from ``state.log``."""
        log = self.state.log
        self.events_table.value = events_table_html(log)
        self.graph_count.value = graph_counts_html(log)
        if full:
            self.state.refresh()          # the advice observer redraws the advice
            self.chart.value = chart_png(log)
            self._chart_at, self._chart_stale = time.monotonic(), False

    def _on_events(self, change: Any = None) -> None:
        try:
            due = not self.state.busy or time.monotonic() - self._chart_at >= CHART_EVERY_S
            self.redraw(full=due)
            self._chart_stale = self._chart_stale or not due
        except Exception as exc:
            self.state.fail(exc)

    def _on_busy(self, change: Any) -> None:
        if not change["new"] and self._chart_stale:
            self._on_events()

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
        self.device_note.value = f'<div class="nk-muted">{_esc(s.device_note)}</div>'
        if s.placement:
            css = "nk-good" if s.placement_ok else "nk-bad"
            self.placement.value = f'<pre class="{css}">{_esc(s.placement)}</pre>'
        else:
            self.placement.value = ""

    def _show_advice(self, change: Any = None) -> None:
        self.advice.value = advice_html(self.state.advice)

    def _show_text(self, change: Any = None) -> None:
        s = self.state
        self.output_text.value = (f'<pre class="nk-text">{_esc(s.generated_text)}</pre>'
                                  f'<div class="nk-muted">{_esc(s.run_summary)}</div>'
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
        for button in (self.save_log_button, self.save_png_button):
            button.disabled = busy
