"""The dashboard's event table at scale: filters by kind / function / rank, search, sort, pages,
and exports (CSV, Markdown, advice as Markdown, Chrome trace) as links the browser saves."""
from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any, Callable, Iterable

import ipywidgets as w

from neuronkit.advice.excerpts import cut_long
from neuronkit.apps.dashboard.controls import row, styled
from neuronkit.apps.dashboard.exports import download_link
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import strip_control
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.html import table_page_html
from neuronkit.views.table import ARRIVAL, SORT_COLUMNS, EventTable
from neuronkit.views.table_cells import COLUMN_LABELS
from neuronkit.views.table_export import advice_markdown, table_csv, table_markdown

__all__ = ["TablePanel", "ALL"]

ALL = "__all__"   # a filter's "any" choice
_DEFAULT_QUERY = (ALL, ALL, ALL, "", ARRIVAL, True)  # what a new EventTable shows


def _choices(values: Iterable[Any], everything: str) -> list[tuple[str, Any]]:
    """Dropdown (label, value) pairs, labels cleaned (a log's names may hold anything: a 20 MB
    name is read by its start)."""
    out: list[tuple[str, Any]] = [(everything, ALL)]
    for value in values:
        label = " ".join(strip_control(cut_long(value), keep_newlines=False).split()) or "?"
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
        self.html = styled(w.HTML(), "nk-events-table")
        self.kind = styled(w.Dropdown(options=_choices([], "all kinds"), layout=w.Layout(width="170px")),
                         "nk-filter-kind")
        self.function = styled(w.Dropdown(options=_choices([], "all functions"),
                                        layout=w.Layout(width="260px")), "nk-filter-function")
        self.rank = styled(w.Dropdown(options=_choices([], "all ranks"), layout=w.Layout(width="120px")),
                         "nk-filter-rank")
        self.search = styled(w.Text(placeholder="search reasons, functions…", continuous_update=False,
                                  layout=w.Layout(width="220px")), "nk-search")
        self.sort = styled(w.Dropdown(options=[(COLUMN_LABELS.get(c, "arrival"), c)
                                             for c in SORT_COLUMNS], layout=w.Layout(width="130px")),
                         "nk-sort")
        self.descending = styled(w.ToggleButton(value=True, description="↓", tooltip="descending",
                                              layout=w.Layout(width="40px")), "nk-descending")
        self.previous = styled(w.Button(description="‹", layout=w.Layout(width="36px")), "nk-page-prev")
        self.next = styled(w.Button(description="›", layout=w.Layout(width="36px")), "nk-page-next")
        self.exports = styled(w.HTML(), "nk-downloads")
        self.export_buttons = {what: styled(w.Button(description=label, layout=w.Layout(width="150px")),
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
        super().__init__([row(self.kind, self.function, self.rank, self.search, self.sort,
                              self.descending, self.previous, self.next),
                          self.html, row(*self.export_buttons.values(), self.exports)])
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
