"""Every view renders events built in memory with values of the wrong type in any field.

The log reader checks every line of a file, but a ``CompileEvent`` built in memory may hold
anything (``duration_s='<img>'``, a dict among the sizes of ``input_shapes``, ``rank='x'``, None
seconds). Each view (text, JSON report, HTML, event table and its exports, charts, Chrome trace,
compare) must render such events without raising, show what it cannot read as unknown, escape
what it shows, count what it can read, and leave the recorded events as they were.
"""
from __future__ import annotations

import copy
import json
import math
import random
import re
import warnings

import matplotlib
import pytest

from helpers.html import parse
from neuronkit.events.event import FIELDS, KINDS, CompileEvent
from neuronkit.events.facts import readable
from neuronkit.log.compile_log import CompileLog
from neuronkit.views import charts, compare, html, report_json, table, table_export, text
from neuronkit.views.chrome_trace import write_chrome_trace

matplotlib.use("Agg")

IMG = '"><img src=x onerror=alert(1)>'
ESC = "\x1b[31mred\x1b]0;t\x07"


class Odd:
    """An object no view knows, with a hostile text."""

    def __str__(self) -> str:
        return IMG + ESC

    __repr__ = __str__


# values of every type; a field gets each one whose type is not the one a recorder writes there
VALUES = [IMG, ESC, "3.5", "", None, True, {"a": IMG}, [1, IMG], (2, 3), 1.5, 7, math.nan,
          math.inf, -math.inf, 10 ** 400, Odd(), b"\xff<svg onload=x>", complex(1, 2)]
RECORDED = {**dict.fromkeys(("seq", "graph_count", "rank", "calls", "kernels"), int),
            **dict.fromkeys(("started_at", "duration_s", "neff_compile_s"), float),
            **dict.fromkeys(("compile_id", "function", "location", "backend", "device",
                             "changed", "kind", "context", "neff_cache"), str),
            "input_shapes": dict, "reasons": list, "metrics": dict, "ops": dict, "forecast": bool,
            "cache_key": list}
# the recorded container types holding what they should not
CONTENTS = {"input_shapes": [{"x": [1, {"a": 1}, None, IMG]}, {5: [1]}, {None: [2]},
                             {"x": 3}, {"x": None}, {IMG: "ab"}],
            "reasons": [[None, 5, IMG], [Odd()]], "ops": [{IMG: IMG}, {5: None}],
            "metrics": [{"neff_in_duration": IMG}],
            "cache_key": [[IMG, {"cache": IMG, "key": 5, "state": None}], [{"key": Odd()}]]}


def wrong_values(field: str) -> list:
    return [v for v in VALUES if type(v) is not RECORDED[field]] + CONTENTS.get(field, [])


def good(seq: int, kind: str = "recompile", **fields) -> CompileEvent:
    values = dict(seq=seq, function="forward", location="/m/model.py:10", started_at=100.0 + seq,
                  duration_s=1.5, kind=kind, input_shapes={"input_ids": [1, 8 + seq]},
                  changed="input_ids", reasons=["L['input_ids'].size()[1] == 8"], rank=0)
    return CompileEvent(**{**values, **fields})


def log_with(field: str, values: list) -> CompileLog:
    """Two readable events, then one event of each kind per value of ``field``."""
    events = [good(0, "first"), good(1)]
    for value in values:
        for kind in KINDS:
            e = good(len(events), kind, kernels=2, calls=3, ops={"aten::mm": 2})
            setattr(e, field, value)
            events.append(e)
    log = CompileLog(events, header={"format": "neuronkit-compile-log", "version": 2})
    log.wall_time_s = 60.0
    return log


def assert_inert(markup: str) -> None:
    low = markup.lower()
    for raw in ("<img", "<script", "<svg", "\x1b", "\x07"):
        assert raw not in low, (raw, markup[:300])
    parse(markup)


def assert_terminal_safe(out: str) -> None:
    assert "\x1b" not in out and "\x07" not in out, out[:300]


def render_all(log: CompileLog, tmp_path) -> dict[str, str]:
    """Every non-chart view of ``log``, as the text it shows."""
    out = {"report": text.format_report(log, limit=None), "events": text.format_events(log),
           "summary": text.format_summary(log),
           "json": json.dumps(report_json.report_data(log, limit=None), allow_nan=False,
                              default=str),
           "table_html": html.events_table_html(log), "counts": html.graph_counts_html(log)}
    t = table.EventTable(log, page_size=3)
    pages = []
    for column in table.SORT_COLUMNS:
        t.sort_by(column)
        pages.append(html.table_page_html(t))
    t.set_filters(ranks=t.ranks(), kinds=t.kinds(), functions=t.functions(), search="img")
    pages.append(html.table_page_html(t))
    out["pages"] = "".join(pages)
    everything = table.EventTable(log)
    out["csv"] = table_export.table_csv(everything.all_rows())
    out["markdown"] = table_export.table_markdown(everything.all_rows())
    cmp = compare.compare_logs(log, CompileLog([good(0, "first")]))
    out["compare_text"] = compare.comparison_text(cmp)
    out["compare_html"] = compare.comparison_html(cmp)
    out["trace"] = write_chrome_trace(log, tmp_path / "trace.json").read_text()
    return out


def check(out: dict[str, str]) -> None:
    for name in ("table_html", "counts", "pages", "compare_html"):
        assert_inert(out[name])
    for name in ("report", "events", "summary", "compare_text"):
        assert_terminal_safe(out[name])
    assert "<img" not in out["trace"] and "\x1b" not in out["trace"]
    json.loads(out["trace"])
    for row in out["csv"].splitlines()[1:]:
        assert not re.search(r'(^|,)"?[=+@-]', row), row        # no cell runs as a formula


CASES = [(field, wrong_values(field)) for field in FIELDS] + list(CONTENTS.items())


@pytest.mark.parametrize("field, values", CASES,
                         ids=[*FIELDS, *(f"{field} contents" for field in CONTENTS)])
def test_every_view_renders_wrong_types_in(field, values, tmp_path):
    log = log_with(field, values)
    recorded = [copy.copy(e) for e in log.events]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        check(render_all(log, tmp_path))
    for before, after in zip(recorded, log.events, strict=True):   # nothing recorded changed
        for name in FIELDS:
            assert getattr(after, name) is getattr(before, name), name


def test_charts_draw_a_log_with_every_field_wrong(tmp_path):
    """Property style: events each holding wrong values in random fields, seeded."""
    rng = random.Random(23)
    events = [good(0, "first"), good(1)]
    for seq in range(2, 60):
        e = good(seq, rng.choice(["recompile", "kernels", "limit_hit", "failed", "first"]))
        for field in rng.sample(FIELDS, 4):
            setattr(e, field, rng.choice(wrong_values(field)))
        events.append(e)
    log = CompileLog(events)
    check(render_all(log, tmp_path))
    for fig in (charts.dashboard_chart(log), charts.timeline(log, x="call", by="rank"),
                charts.graph_growth(log, x="time"), compare.compare_chart(log, log)):
        assert charts.png_bytes(fig).startswith(charts.PNG_SIGNATURE)


def test_what_cannot_be_read_shows_as_unknown_and_is_not_counted():
    bad = good(2, duration_s=IMG, started_at=None, rank="x", neff_compile_s={"a": 1})
    log = CompileLog([good(0, "first"), good(1), bad])
    table_html = html.events_table_html(log)
    row = re.search(r"<tr class=\"nk-recompile\"><td class=\"nk-nowrap\">2</td>(.*?)</tr>",
                    table_html).group(1)
    cells = re.findall(r"<td[^>]*>(.*?)</td>", row)
    columns = table.EventTable(log).columns
    assert cells[columns.index("duration_s") - 1] == "?"
    assert cells[columns.index("rank") - 1] == "?"
    assert "<img" not in table_html
    assert "3.0 s Dynamo compile" in html.graph_counts_html(log)     # the two readable 1.5 s
    report = text.format_report(log)
    line = [ln for ln in report.splitlines() if ln.lstrip().startswith("2 ")][0]
    assert " ? " in line + " " and "img" not in line
    data = report_json.report_data(log)
    assert data["compile_s"] == 3.0
    shown = data["events"][-1]
    assert shown["duration_s"] is None and shown["t_s"] is None and shown["rank"] is None
    assert shown["neff_compile_s"] is None
    assert bad.duration_s == IMG and bad.rank == "x"          # the event keeps what it holds


def test_readable_events_are_the_events_themselves_when_well_typed():
    events = [good(0, "first"), good(1, neff_compile_s=3.0, neff_cache="compiled")]
    assert all(a is b for a, b in zip(readable(events), events, strict=True))
    copied = readable([good(0), good(1, duration_s="2")])
    assert copied[1].duration_s == 0.0 and copied[1].started_at == 101.0


def test_cache_lookups_of_the_wrong_type_read_as_none():
    """An in-memory event whose ``cache_key`` is no list of lookups (a number field of another
    type makes views read every field): read as the lookups it holds, never a KeyError."""
    from neuronkit.events.facts import readable

    odd = [CompileEvent(function="f", duration_s=1, cache_key="x"),
           CompileEvent(function="g", duration_s=1, cache_key=[{"cache": "fx_graph"}, 5])]
    assert [e.cache_key for e in readable(odd)] == [[], [{"cache": "fx_graph"}]]
