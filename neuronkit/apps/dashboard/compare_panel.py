"""Two runs side by side in the dashboard: graphs, compile seconds, projected device time, both
timelines on one axis, and what changed (``views.compare``)."""
from __future__ import annotations

from typing import Callable

import ipywidgets as w

from neuronkit.apps.dashboard.controls import styled
from neuronkit.apps.dashboard.runs import Runs
from neuronkit.views.charts import png_bytes
from neuronkit.views.compare import compare_chart, comparison_html

__all__ = ["ComparePanel"]


class ComparePanel(w.VBox):
    """Pick two runs (or the session's own log) and compare them; errors go to ``fail``."""

    def __init__(self, runs: Runs, fail: Callable[[BaseException], None]) -> None:
        self.runs = runs
        self._fail = fail
        self.a = styled(w.Dropdown(description="Compare", layout=w.Layout(width="300px")),
                        "nk-compare-a")
        self.b = styled(w.Dropdown(description="with", layout=w.Layout(width="300px")),
                        "nk-compare-b")
        self.button = styled(w.Button(description="Compare", layout=w.Layout(width="110px")),
                             "nk-compare")
        self.html = styled(w.HTML(), "nk-comparison")
        self.chart = styled(w.Image(format="png", layout=w.Layout(width="100%", max_width="900px",
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
        try:
            cmp = self.runs.compare(self.a.value, self.b.value)
            self.html.value = comparison_html(cmp)
            self.chart.value = png_bytes(compare_chart(self.runs.log(self.a.value),
                                                       self.runs.log(self.b.value),
                                                       names=(cmp.a.name, cmp.b.name)))
            self.chart.layout.display = ""
        except Exception as exc:  # shown in the status area, never lost
            self._fail(exc)
