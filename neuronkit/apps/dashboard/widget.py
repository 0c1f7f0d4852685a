"""RecompileDashboard: load a model, generate, and watch every compile appear, in a notebook.

    from neuronkit.widget import RecompileDashboard
    dash = RecompileDashboard()          # the embedded tiny model; press Load, then Generate
    dash                                  # display it
    RecompileDashboard.from_log("compile-log.jsonl")   # replay a saved log, no model needed
    RecompileDashboard.follow("logs")    # a job's logs while it writes them (neuronkit record)

Stock ipywidgets showing the HTML views (``views/html.py``) and a matplotlib PNG. All state lives
in ``dash.state`` (a :class:`~neuronkit.apps.dashboard.state.DashboardState`); the panels
(``control_panels.py``, ``view_panels.py``) draw it and turn clicks into its actions; this module
puts them together and redraws the chart, counts and table as events arrive. Every control
carries an ``nk-…`` CSS class for tests and custom styling.
"""
from __future__ import annotations

import os
import threading
import time
from pathlib import Path
from typing import Any

import ipywidgets as w

from neuronkit.apps.dashboard.control_panels import exports_row, generation_panel, model_panel, runs_panel
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.apps.dashboard.table_panel import TablePanel
from neuronkit.apps.dashboard.view_panels import (
    advice_view,
    chart_view,
    compiles_panel,
    compiling_now,
    graph_counts_view,
    header,
    status_row,
    text_panel,
)
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import strip_control
from neuronkit.views.charts import dashboard_chart, png_bytes
from neuronkit.views.html import chart_key_html, graph_counts_html

__all__ = ["RecompileDashboard", "CHART_EVERY_S"]

CHART_EVERY_S = 0.5       # redraw the chart at most this often while events stream in


class RecompileDashboard(w.VBox):
    """Load a model, generate, and see each compile: when, why, how long, and what to do.

    ``RecompileDashboard(model_path=None, device=None, dtype=None, backend=None)`` starts a live
    session (``model_path`` None: the embedded tiny model); ``from_log(path)`` replays a saved log;
    ``follow(path)`` shows a running job's logs as they are written.
    The methods ``load()``, ``generate()``, ``sweep()``, ``plan()``, ``export_log()``,
    ``export_png()`` do what the buttons do, and raise on error (the buttons show it instead).
    """

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 device: str | None = None, dtype: str | None = None,
                 backend: str | None = None, state: DashboardState | None = None,
                 **inputs: Any) -> None:
        self.state = s = state or DashboardState(model_path, device=device, dtype=dtype,
                                                 backend=backend, **inputs)
        self._chart_at, self._chart_stale, self._drawing = 0.0, False, False
        self._draw_lock = threading.RLock()  # one redraw at a time: a click's, a poll's, a run's
        (model, self.model_path, self.device, self.dtype, self.load_button, self.device_note,
         self.placement) = model_panel(s)
        (generation, self.prompt, self.max_new_tokens, self.padding, self.boundaries,
         self.plan_button, self.backend, self.generate_button, self.sweep_count, self.sweep_order,
         self.sweep_button, self.reset_button) = generation_panel(s)
        (runs, self.upload, self.run, self.keep_button, self.compare_panel, self.follow_path,
         self.follow_button, self.follow_stop_button) = runs_panel(s, self.redraw)
        status, self.status, self.progress, self.eta, self.stop_button = status_row(s)
        self.compiling = compiling_now(s)
        chart, self.chart, self.chart_key = chart_view()
        counts, self.graph_count = graph_counts_view()
        advice, self.advice = advice_view(s)
        self.table_panel = TablePanel(s.fail)
        self.events_table = self.table_panel.html  # the table's HTML (as before: tests read it)
        text, self.output_text = text_panel(s)
        exports, self.export_path, self.save_log_button, self.save_png_button = exports_row(s)
        super().__init__([header(s), model, generation, runs, status, self.compiling,
                          compiles_panel(chart, counts, advice, self.table_panel), text, exports])
        self.add_class("nk-dashboard")
        s.observe(self._on_events, "event_count")
        s.observe(self._on_busy, "busy")
        s.observe(self._on_follow_end, "follow_active")
        try:
            self.redraw()
        except Exception as exc:  # a log the chart cannot draw still shows its table and advice
            s.fail(exc)

    @classmethod
    def from_log(cls, path: str | os.PathLike[str]) -> "RecompileDashboard":
        """Replay a saved compile log (JSONL): chart, table, advice; no model, no torch needed."""
        return cls(state=DashboardState.replay(path))

    @classmethod
    def follow(cls, path: str | os.PathLike[str]) -> "RecompileDashboard":
        """Follow a job's logs while it writes them: a folder of per-rank logs (``neuronkit record
        --log-dir``) or one log, read about once a second until every log is closed or Stop."""
        return cls(state=DashboardState.following(path))

    def __repr__(self) -> str:
        s = self.state
        name = strip_control(Path(s.source).name, keep_newlines=False)  # no escapes on a tty
        what = {"live": "live", "replay": f"replay of {name}"}.get(s.mode, f"following {name}")
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

    def export_log(self, path: str | os.PathLike[str] | None = None, *,
                   overwrite: bool = False) -> Path:
        return self.state.export_log(path, overwrite=overwrite)

    def export_png(self, path: str | os.PathLike[str] | None = None, *,
                   overwrite: bool = False) -> Path:
        return self.state.export_png(path, overwrite=overwrite)

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
        with self._draw_lock:  # another thread's redraw first (a poll's, a compile's)
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

    def _on_follow_end(self, change: Any) -> None:
        if change["new"]:
            return
        try:  # the follow ended: times aligned across hosts after they were shown reach the rows
            self.table_panel.refresh_all()
            self.redraw()
        except Exception as exc:
            self.state.fail(exc)
