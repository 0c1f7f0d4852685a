"""Pieces of the recompile dashboard: the compiles in progress with their ticking clocks, and
the event table panel (filters, search, sort, pages, exports).

Pure functions to HTML where they can be (testable without a browser); every value escaped.
"""
from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any, Callable, Iterable

import ipywidgets as w

from neuronkit.log.compile_log import CompileLog
from neuronkit.views.charts import png_bytes
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.compare import compare_chart, comparison_html
from neuronkit.apps.dashboard.runs import SessionRuns, download_link
from neuronkit.views.html import table_page_html
from neuronkit.views.safe import html_text, strip_control
from neuronkit.views.table import (ARRIVAL, COLUMN_LABELS, SORT_COLUMNS, EventTable, advice_markdown,
                                   table_csv, table_markdown)

__all__ = ["ComparePanel", "TablePanel", "compiling_html", "clock", "PHASE_WORDS", "UPLOAD_ACCEPT"]

PHASE_WORDS = {"dynamo": "compiling",
               "device": "waiting for the device compiler (neuronx-cc) to build"}
UPLOAD_ACCEPT = ".jsonl,.json,.log,.txt,application/json,text/plain"


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
    for row in rows:
        started = row.get("started_at")
        elapsed = clock(now - started) if isinstance(started, (int, float)) else "?"
        what = PHASE_WORDS.get(str(row.get("phase")), "compiling")
        lines.append(f'<div class="nk-compiling-row">⏳ {html_text(what)} '
                     f'<code>{html_text(row.get("function", "?"))}</code> for '
                     f'<code>{html_text(row.get("shapes", ""))}</code> — '
                     f'<span class="nk-clock">{elapsed}</span></div>')
    return "".join(lines)


ALL = "__all__"   # a filter's "any" choice
_DEFAULT_QUERY = (ALL, ALL, ALL, "", ARRIVAL, True)  # what a new EventTable shows


def _choices(values: Iterable[Any], everything: str) -> list[tuple[str, Any]]:
    """Dropdown (label, value) pairs, labels cleaned (a log's names may hold anything)."""
    out: list[tuple[str, Any]] = [(everything, ALL)]
    for value in values:
        label = " ".join(strip_control(value, keep_newlines=False).split()) or "?"
        out.append((label if len(label) <= 60 else label[:59] + "…", value))
    return out


class TablePanel(w.VBox):
    """The event table at scale: filter by kind / function / rank, search the reasons, sort,
    page through every event, and export (CSV, Markdown, advice as Markdown, Chrome trace) as
    links the browser saves. A live event is appended to the table's index, not rebuilt."""

    def __init__(self, fail: Callable[[BaseException], None]) -> None:
        self._fail = fail
        self.table = EventTable()
        self._log: CompileLog | None = None
        self._advice: list[Any] = []
        self.html = _css(w.HTML(), "nk-events-table")
        self.kind = _css(w.Dropdown(options=_choices([], "all kinds"), layout=_width("170px")),
                         "nk-filter-kind")
        self.function = _css(w.Dropdown(options=_choices([], "all functions"),
                                        layout=_width("260px")), "nk-filter-function")
        self.rank = _css(w.Dropdown(options=_choices([], "all ranks"), layout=_width("120px")),
                         "nk-filter-rank")
        self.search = _css(w.Text(placeholder="search reasons, functions…", continuous_update=False,
                                  layout=_width("220px")), "nk-search")
        self.sort = _css(w.Dropdown(options=[(COLUMN_LABELS.get(c, "arrival"), c)
                                             for c in SORT_COLUMNS], layout=_width("130px")),
                         "nk-sort")
        self.descending = _css(w.ToggleButton(value=True, description="↓", tooltip="descending",
                                              layout=_width("40px")), "nk-descending")
        self.previous = _css(w.Button(description="‹", layout=_width("36px")), "nk-page-prev")
        self.next = _css(w.Button(description="›", layout=_width("36px")), "nk-page-next")
        self.exports = _css(w.HTML(), "nk-downloads")
        self.export_buttons = {what: _css(w.Button(description=label, layout=_width("150px")),
                                          f"nk-export-{what}")
                               for what, label in (("csv", "Table CSV"), ("md", "Table Markdown"),
                                                   ("advice", "Advice Markdown"),
                                                   ("trace", "Chrome trace"))}
        for control in (self.kind, self.function, self.rank, self.search, self.sort,
                        self.descending):
            control.observe(self._on_query, "value")
        self.previous.on_click(lambda _: self._turn(-1))
        self.next.on_click(lambda _: self._turn(+1))
        for what, button in self.export_buttons.items():
            button.on_click(lambda _, what=what: self._export(what))
        row = w.Layout(flex_flow="row wrap", align_items="center")
        super().__init__([w.HBox([self.kind, self.function, self.rank, self.search, self.sort,
                                  self.descending, self.previous, self.next], layout=row),
                          self.html,
                          w.HBox([*self.export_buttons.values(), self.exports], layout=row)])
        self.add_class("nk-table-panel")

    # -- data ----------------------------------------------------------------------------------
    def show(self, log: CompileLog, advice: list[Any]) -> None:
        """Show ``log`` (a rebuild when it is another log or changed other than by appends)."""
        self._advice = advice
        if log is not self._log or len(log.events) < self.table.total:
            self._log = log
            self.table = EventTable(log)
            if self._query() != _DEFAULT_QUERY:  # else the new table is already in that order
                self._apply_query()
            else:
                self.render()
        else:
            self.append_new(log)
        self._options()

    def append_new(self, log: CompileLog) -> None:
        """Put the events the log gained since the last call into the table (no rebuild)."""
        for event in log.events[self.table.total:]:
            self.table.append(event)
        self.render()

    def refresh_all(self) -> None:
        """Rebuild from the log (after updates to events already shown: NEFF times)."""
        if self._log is not None:
            self.table = EventTable(self._log)
            self._apply_query()
            self._options()

    def render(self) -> None:
        self.html.value = table_page_html(self.table, sortable=False)  # the Sort control sorts
        self.previous.disabled = self.table.page == 0
        self.next.disabled = self.table.page >= self.table.page_count - 1

    # -- controls -----------------------------------------------------------------------------
    def _options(self) -> None:
        for control, values, everything in ((self.kind, self.table.kinds(), "all kinds"),
                                            (self.function, self.table.functions(),
                                             "all functions"),
                                            (self.rank, self.table.ranks(), "all ranks")):
            options = _choices(values, everything)
            if list(control.options) != options:
                keep = control.value if control.value in [v for _, v in options] else ALL
                with control.hold_trait_notifications():
                    control.options = options
                    control.value = keep

    def _query(self) -> tuple[Any, ...]:
        return (self.kind.value, self.function.value, self.rank.value, self.search.value,
                self.sort.value, self.descending.value)

    def _apply_query(self) -> None:
        pick = lambda c: None if c.value == ALL else [c.value]  # noqa: E731
        self.table.set_filters(kinds=pick(self.kind), functions=pick(self.function),
                               ranks=pick(self.rank), search=self.search.value)
        self.table.sort_by(self.sort.value, self.descending.value)
        self.descending.description = "↓" if self.descending.value else "↑"
        self.render()

    def _on_query(self, change: Any = None) -> None:
        try:
            self._apply_query()
        except Exception as exc:  # shown in the status area, never lost
            self._fail(exc)

    def _turn(self, step: int) -> None:
        try:
            self.table.page += step
            self.render()
        except Exception as exc:
            self._fail(exc)

    def _export(self, what: str) -> None:
        try:
            self.exports.value = self.export_link(what)
        except Exception as exc:
            self._fail(exc)

    def export_link(self, what: str) -> str:
        """A download link for ``what``: ``csv`` / ``md`` (the filtered table, every page),
        ``advice`` (Markdown for a bug report) or ``trace`` (Chrome trace JSON of the log)."""
        if what == "csv":
            return download_link("compile-events.csv", "compile-events.csv",
                                 table_csv(self.table.all_rows()).encode(), "text/csv")
        if what == "md":
            return download_link("compile-events.md", "compile-events.md",
                                 table_markdown(self.table.all_rows()).encode(), "text/markdown")
        if what == "advice":
            return download_link("advice.md", "advice.md",
                                 advice_markdown(self._advice).encode(), "text/markdown")
        if what == "trace":
            if self._log is None:
                raise ValueError("no log to export yet")
            with tempfile.TemporaryDirectory(prefix="neuronkit-trace-") as folder:
                path = write_chrome_trace(self._log, Path(folder) / "trace.json")
                data = path.read_bytes()
            return download_link("compile-trace.json (Perfetto, chrome://tracing)",
                                 "compile-trace.json", data, "application/json")
        raise ValueError(f"export what? 'csv', 'md', 'advice' or 'trace', not {what!r}")


class ComparePanel(w.VBox):
    """Two runs side by side: graphs, compile seconds, projected device time, both timelines
    on one axis, and what changed (``views.compare``)."""

    def __init__(self, state: SessionRuns) -> None:
        self.state = state
        self.a = _css(w.Dropdown(description="Compare", layout=_width("300px")), "nk-compare-a")
        self.b = _css(w.Dropdown(description="with", layout=_width("300px")), "nk-compare-b")
        self.button = _css(w.Button(description="Compare", layout=_width("110px")),
                           "nk-compare")
        self.html = _css(w.HTML(), "nk-comparison")
        self.chart = _css(w.Image(format="png", layout=w.Layout(width="100%", max_width="900px",
                                                                height="auto")),
                          "nk-compare-chart")
        self.chart.layout.display = "none"
        self.button.on_click(lambda _: self.run())
        super().__init__([w.HBox([self.a, self.b, self.button],
                                 layout=w.Layout(flex_flow="row wrap")), self.html, self.chart])
        self.add_class("nk-compare-panel")

    def set_runs(self, own: str, names: list[str], live: bool) -> None:
        """The runs to choose from: the session's own log (``own`` names it) and ``names``.
        First picks: live, the last run kept against the session now; else the first two."""
        options = [(own, ""), *((n, n) for n in names)]
        if live and names:
            picks = (names[-1], "")
        else:
            picks = (names[0], names[1]) if len(names) > 1 else ("", names[0] if names else "")
        for control, pick in zip((self.a, self.b), picks, strict=True):
            if list(control.options) != options:
                control.options = options
                control.value = pick
        self.button.disabled = len(options) < 2

    def run(self) -> None:
        state = self.state
        try:
            cmp = state.compare(self.a.value, self.b.value)
            self.html.value = comparison_html(cmp)
            self.chart.value = png_bytes(compare_chart(state.run_log(self.a.value),
                                                       state.run_log(self.b.value),
                                                       names=(cmp.a.name, cmp.b.name)))
            self.chart.layout.display = ""
        except Exception as exc:  # shown in the status area, never lost
            state.fail(exc)


def _css(widget: Any, css_class: str) -> Any:
    widget.add_class(css_class)
    return widget


def _width(width: str) -> w.Layout:
    return w.Layout(width=width)
