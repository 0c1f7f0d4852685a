"""The event table model: filters, search, sort, pages, live appends, exports and its HTML."""
from __future__ import annotations

import csv
import io
import re
from types import SimpleNamespace

import pytest

from helpers.html import parse
from neuronkit.advice.finding import Advice
from neuronkit.events.event import KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_text
from neuronkit.views import html as html_module
from neuronkit.views import table as table_module
from neuronkit.views import table_cells
from neuronkit.views.html import KIND_CLASSES, UNKNOWN_CLASS, events_table_html, table_page_html
from neuronkit.views.table import ARRIVAL, SORT_COLUMNS, TABLE_ROWS, EventTable
from neuronkit.views.table_cells import NEURON_COLUMNS
from neuronkit.views.table_export import advice_markdown, table_csv, table_markdown

PLACES = [("forward", "a/model.py:10"), ("forward", "b/layers.py:20"), ("decode", "gen.py:5")]
LABELS = {PLACES[0]: "forward (model.py:10)", PLACES[1]: "forward (layers.py:20)",
          PLACES[2]: "decode"}
IMG = "<img src=x onerror=alert(1)>"


def synthetic(count: int = 300, start: int = 0) -> list[CompileEvent]:
    """Events of three functions (two share a name), every kind, two ranks, varied durations."""
    events = []
    for i in range(start, start + count):
        function, location = PLACES[i % 3]
        events.append(CompileEvent(
            seq=i, function=function, location=location, started_at=1000.0 + i * 0.5,
            duration_s=(i * 37 % 101) / 10, kind=KINDS[i % len(KINDS)], rank=i % 2,  # type: ignore[arg-type]
            graph_count=i % 4, changed=f"input_ids dim 1: {i} -> {i + 1}",
            reasons=[f"tensor 'L['input_ids']' size mismatch at index 1. expected {i}, actual {i + 1}"]
            if i % 5 else [], context=f"step {i}"))
    return events


def seqs(table: EventTable, every: bool = False) -> list[int]:
    return [int(row["seq"]) for row in (table.all_rows() if every else table.rows())]


def label(event: CompileEvent) -> str:
    return LABELS[event.function, event.location]


# --------------------------------------------------------------------------- pages and order

def test_default_order_is_newest_first_in_pages_of_table_rows():
    table = EventTable(CompileLog(synthetic(300)))
    assert table.page_size == TABLE_ROWS == 200 and table.sort_column == ARRIVAL
    assert table.page_count == 2 and table.row_count == table.total == 300
    assert seqs(table) == list(range(299, 99, -1))
    assert table.range_text == "rows 1–200 of 300"
    table.page = 1
    assert seqs(table) == list(range(99, -1, -1)) and table.range_text == "rows 201–300 of 300"
    table.page = 99                                      # kept within the pages
    assert table.page == 1
    table.page_size = 64
    assert table.page_count == 5 and table.page == 1 and seqs(table) == list(range(235, 171, -1))
    assert seqs(table, every=True) == list(range(299, -1, -1))
    with pytest.raises(ValueError):
        table.page_size = 0


def test_empty_table():
    table = EventTable(CompileLog())
    assert table.rows() == [] and table.page_count == 1 and table.range_text == "no events"
    assert "No compile events yet" in table_page_html(table)
    assert table.kinds() == [] and table.functions() == [] and table.ranks() == []


@pytest.mark.parametrize("column", ["duration_s", "graph_count", "time", "seq", "rank"])
def test_sort_by_a_column_both_ways_ties_in_arrival_order(column):
    events = synthetic(300)
    table = EventTable(events, page_size=50)
    field = "started_at" if column == "time" else column
    ascending = [e.seq for e in sorted(events, key=lambda e: (getattr(e, field), e.seq))]
    table.sort_by(column, descending=False)
    assert seqs(table, every=True) == ascending
    assert seqs(table) == ascending[:50]
    table.sort_by(column, descending=True)
    assert seqs(table, every=True) == ascending[::-1]
    table.page = 2
    assert seqs(table) == ascending[::-1][100:150]


def test_sort_by_toggles_and_rejects_unknown_columns():
    table = EventTable(synthetic(30))
    table.sort_by("duration_s")
    assert table.sort_column == "duration_s" and table.descending
    table.sort_by("duration_s")
    assert not table.descending
    table.sort_by("function")
    assert table.descending
    with pytest.raises(ValueError, match="cannot sort"):
        table.sort_by("<script>")
    assert set(SORT_COLUMNS) >= {"seq", "time", "function", "kind", "duration_s", "rank",
                                 "graph_count", "neff_compile_s", "neff_cache", "kernels"}


def test_sort_by_kind_follows_kinds_order_and_by_function_label():
    events = synthetic(70)
    table = EventTable(events)
    table.sort_by("kind", descending=False)
    assert [r["kind"] for r in table.all_rows()] == [
        table_cells.KIND_LABELS[e.kind] for e in sorted(events, key=lambda e: (KINDS.index(e.kind),
                                                                                 e.seq))]
    table.sort_by("function", descending=False)
    assert [r["function"] for r in table.all_rows()] == sorted(
        (label(e) for e in events), key=str.casefold)


def test_missing_values_sort_last_both_ways():
    events = synthetic(10)
    for e in events[::2]:
        e.neff_compile_s = float(e.seq)
    table = EventTable(events)
    table.sort_by("neff_compile_s", descending=True)
    assert seqs(table, every=True)[:5] == [8, 6, 4, 2, 0]
    assert [r["neff_compile_s"] for r in table.all_rows()][5:] == [""] * 5
    table.sort_by("neff_compile_s", descending=False)
    assert seqs(table, every=True)[:5] == [0, 2, 4, 6, 8]


# --------------------------------------------------------------------------- filters and search

def test_options_list_what_the_log_holds():
    table = EventTable(synthetic(300))
    assert table.kinds() == list(KINDS)
    assert table.functions() == ["decode", "forward (layers.py:20)", "forward (model.py:10)"]
    assert table.ranks() == [0, 1]


@pytest.mark.parametrize("filters", [
    {"kinds": {"recompile", "limit_hit"}},
    {"functions": {"forward (layers.py:20)"}},
    {"ranks": {1}},
    {"search": "SIZE MISMATCH"},
    {"search": "LAYERS.PY"},                              # the label's place
    {"search": "dim 1: 17 -> 18"},                        # the changed text
    {"kinds": {"first"}, "functions": {"decode"}, "ranks": {0}, "search": "expected"},
    {"kinds": set()},
])
def test_filters_and_search_match_a_plain_filter(filters):
    events = synthetic(300)
    table = EventTable(events, page_size=25)
    table.page = 3
    table.set_filters(**filters)
    needle = filters.get("search", "").casefold()

    def keep(e: CompileEvent) -> bool:
        text = "\n".join([label(e), e.function, e.changed, *e.reasons]).casefold()
        return (e.kind in filters.get("kinds", KINDS) and e.rank in filters.get("ranks", (0, 1))
                and label(e) in filters.get("functions", LABELS.values()) and needle in text)

    expected = [e.seq for e in reversed(events) if keep(e)]
    assert table.page == 0                               # a new filter starts on page 1
    assert seqs(table, every=True) == expected and table.row_count == len(expected)
    assert seqs(table) == expected[:25]
    assert table.total == 300 and table.page_count == max(1, -(-len(expected) // 25))
    if 0 < len(expected) < 300:
        assert table.range_text == (f"rows 1–{min(25, len(expected))} of {len(expected)} "
                                    "(filtered from 300 events)")
    if not expected:
        assert table.range_text == "no matching rows of 300 events" and table.rows() == []
    table.set_filters()
    assert table.row_count == 300


def test_search_reaches_every_reason_not_only_the_first():
    event = CompileEvent(function="f", reasons=["grad mode changed", "Needle in the second"])
    table = EventTable([event, CompileEvent(function="g")])
    table.set_filters(search="needle")
    assert [r["function"] for r in table.all_rows()] == ["f"]
    assert table.all_rows()[0]["reason"].endswith("(+1 more)")


# --------------------------------------------------------------------------- columns

def test_neuron_and_rank_columns_only_when_the_log_has_them():
    plain = EventTable(synthetic(20, start=0)[::2])      # even seqs: rank 0 only
    assert not set(plain.columns) & {*NEURON_COLUMNS, "rank"}
    assert set(plain.rows()[0]) == set(plain.columns)
    assert "NEFF" not in table_page_html(plain)
    assert "rank" in EventTable(synthetic(20)).columns
    for field, value in (("neff_compile_s", 0.0), ("neff_cache", "disk_hit"), ("kernels", 3)):
        events = synthetic(5)
        setattr(events[2], field, value)
        table = EventTable(events)
        assert [c for c in table.columns if c in NEURON_COLUMNS] == [field]
    events = synthetic(5)
    events[1].kernels = 0
    assert "kernels" not in EventTable(events).columns


def test_a_live_neuron_event_and_a_resolved_build_bring_their_columns():
    log = CompileLog(synthetic(6))
    table = EventTable(log)
    table.sort_by("neff_compile_s", descending=True)
    assert "neff_compile_s" not in table.columns
    table.append(log.append(CompileEvent(function="decode", location="gen.py:5",
                                         neff_cache="compiled")))
    assert "neff_cache" in table.columns and "neff_compile_s" not in table.columns
    table.refresh(log.update(3, neff_compile_s=94.2))
    assert "neff_compile_s" in table.columns
    assert table.rows()[0]["seq"] == "3" and table.rows()[0]["neff_compile_s"] == "94.2"
    html = table_page_html(table)
    assert ">NEFF s</th>" in html and ">NEFF cache</th>" in html and ">compiled</td>" in html


# --------------------------------------------------------------------------- live appends

@pytest.mark.parametrize("setup", [
    {},
    {"sort": ("duration_s", False)},
    {"sort": ("time", True), "filters": {"kinds": {"recompile", "first"}, "search": "expected"}},
    {"sort": ("function", False), "filters": {"functions": {"decode"}}},
    {"sort": ("neff_compile_s", True), "filters": {"ranks": {1}}},
    {"filters": {"search": "GEN.PY"}},                     # matches labels that gain a place
])
def test_append_matches_a_full_rebuild(setup):
    events = synthetic(400)
    events[350].function, events[350].location = "decode", "other/gen2.py:9"   # relabels decode
    for e in events[::7]:
        e.neff_compile_s = e.seq / 3

    def configured(table: EventTable) -> EventTable:
        table.set_filters(**setup.get("filters", {}))
        if "sort" in setup:
            table.sort_by(*setup["sort"])
        return table

    live = configured(EventTable(events[:150], page_size=40))
    for event in events[150:]:
        live.append(event)
        if event.seq in (151, 349, 350, 351, 399):
            rebuilt = configured(EventTable(events[:event.seq + 1], page_size=40))
            assert live.all_rows() == rebuilt.all_rows()
            assert (live.row_count, live.page_count, live.range_text, live.columns) == (
                rebuilt.row_count, rebuilt.page_count, rebuilt.range_text, rebuilt.columns)
            assert (live.kinds(), live.functions(), live.ranks()) == (
                rebuilt.kinds(), rebuilt.functions(), rebuilt.ranks())
            live.page = rebuilt.page = 2
            assert live.rows() == rebuilt.rows()
            live.page = 0
    assert "decode (gen2.py:9)" in live.functions()


def test_append_and_render_of_10k_events_touch_only_the_page(monkeypatch):
    log = CompileLog(synthetic(10_000))
    table = EventTable(log)
    table.page = 1
    assert table.range_text == "rows 201–400 of 10,000"
    table.page = 0
    rendered: list[int] = []
    keyed: list[int] = []
    relabelled: list[int] = []
    row, key, labels = EventTable.row, EventTable._key, table_module.function_labels
    monkeypatch.setattr(EventTable, "row", lambda self, e, c=None: rendered.append(1) or row(self, e, c))
    monkeypatch.setattr(EventTable, "_key", lambda self, p: keyed.append(1) or key(self, p))
    monkeypatch.setattr(table_module, "function_labels", lambda ev: relabelled.append(1) or labels(ev))

    table.append(log.append(CompileEvent(function="decode", location="gen.py:5", kind="recompile")))
    html = table_page_html(table)
    assert (len(keyed), len(relabelled), len(rendered)) == (1, 0, TABLE_ROWS)
    assert html.count("<tr class=") == TABLE_ROWS and ">10000</td>" in html
    assert table.range_text == "rows 1–200 of 10,001"

    table.sort_by("duration_s", descending=False)
    keyed.clear(), rendered.clear()
    table.page = 7
    table.append(log.append(CompileEvent(function="decode", location="gen.py:5", duration_s=5.05)))
    page = table.rows()
    assert (len(keyed), len(rendered)) == (1, TABLE_ROWS) and len(page) == TABLE_ROWS
    durations = [e.duration_s for e in table.page_events()]
    assert durations == sorted(durations)


# --------------------------------------------------------------------------- exports

HOSTILE_CELLS = ["=1+1", "+SUM(A1)", "-2", "@cmd", "=HYPERLINK(\"http://x\",\"y\")",
                 "a|b|c", "line one\nline two\r\nthree", "<script>alert(1)</script>",
                 "`code` and ``", "[link](http://evil)", "\x1b[31mred\x1b[0m", "plain"]


def hostile_rows() -> list[dict[str, str]]:
    return [{"seq": str(i), "function": cell, "reason": cell} for i, cell in enumerate(HOSTILE_CELLS)]


def test_csv_cells_cannot_run_as_formulas():
    text = table_csv(hostile_rows())
    parsed = list(csv.reader(io.StringIO(text)))
    assert parsed[0] == ["seq", "function", "reason"] and len(parsed) == len(HOSTILE_CELLS) + 1
    for cells, raw in zip(parsed[1:], HOSTILE_CELLS, strict=True):
        for cell in cells:
            assert not cell.startswith(("=", "+", "-", "@", "\t", "\r")), cell
        if raw.startswith(("=", "+", "-", "@")):
            assert cells[1] == "'" + raw
    assert parsed[7][1] == "line one\nline two\nthree"       # kept, quoted, no CR
    assert parsed[12][1] == "plain" and parsed[11][1] == "red"
    assert table_csv([]) == "" and table_csv([], columns=["seq"]) == "seq\n"


def test_markdown_table_cells_stay_in_their_cell_and_inert():
    text = table_markdown(hostile_rows())
    lines = text.splitlines()
    assert len(lines) == len(HOSTILE_CELLS) + 2
    assert lines[0] == "| \\# | function | reason |" and lines[1] == "| --- | --- | --- |"
    for line in lines[2:]:
        assert len(re.split(r"(?<!\\)\|", line)) == 5, line      # 3 cells between 4 pipes
        assert "<" not in line and ">" not in line and "\x1b" not in line
        assert not re.search(r"(?<!\\)[`\[\]]", line), line       # no code span, no link
        assert "](" not in line.replace("\\]", "")
    cells = [re.split(r"(?<!\\)\|", line)[2].strip() for line in lines[2:]]
    assert cells[0] == "'=1+1" and cells[2] == "'-2" and cells[3] == "'@cmd"
    assert cells[5] == "a\\|b\\|c" and cells[6] == "line one line two three"
    assert cells[7] == "&lt;script&gt;alert(1)&lt;/script&gt;"
    assert table_markdown([]) == ""


def test_markdown_of_a_table_page():
    table = EventTable(synthetic(10))
    text = table_markdown(table.rows())
    assert text.splitlines()[0].startswith("| \\# | time | function |")
    assert "forward (model.py:10)" in text and len(text.splitlines()) == 12


def test_advice_markdown_most_severe_first_and_escaped():
    advices = [Advice("Slow compiles", "took 30 s", "", "info", {"seconds": 30}),
               Advice(f"Bad {IMG}", "x `unbalanced ``code [a](http://evil) | y\n# heading",
                      "use `torch._dynamo.mark_dynamic(x, 1)`", "critical"),
               Advice("Recompiles", "17 graphs", "pad to 64", "warning")]
    text = advice_markdown(advices)
    headings = [line for line in text.splitlines() if line.startswith("#")]
    assert headings == ["### Critical: Bad &lt;img src=x onerror=alert(1)&gt;",
                        "### Warning: Recompiles", "### Info: Slow compiles"]
    assert "<" not in text and ">" not in text
    assert not re.search(r"(?<!\\)[`\[\]]", text)
    assert "\\# heading" in text and "**Fix:** use \\`torch.\\_dynamo.mark\\_dynamic(x, 1)\\`" in text
    assert "*Numbers:* seconds 30" in text and "**Fix:** pad to 64" in text
    odd = SimpleNamespace(title="t", detail="d", fix="", severity="<b>", numbers=None)
    assert advice_markdown([odd]).startswith("### Info: t")
    assert advice_markdown([]) == "No findings.\n"


# --------------------------------------------------------------------------- HTML

def test_page_html_escapes_hostile_values_and_keeps_fixed_classes():
    events = synthetic(4) + [
        CompileEvent(seq=4, function=IMG, location=IMG, kind="<b>evil</b>",  # type: ignore[arg-type]
                     changed='"><script>alert(1)</script>', reasons=["`x` " + IMG],
                     context="a\" onmouseover=\"alert(1)", neff_cache=IMG, rank=IMG),  # type: ignore[arg-type]
        CompileEvent(seq=5, function="f", kind=["first"], kernels=IMG)]  # type: ignore[arg-type]
    table = EventTable(events)
    html = table_page_html(table)
    low = html.lower()
    assert "<img" not in low and "<script" not in low and "`" not in html
    tags = parse(html)
    elements = [(tag, dict(attrs)) for tag, attrs in tags.tags]
    row_classes = set(KIND_CLASSES.values()) | {UNKNOWN_CLASS}
    for tag, attrs in elements:
        assert tag in {"div", "table", "thead", "tbody", "tr", "th", "td"}, tag
        assert set(attrs) <= {"class", "title", "data-sort"}, attrs
        for token in (attrs.get("class") or "").split():
            assert re.fullmatch(r"nk-[a-z-]+", token), token
        if tag == "th":
            assert attrs["data-sort"] in SORT_COLUMNS
        if tag == "tr" and "class" in attrs:
            assert attrs["class"] in row_classes
    rows = [attrs["class"] for tag, attrs in elements if tag == "tr" and "class" in attrs]
    assert rows[:2] == [UNKNOWN_CLASS, UNKNOWN_CLASS] and rows[2] == KIND_CLASSES[KINDS[3]]
    text = "".join(tags.text)
    assert IMG in text and "<b>evil</b>" in text and '"><script>alert(1)</script>' in text
    assert "neff_cache" in table.columns and "rank" in table.columns
    titles = [attrs.get("title") for _, attrs in elements if attrs.get("title")]
    assert "`x` " + IMG in titles


def test_page_html_header_sorting_and_the_plain_log_call():
    table = EventTable(synthetic(300))
    table.sort_by("duration_s", descending=False)
    table.page = 1
    html = table_page_html(table)
    assert 'data-sort="duration_s" class="nk-sorted-asc">seconds</th>' in html
    assert "rows 201–300 of 300, by seconds, ascending" in html
    assert events_table_html(table) == html
    assert "data-sort" not in table_page_html(table, sortable=False)
    legacy = events_table_html(CompileLog(synthetic(300)), limit=50)
    assert "data-sort" not in legacy and legacy.count("<tr class=") == 50
    assert "300 compile events, newest first; showing the last 50" in legacy
    assert legacy.index(">299</td>") < legacy.index(">250</td>")


def test_the_plain_text_shortcut_escapes_like_html_text():
    for value in [chr(c) for c in range(0x110)] + HOSTILE_CELLS + [IMG, "a&b", "x'y", "1.50", "—"]:
        assert html_module._cell_text(value) == html_text(value), repr(value)
