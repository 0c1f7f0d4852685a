"""The dashboard's view panels, one function each: the header, the status row (with Stop), the
compiles in progress, the chart and its key, graph counts, advice, and the text generated. Each
builds its widgets, redraws them when the state's traits change, and returns its box with the
widgets the dashboard names. Every value shown is escaped."""
from __future__ import annotations

import time
from typing import Any, Iterable

import ipywidgets as w

from neuronkit.apps.dashboard.controls import action_button, follow, hide_in_replay, row, section, styled
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.safe import html_text, strip_control
from neuronkit.views.html import STYLE, advice_html, replay_note, status_html

__all__ = ["DASHBOARD_STYLE", "header", "status_row", "compiling_now", "compiling_html", "clock",
           "chart_view", "graph_counts_view", "advice_view", "compiles_panel", "text_panel", "PHASE_WORDS"]

PHASE_WORDS = {"dynamo": "compiling",
               "device": "waiting for the device compiler (neuronx-cc) to build"}


# the views' style, and: the event kind ("recompile", "eager_fallback") is one word, never broken
DASHBOARD_STYLE = STYLE.replace("</style>", ".nk-dashboard td.nk-kind { white-space: nowrap; }\n"
                                "</style>")


def header(state: DashboardState) -> w.HTML:
    """The title, and what the session is: live, the replay of which log, or which run it
    follows."""
    if state.mode == "live":
        mode = "live session"
    elif state.mode == "follow":
        mode = (f"following <b>{html_text(strip_control(state.source, keep_newlines=False))}</b> "
                "while its job writes it (no model loaded)")
    else:
        mode = replay_note(state.source, state.log.header)
    return w.HTML(f'{DASHBOARD_STYLE}<h3 class="nk-title">neuronkit · recompile dashboard'
                  f'</h3><div class="nk-muted">{mode}</div>')


def status_row(state: DashboardState) -> tuple[w.HBox, w.HTML, w.IntProgress, w.HTML, w.Button]:
    """What the last action said (its error folded below), progress, ETA and Stop.
    Returns (box, status, progress, eta, stop_button)."""
    status = styled(w.HTML(), "nk-status")
    progress = styled(w.IntProgress(min=0, max=1, bar_style="info"), "nk-progress",
                      width="300px", visibility="hidden")
    eta = styled(w.HTML(), "nk-eta")
    stop = action_button("Stop", "nk-stop", state.stop, "danger",
                         "end the run after the current batch (what was recorded stays)",
                         state.show_error)

    def show_status(_: Any = None) -> None:
        status.value = status_html(state.status_kind, state.status, state.error_detail)

    def show_progress(_: Any = None) -> None:
        progress.max = max(state.progress_max, 1)
        progress.value = min(state.progress, progress.max)
        progress.layout.visibility = "visible" if state.busy and state.progress_max else "hidden"

    def show_eta(_: Any = None) -> None:
        eta.value = f'<span class="nk-muted">{html_text(state.eta)}</span>' if state.busy else ""

    def sync(_: Any = None) -> None:
        stop.disabled = not state.busy or state.stopping

    follow(state, ["status", "status_kind", "error_detail"], show_status)
    follow(state, ["progress", "progress_max", "busy"], show_progress)
    follow(state, ["eta", "busy"], show_eta)
    follow(state, ["busy", "stopping"], sync)
    hide_in_replay(state, stop, progress, eta)
    return row(status, progress, eta, stop), status, progress, eta, stop


def clock(seconds: float) -> str:
    """``0:42``, ``12:05``, ``1:02:03``: elapsed time as a clock."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes}:{secs:02d}"


def compiling_html(rows: Iterable[dict[str, Any]], now: float | None = None) -> str:
    """One live row per compile in progress: "compiling `<function>` for `<shapes>` — 0:42"."""
    now = time.time() if now is None else now
    lines = []
    for started_row in rows:
        started = started_row.get("started_at")
        elapsed = clock(now - started) if isinstance(started, (int, float)) else "?"
        what = PHASE_WORDS.get(str(started_row.get("phase")), "compiling")
        lines.append(f'<div class="nk-compiling-row">⏳ {html_text(what)} '
                     f'<code>{html_text(started_row.get("function", "?"))}</code> for '
                     f'<code>{html_text(started_row.get("shapes", ""))}</code> — '
                     f'<span class="nk-clock">{elapsed}</span></div>')
    return "".join(lines)


def compiling_now(state: DashboardState) -> w.HTML:
    """One row per compile in progress, its clock ticking."""
    html = styled(w.HTML(), "nk-compiling")

    def show(_: Any = None) -> None:
        try:
            html.value = compiling_html(state.compiling)
        except Exception as exc:
            state.fail(exc)

    follow(state, ["compiling", "tick"], show)
    return html


def chart_view() -> tuple[w.HBox, w.Image, w.HTML]:
    """The chart (a PNG the dashboard draws) and its key beside it, as HTML.
    Returns (box, chart, chart_key)."""
    chart = styled(w.Image(format="png"), "nk-chart", width="100%", max_width="660px",
                   height="auto", flex="1 1 420px")
    key = styled(w.HTML(), "nk-chart-key", flex="0 1 240px", margin="0 0 0 8px")
    box = w.HBox([chart, key], layout=w.Layout(flex_flow="row wrap", align_items="flex-start"))
    return box, chart, key


def graph_counts_view() -> tuple[w.VBox, w.HTML]:
    """Graphs per function (drawn with the chart). Returns (box, graph_count)."""
    counts = styled(w.HTML(), "nk-graph-count")
    return w.VBox([counts], layout=w.Layout(flex="0 1 380px")), counts


def advice_view(state: DashboardState) -> tuple[w.VBox, w.HTML]:
    """What ``diagnose()`` found in the log shown. Returns (box, advice)."""
    advice = styled(w.HTML(), "nk-advice")

    def show(_: Any = None) -> None:
        advice.value = advice_html(state.advice)

    follow(state, "advice", show)
    box = w.VBox([w.HTML('<div class="nk-section">Advice</div>'), advice],
                 layout=w.Layout(flex="1 1 420px", margin="0 0 0 16px"))
    return box, advice


def compiles_panel(chart: w.Widget, counts: w.Widget, advice: w.Widget,
                   table: w.Widget) -> w.VBox:
    """The chart over the graph counts and the advice, over the event table."""
    return section("Compiles", chart, w.HBox([counts, advice], layout=w.Layout(flex_flow="row wrap")),
                   table, css_class="nk-live-panel")


def text_panel(state: DashboardState) -> tuple[w.VBox, w.HTML]:
    """The last text generated and its run's summary. Returns (box, output_text)."""
    text = styled(w.HTML(), "nk-output-text")

    def show(_: Any = None) -> None:
        text.value = (f'<pre class="nk-text">{html_text(state.generated_text)}</pre>'
                      f'<div class="nk-muted">{html_text(state.run_summary)}</div>'
                      if state.generated_text else
                      '<div class="nk-muted">Nothing generated yet.</div>')

    follow(state, ["generated_text", "run_summary"], show)
    box = section("Generated text", text, css_class="nk-text-panel")
    hide_in_replay(state, box)
    return box, text
