"""The dashboard's table panel and runs bar, driven as a user would, without a browser."""
from __future__ import annotations

import base64
import csv
import datetime
import io
import re

from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import CompileEvent
from neuronkit.events.schema import FORMAT
from neuronkit.log.compile_log import CompileLog
from neuronkit.widget import RecompileDashboard


def big_log(n: int) -> CompileLog:
    log = CompileLog(header={"format": FORMAT, "version": 2, "device": "cpu", "backend": "eager"})
    for i in range(n):
        kind = "limit_hit" if i % 50 == 49 else ("first" if i == 0 else "recompile")
        log.append(CompileEvent(function="forward" if i % 3 else "=HYPERLINK(\"x\")",
                                kind=kind, rank=i % 2, started_at=100.0 + i, duration_s=0.5,
                                input_shapes={"x": [1, i]},
                                reasons=[f"size mismatch at {i}"] if i else []))
    return log


def link_data(html: str) -> bytes:
    href = re.search(r'href="data:[^;]+;base64,([^"]+)"', html)
    assert href, html
    return base64.b64decode(href.group(1))


def rows(dash) -> int:
    return len(re.findall(r"<tr class=", dash.events_table.value))


def test_pages_filters_search_and_exports():
    dash = RecompileDashboard(state=DashboardState(log=big_log(450), source="big.jsonl"))
    panel = dash.table_panel
    assert rows(dash) == 200 and "rows 1–200 of 450" in dash.events_table.value
    panel.next.click()
    assert "rows 201–400 of 450" in dash.events_table.value and not panel.previous.disabled
    panel.next.click()
    assert rows(dash) == 50 and panel.next.disabled
    panel.kind.value = "limit_hit"
    assert rows(dash) == 9 and "of 9" in dash.events_table.value
    panel.kind.value = "__all__"
    panel.search.value = "MISMATCH AT 447"  # any case
    assert rows(dash) == 1
    panel.search.value = ""
    panel.rank.value = 1
    assert "of 225" in dash.events_table.value
    panel.export_buttons["csv"].click()
    table = list(csv.reader(io.StringIO(link_data(panel.exports.value).decode())))
    assert len(table) == 226  # the header and every filtered row, not just the page
    assert all(not cell.startswith("=") for row in table for cell in row)  # formulas defused
    panel.export_buttons["advice"].click()
    assert link_data(panel.exports.value).decode().startswith("#")
    panel.export_buttons["trace"].click()
    assert b'"traceEvents"' in link_data(panel.exports.value)
    dash.close()


def test_a_live_event_is_appended_not_rebuilt():
    state = DashboardState(log=big_log(10_000))
    dash = RecompileDashboard(state=state)
    before = dash.table_panel.table
    state.log.append(CompileEvent(function="late", kind="recompile", started_at=1e6,
                                  input_shapes={"x": [1, 1]}))
    state.refresh(advice=False)  # what a live event does (event_count changes)
    assert dash.table_panel.table is before and before.total == 10_001
    assert "late" in dash.events_table.value and rows(dash) == 200
    dash.close()


def test_replay_shows_only_what_applies_and_uploads_replay(tmp_path):
    dash = RecompileDashboard(state=DashboardState(log=big_log(5), source="small.jsonl"))
    hidden = {part for part in dash.children if part.layout.display == "none"}
    assert any("nk-generation-panel" in p._dom_classes for p in hidden)
    assert any("nk-model-panel" in p._dom_classes for p in hidden)
    assert dash.upload.layout.display != "none"
    content = big_log(7).save(tmp_path / "up.jsonl").read_bytes()
    dash.upload.value = ({"name": "rank3.jsonl", "type": "", "size": len(content),
                          "content": memoryview(content),
                          "last_modified": datetime.datetime.now(datetime.timezone.utc)},)
    assert dash.state.shown_run == "rank3.jsonl" and dash.run.value == "rank3.jsonl"
    assert dash.table_panel.table.total == 7 and dash.state.status_kind == "ok"
    dash.run.value = ""
    assert dash.table_panel.table.total == 5
    dash.close()


def test_compare_two_runs_side_by_side(tmp_path):
    dash = RecompileDashboard(state=DashboardState(log=big_log(3), source="base.jsonl"))
    naive, bucketed = big_log(11), big_log(1)
    files = [(name, log.save(tmp_path / name).read_bytes())
             for name, log in (("naive.jsonl", naive), ("bucketed.jsonl", bucketed))]
    dash.state.open_uploads(files)
    panel = dash.compare_panel
    assert (panel.a.value, panel.b.value) == ("naive.jsonl", "bucketed.jsonl")
    assert not panel.button.disabled
    panel.button.click()
    html = panel.html.value
    assert "naive.jsonl" in html and "bucketed.jsonl" in html and "fewer" in html
    assert bytes(panel.chart.value).startswith(b"\x89PNG") and panel.chart.layout.display == ""
    cmp = dash.state.compare("", "naive.jsonl")
    assert cmp.a.name == "the replayed log" and cmp.a.events == 3 and cmp.b.events == 11
    dash.close()
