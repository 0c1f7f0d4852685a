"""A hostile log does not stop a view: one field of many megabytes (a reason, a function name, a
place, what changed, a context, an input name, an op name, header fields) costs each view what a
short one does. Every view reads such a field's start and says how long it was
(``… (20,000,000 chars)``); ``--json`` keeps the whole value.

Each view's CPU time (not wall: other work on a shared machine does not count) is held to a
generous bound, and what it writes to a size that does not grow with the field. Before the
fix a 20 MB reason kept ``neuronkit report`` busy for minutes (textwrap of a finding quoting it),
and the dashboard, watch and the Chrome trace escaped or wrapped every long field whole.
"""
from __future__ import annotations

import contextlib
import io
import json
import time
from pathlib import Path
from typing import Any, Callable

import ipywidgets as w
import pytest
from rich.console import Console

from neuronkit.advice.diagnose import diagnose
from neuronkit.advice.excerpts import (
    HEAD_CHARS,
    LONG_CHARS,
    bounded_event,
    bounded_events,
    cut_long,
    excerpt,
)
from neuronkit.apps.cli import main
from neuronkit.apps.watch import final_report, watch
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.follow import follow
from neuronkit.views.charts import png_bytes, timeline
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.html import advice_html, events_table_html, graph_counts_html, replay_note
from neuronkit.views.table import EventTable
from neuronkit.views.table_export import table_csv, table_markdown
from neuronkit.views.text import format_report, format_summary
from neuronkit.widget import RecompileDashboard

CPU_S = 5.0  # the most CPU seconds a view may take (the fixed views take well under 1 s)
MOST_BYTES = 300_000  # the most a text or HTML view writes for this small log, whatever its fields
FIELDS = ("reasons", "function", "location", "changed", "context", "input", "ops", "header")


def filler(size: int) -> str:
    """A guard-like text of ``size`` characters and no space: the worst case of a wrap."""
    unit = "L['self'].layers[0].size()[0]==8;"
    return (unit * (size // len(unit) + 1))[:size]


def hostile_log(path: Path, size: int, fields: tuple[str, ...] = FIELDS) -> Path:
    """A small log with one event per hostile field of ``fields`` (each ``size`` characters): a
    recompile without shapes whose reason a finding quotes, a new function, a place, what
    changed, a context, an input name, eager kernels with an op name; and a hostile header (its
    description and device) for "header"."""
    big = filler(size)
    normal = {"function": "forward", "location": "/m.py:10", "backend": "eager",
              "device": "cpu", "duration_s": 0.5, "kind": "recompile", "context": "generate",
              "input_shapes": {"input_ids": [1, 8]}, "changed": "input_ids dim 1: 8 -> 9",
              "reasons": ["tensor 'input_ids' size mismatch at index 1. expected 8, actual 9"]}
    hostile: dict[str, dict[str, Any]] = {
        "reasons": {"reasons": [big], "input_shapes": {}, "changed": ""},
        "function": {"function": big}, "location": {"location": big},
        "changed": {"changed": big}, "context": {"context": big},
        "input": {"input_shapes": {big: [1, 9]}},
        "ops": {"kind": "kernels", "kernels": 1, "ops": {big: 1}, "reasons": [], "changed": ""}}
    header = {"description": big, "device": big} if "header" in fields else {}
    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 3, **header})
    log.append(CompileEvent(**{**normal, "kind": "first", "reasons": [], "changed": "",
                               "started_at": 100.0}))
    for i, field in enumerate(f for f in fields if f != "header"):
        log.append(CompileEvent(**{**normal, "started_at": 101.0 + i, **hostile[field]}))
    log.save(path)
    return path


def _widget_texts(widget: Any) -> list[str]:
    """What a widget tree sends the browser as text: HTML values and option labels."""
    out, stack = [], [widget]
    while stack:
        item = stack.pop()
        if isinstance(item, (w.HTML, w.Text, w.Label)):
            out.append(item.value)
        out += [str(label) for label in getattr(item, "_options_labels", ())]
        stack.extend(getattr(item, "children", ()))
    return out


def _report(path: Path, *args: str) -> str:
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["report", str(path), *args]) == 0
    return out.getvalue()


def _watch(path: Path) -> str:
    console = Console(file=io.StringIO(), width=120)
    watch(path, console=console, once=True)
    follower = follow(path)
    follower.poll()
    return console.file.getvalue() + final_report(follower)


def views(path: Path, out: Path) -> dict[str, Callable[[], str]]:
    """Each view of the log at ``path``, as a call that returns what it writes (text)."""
    def png() -> str:
        return f"{len(png_bytes(timeline(CompileLog.load(path))))} bytes of PNG"

    def trace() -> str:
        return write_chrome_trace(CompileLog.load(path), out / "trace.json").read_text()

    def html() -> str:
        log = CompileLog.load(path)
        return (events_table_html(log) + graph_counts_html(log) + advice_html(diagnose(log))
                + replay_note(str(path), log.header))

    def exports() -> str:
        rows = EventTable(CompileLog.load(path)).all_rows()
        return table_csv(rows) + table_markdown(rows)

    return {"report": lambda: _report(path), "summary": lambda: format_summary(path),
            "png": png, "trace": trace, "html": html, "exports": exports,
            "dashboard": lambda: "".join(_widget_texts(RecompileDashboard.from_log(path))),
            "watch": lambda: _watch(path)}


def check_views(path: Path, out: Path, size: int,
                fields: tuple[str, ...] = FIELDS) -> dict[str, float]:
    """Every view of the hostile log at ``path`` (``hostile_log`` of ``fields``): within
    ``CPU_S``, its text bounded, the cut said; ``--json`` with every value whole. Returns each
    view's CPU seconds."""
    marker = f"({size:,} chars)"
    seconds = {}
    for name, view in views(path, out).items():
        start = time.process_time()
        text = view()
        seconds[name] = time.process_time() - start
        assert seconds[name] < CPU_S, (name, seconds[name])
        assert len(text) < MOST_BYTES, (name, len(text))
        assert name == "png" or marker in text, name
    start = time.process_time()
    data = json.loads(_report(path, "--json", "--limit", "all"))
    seconds["json"] = time.process_time() - start
    assert seconds["json"] < CPU_S
    big = filler(size)
    for field in (f for f in fields if f != "header"):  # each hostile value once, whole
        assert sum(_holds(e, field, big) for e in data["events"]) == 1, field
    return seconds


def _holds(event: dict[str, Any], field: str, big: str) -> bool:
    """Whether a ``--json`` event holds ``big`` whole in ``field`` (of ``hostile_log``)."""
    if field in ("input", "ops"):
        return list(event["input_shapes" if field == "input" else "ops"]) == [big]
    return event[field] == ([big] if field == "reasons" else big)


def test_every_view_of_a_log_with_megabyte_fields_is_bounded_and_says_the_cut(tmp_path: Path) -> None:
    size = 1_000_000
    check_views(hostile_log(tmp_path / "hostile.jsonl", size), tmp_path, size)


@pytest.mark.slow
def test_every_view_of_a_20_mb_field_takes_seconds_not_minutes(tmp_path: Path) -> None:
    """The issue's log: 20 MB fields (a reason among them) made ``neuronkit report`` run for
    more than 5 minutes; each view now takes well under 5 s of CPU."""
    size = 20_000_000  # the fields that cost most before (the others are checked above)
    fields = ("reasons", "function", "location")
    seconds = check_views(hostile_log(tmp_path / "hostile.jsonl", size, fields), tmp_path, size,
                          fields)
    assert max(seconds.values()) < CPU_S, seconds


# -- the pieces ----------------------------------------------------------------------------------

def test_excerpt_keeps_a_short_text_and_cuts_a_long_one_saying_its_length() -> None:
    assert excerpt("short") == "short"
    cut = excerpt("x" * 20_000_000)
    assert len(cut) == HEAD_CHARS and cut.endswith("x… (20,000,000 chars)")
    assert excerpt("abc", most=30, whole=5000) == "abc… (5,000 chars)"  # read from a longer one
    assert len(excerpt("abcdefghij" * 5, most=20)) == 20


def test_cut_long_leaves_every_recorded_length_whole() -> None:
    whole = "a" * LONG_CHARS
    assert cut_long(whole) is whole and cut_long(None) is None and cut_long(7) == 7
    assert cut_long(whole + "a") == excerpt(whole + "a")


def test_bounded_events_copies_only_the_events_with_a_long_field() -> None:
    big = "y" * (LONG_CHARS + 1)
    plain = CompileEvent(function="f", reasons=["r"], input_shapes={"x": [1]})
    events = [plain, CompileEvent(function=big, reasons=["r", big], input_shapes={big: [1]},
                                  ops={big: 2}, context=big, metrics={"m": big})]
    assert bounded_events([plain]) == [plain] and bounded_events(events)[0] is plain
    cut = bounded_events(events)[1]
    assert cut is not events[1] and events[1].function == big  # the event itself is kept whole
    assert (cut.function, cut.context, cut.reasons) == (excerpt(big), excerpt(big), ["r", excerpt(big)])
    assert list(cut.input_shapes) == list(cut.ops) == [excerpt(big)]
    assert cut.metrics == {"m": big} and bounded_event(plain) is plain


def test_an_in_memory_event_of_any_type_is_bounded_where_it_holds_text() -> None:
    odd = CompileEvent(function=3, reasons="no list", location="z" * (LONG_CHARS + 5))  # type: ignore[arg-type]
    cut = bounded_events([odd])[0]
    assert cut.function == 3 and cut.reasons == "no list" and cut.location == excerpt(odd.location)


def test_the_event_table_tooltip_keeps_10_kb_of_the_reasons() -> None:
    """The reason cell's tooltip holds the reasons whole up to ``LONG_CHARS``, then says the
    cut: a 20 MB reason makes no 20 MB page."""
    short = ["guard one", "guard two"]
    log = CompileLog([CompileEvent(function="f", kind="recompile", reasons=short),
                      CompileEvent(function="f", kind="recompile", reasons=["a" * 20_000_000])])
    page = events_table_html(log)
    assert 'title="guard one&#10;guard two"' in page
    assert "a… (20,000,000 chars)" in page and len(page) < 3 * LONG_CHARS


def test_a_report_given_whole_rows_names_a_long_function_by_its_start() -> None:
    """``neuronkit report`` passes the summary of the log as loaded: rows naming a 20 MB function
    whole are made again from what the report shows."""
    log = CompileLog([CompileEvent(function="g" * 2_000_000, kind="first", started_at=1.0)])
    text = format_report(log, summary=log.summary(), advice=[])
    assert "(2,000,000 chars)" in text and len(text) < 20_000
