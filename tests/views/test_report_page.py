"""``report_page``: one self-contained HTML page of a compile log (``neuronkit report --html``).

A crafted log gives a page with no live markup (only the tags and attributes the page writes,
every payload shown as text), nothing that fetches (no script, images only inline PNGs, a CSP
that forbids the rest), and the page stays bounded whatever the log's length: rows, ranks and
functions are capped and what is left out is said. (Chromium: tests/apps/test_report_html_browser.py.)
"""
from __future__ import annotations

import base64
import re
from types import SimpleNamespace
from typing import Any

import pytest

from helpers.html import parse
from neuronkit.advice.finding import Advice
from neuronkit.events.event import KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_text
from neuronkit.views.charts import PNG_SIGNATURE
from neuronkit.views.report_page import (
    CSP,
    MOST_FUNCTIONS,
    MOST_RANKS,
    MOST_ROWS,
    report_page,
    write_report_page,
)

PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    '"><img src=x onerror="window.__pwned = 2">',
    "'><svg onload=window.__pwned=3>",
    "</style><script>window.__pwned = 4</script>",
    "</title><script>window.__pwned = 5</script>",
    '" onerror="window.__pwned = 6',
    "javascript:window.__pwned = 7",
    '<a href="javascript:window.__pwned = 8">x</a>',
    '<img src="http://127.0.0.1:9/leak.png">',
    '<link rel="stylesheet" href="http://127.0.0.1:9/leak.css">',
    '<meta http-equiv="refresh" content="0; url=http://127.0.0.1:9/">',
    '<base href="http://127.0.0.1:9/">',
    "`onmouseover=window.__pwned=9` x=`",
    "</td></tr></table><script>window.__pwned = 10</script>",
    "\u202egnp.exe\u202c \x1b[31mred\x1b[0m",
]
# every tag and attribute the page itself writes
TAGS = {"html", "head", "meta", "title", "style", "body", "div", "h1", "h2", "table", "thead",
        "tbody", "tr", "th", "td", "b", "i", "span", "img"}
ATTRS = {"html": {"lang"}, "meta": {"charset", "http-equiv", "content", "name"},
         "img": {"class", "alt", "src"}}
SAFE_FRAGMENT = '<div class="nk-muted">run A: 3 graphs, run B: 5 graphs</div>'
CLASS_TOKEN = re.compile(r"^nk-[a-z0-9-]+$")
DATA_PNG = re.compile(r"^data:image/png;base64,([A-Za-z0-9+/]+=*)$")


def hostile_log() -> CompileLog:
    """A log whose every text field (and the header's) holds a payload; two ranks."""
    events = []
    for i, value in enumerate(PAYLOADS):
        events.append(CompileEvent(
            seq=i, compile_id=value, function=value, location=value, backend=value,
            device=value, started_at=100.0 + i, duration_s=1.5, changed=value,
            reasons=[value, value], kind=KINDS[i % len(KINDS)] if i % 3 else value,
            context=value, input_shapes={value: [1, value]}, rank=i % 2,
            neff_compile_s=2.0 if i % 2 else None, neff_cache=value if i % 4 == 1 else None))
    header = {"format": "neuronkit-compile-log", "version": 2, "device": PAYLOADS[0],
              "backend": PAYLOADS[1], "neuronkit": PAYLOADS[3], "torch": PAYLOADS[4],
              "torch_neuronx": PAYLOADS[6], "transformers": PAYLOADS[9],
              "description": PAYLOADS[11]}
    log = CompileLog(events, header=header)
    log.wall_time_s = 60.0
    return log


def hostile_advice() -> list[Any]:
    """A finding of crafted text, and one built by hand whose severity is a payload too."""
    return [Advice(severity="critical", title=PAYLOADS[0], detail=PAYLOADS[1], fix=PAYLOADS[8]),
            SimpleNamespace(severity=PAYLOADS[5], title=PAYLOADS[2], detail=PAYLOADS[7],
                            fix=PAYLOADS[12])]


def hostile_page() -> str:
    return report_page(hostile_log(), advice=hostile_advice(), title=PAYLOADS[4],
                       extra_sections=[(PAYLOADS[3], SAFE_FRAGMENT)])


def assert_inert(page: str) -> list[str]:
    """Only the tags and attributes the page writes, classes from its fixed names, images only
    inline PNGs, the CSP as written; returns the text a reader sees (entities decoded)."""
    parsed = parse(page)
    metas = []
    for tag, attrs in parsed.tags:
        assert tag in TAGS, tag
        for name, value in attrs:
            assert name in ATTRS.get(tag, {"class", "title"}), (tag, name, value)
            if name == "class":
                assert all(CLASS_TOKEN.match(t) for t in (value or "").split()), value
            if name == "src":
                match = DATA_PNG.match(value or "")
                assert match, value[:80]
                assert base64.b64decode(match.group(1)).startswith(PNG_SIGNATURE)
        if tag == "meta":
            metas.append(dict(attrs))
    assert {"http-equiv": "Content-Security-Policy", "content": CSP} in metas
    assert "default-src 'none'" in CSP and "img-src data:" in CSP
    low = page.lower()
    assert low.count("<style") == low.count("</style") == 2  # views.html's STYLE and the page's
    assert "<script" not in low and "\x1b" not in page and "\u202e" not in page
    return parsed.text


def test_a_crafted_log_gives_a_page_with_no_live_markup():
    page = hostile_page()
    text = "".join(assert_inert(page))
    shown = text + " ".join(v or "" for _, attrs in parse(page).tags for n, v in attrs
                            if n == "title")
    for payload in PAYLOADS[:-1]:  # each shown as the text it is (not dropped)
        assert payload in shown, payload
    assert "gnp.exe red" in shown  # bidi overrides and escape sequences stripped, text kept
    # the extra section (already-safe HTML) is in the page as it was given, its heading escaped
    assert SAFE_FRAGMENT in page and f"<h2>{html_text(PAYLOADS[3])}</h2>" in page


def test_the_page_holds_header_advice_ranks_summary_events_and_charts():
    log = CompileLog([CompileEvent(function="forward", kind="first" if i == 0 else "recompile",
                                   started_at=10.0 + i, duration_s=2.0, rank=i % 2,
                                   neff_compile_s=30.0, neff_cache="compiled",
                                   input_shapes={"input_ids": [1, 8 * (i + 1)]})
                      for i in range(4)],
                     header={"device": "neuron", "backend": "neuron", "torch": "2.9.0",
                             "torch_neuronx": "fake (tests/neuron_fake)", "synthetic": True})
    log.wall_time_s = 200.0
    page = report_page(log)
    text = " ".join(assert_inert(page))
    for heading in ("Advice", "Per rank", "Per function", "Compile events", "Charts"):
        assert f"<h2>{heading}</h2>" in page
    assert "SYNTHETIC, not measured" in text and "torch 2.9.0" in text
    assert "8.00 s Dynamo compile + 120.0 s NEFF builds" in text and "32.0%" in text
    assert "ranks 0,1" in " ".join(text.split())  # the busiest rank's 64 s of 200 s wall
    assert page.count('class="nk-chart"') == 2
    # per rank: 2 events each, 4 s Dynamo + 60 s NEFF
    assert re.search(r"<td>0</td><td class=\"nk-num\">2</td>.*?<td class=\"nk-num\">64\.00</td>",
                     page)
    assert "No findings yet." not in text  # diagnose ran: its findings are there


def test_an_empty_log_and_an_old_log_render():
    page = report_page(CompileLog())
    text = " ".join(assert_inert(page))
    assert "no compile events" in text and "unknown" in text


def test_a_100k_event_log_gives_a_bounded_page():
    events = [CompileEvent(seq=i, function=f"fn{i % 7}", kind="recompile", started_at=float(i),
                           duration_s=0.5, reasons=[f"size mismatch at index 1. expected {i}"],
                           context=f"step {i}") for i in range(100_000)]
    log = CompileLog(events)
    page = report_page(log, advice=[], limit=500)
    assert page.count('<tr class="nk-recompile">') == 500
    assert "99500 earlier event(s) not shown" in page
    assert len(page.encode()) < 1_500_000, len(page)
    every = report_page(log, advice=[], limit=None)  # "all": still bounded
    assert every.count('<tr class="nk-recompile">') == MOST_ROWS
    assert f"{100_000 - MOST_ROWS} earlier event(s) not shown" in every
    assert "step 99999" in page and "step 99499" not in page  # the newest ones


def test_many_ranks_and_functions_are_capped_and_said():
    n = max(MOST_RANKS, MOST_FUNCTIONS) + 50
    log = CompileLog([CompileEvent(function=f"fn{i}", kind="first", started_at=float(i),
                                   duration_s=1.0 + i, rank=i) for i in range(n)])
    page = report_page(log, advice=[], limit=0)
    assert f"{n - MOST_RANKS} more rank(s) not shown" in page
    assert f"{n - MOST_FUNCTIONS} more function(s) not shown" in page
    assert f"<td>fn{n - 1}</td>" in page and "<td>fn0</td>" not in page  # the costliest kept
    assert f"{n} event(s) not shown (limit 0)" in page


def test_write_report_page_makes_folders_and_writes_nothing_when_it_fails(tmp_path,
                                                                          monkeypatch):
    out = write_report_page(hostile_log(), tmp_path / "a" / "b" / "report.html", advice=[])
    assert out.read_text(encoding="utf-8").startswith("<!DOCTYPE html>")
    from neuronkit.views import report_page as module

    def broken(*args, **kwargs):
        raise RuntimeError("chart failed")

    monkeypatch.setattr(module, "timeline", broken)
    with pytest.raises(RuntimeError):
        write_report_page(hostile_log(), tmp_path / "c" / "report.html", advice=[])
    assert not (tmp_path / "c").exists()


@pytest.mark.parametrize("field", ["reasons", "function", "context", "description"])
def test_a_20_mb_field_is_read_by_its_start(field):
    big = "<x>" * 7_000_000
    fields: dict[str, Any] = {"function": "f", "kind": "recompile", "started_at": 1.0}
    header = {"description": big} if field == "description" else {}
    if field != "description":
        fields[field] = [big] if field == "reasons" else big
    page = report_page(CompileLog([CompileEvent(**fields)] * 3, header=header))
    assert len(page) < 1_000_000 and "(21,000,000 chars)" in page
    assert_inert(page)
