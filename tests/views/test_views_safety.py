"""Views are safe for any value a crafted compile log (or in-memory event) can hold.

A compile log travels between machines and people: every field of an event and of the header
may be hostile. Each HTML function, the dashboard widget, the Chrome trace and the text helpers
are fed markup breakers, quotes, backticks, newlines, bidi overrides and ANSI escapes; the output
must hold no tag or attribute the view did not write, only class names from a fixed set, and the
hostile text must still be shown (escaped), not dropped.
"""
from __future__ import annotations

import json
import math
import re
from pathlib import Path
from types import SimpleNamespace

import ipywidgets as w
import pytest

from helpers.html import Tags, parse
from neuronkit.advice.finding import Advice
from neuronkit.apps.dashboard.state import DashboardState
from neuronkit.events.event import KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_attr, html_text, spreadsheet_safe, strip_control, terminal_safe
from neuronkit.views import html as views_html
from neuronkit.views.chart_layout import KeyEntry
from neuronkit.views.chrome_trace import write_chrome_trace
from neuronkit.views.html import (
    KEY_FUNCTIONS,
    advice_html,
    chart_key_html,
    events_table_html,
    graph_counts_html,
    replay_note,
    status_html,
)
from neuronkit.widget import RecompileDashboard

IMG = '"><img src=x onerror=alert(1)>'
HOSTILE = [
    IMG,
    "'><img src=x onerror=alert(1)>",
    "</style><script>alert(1)</script>",
    "</td></tr></table><script>alert(1)</script><table><tr><td>",
    "`onmouseover=alert(1)` x=`",
    'a" onmouseover="alert(1)',
    "line one\nline two\r\n<img src=x onerror=alert(2)>",
    "\u202egnp.exe\u202c \u2066isolated\u2069",
    "\x1b[31mred\x1b[0m \x1b]0;title\x07 \x9b2J\x00nul",
    "&lt;img src=x onerror=alert(3)&gt;",        # already-escaped text must not unescape
]
ROW_CLASSES = {f"nk-{k.replace('_', '-')}" for k in KINDS} | {"nk-unknown"}
SEVERITY_CLASSES = {"nk-sev-critical", "nk-sev-warning", "nk-sev-info"}
STATUS_CLASSES = {"nk-status-info", "nk-status-busy", "nk-status-ok", "nk-status-error"}
ALLOWED_TAGS = {"style", "h3", "div", "span", "b", "i", "br", "pre", "details", "summary",
                "table", "thead", "tbody", "tr", "th", "td"}
ALLOWED_ATTRS = {"class", "title"}
CLASS_TOKEN = re.compile(r"^nk-[a-z0-9-]+$")
FORBIDDEN_CHARS = ("\x1b", "\x9b", "\x00", "\u202e", "\u202c", "\u2066", "\u2069", "\r")


def assert_inert(html: str) -> Tags:
    """No tag, attribute or class the view did not write; no raw payload; no control chars."""
    low = html.lower()
    for raw in ("<img", "<script", "<svg", "<iframe", "`"):
        assert raw not in low, (raw, html)
    assert low.count("</style") == low.count("<style>") <= 1, html     # only the view's STYLE
    for char in FORBIDDEN_CHARS:
        assert char not in html, (repr(char), html)
    parsed = parse(html)
    for tag, attrs in parsed.tags:
        assert tag in ALLOWED_TAGS, (tag, html)
        for name, value in attrs:
            assert name in ALLOWED_ATTRS, (tag, name, value, html)
            if name == "class":
                for token in (value or "").split():
                    assert CLASS_TOKEN.match(token), (token, html)
    return parsed


def classes_of(html: str, tag: str) -> list[set[str]]:
    return [set((dict(attrs).get("class") or "").split())
            for t, attrs in parse(html).tags if t == tag]


def shown(html: str) -> str:
    """The text a reader sees (entities decoded), and the title tooltips."""
    parsed = parse(html)
    titles = [v or "" for _, attrs in parsed.tags for n, v in attrs if n == "title"]
    return "".join(parsed.text) + "\n".join(titles)


def hostile_event(value, seq: int, kind="recompile") -> CompileEvent:
    return CompileEvent(seq=seq, compile_id=value, function=value, location=value,
                        backend=value, device=value, started_at=float(seq),
                        duration_s=1.5, changed=value, reasons=[value, value], kind=kind,
                        context=value, input_shapes={value: [1, value]})


def hostile_log() -> CompileLog:
    events = [hostile_event(v, i, kind=KINDS[i % len(KINDS)]) for i, v in enumerate(HOSTILE)]
    header = {"format": "neuronkit-compile-log", "version": 2, "description": IMG,
              "neuronkit": HOSTILE[2], "torch": HOSTILE[4], "torch_neuronx": HOSTILE[8],
              "device": IMG, "backend": HOSTILE[5]}
    return CompileLog(events, header=header)


# --------------------------------------------------------------------------- the helpers

def test_html_text_and_attr_escape_every_breaker():
    for value in HOSTILE:
        for out in (html_text(value), html_attr(value), html_attr(value, multiline=True)):
            assert not re.search(r"[<>\"'`]", out), out
            for char in FORBIDDEN_CHARS:
                assert char not in out
    assert html_text("a < b\nc") == "a &lt; b\nc"
    assert html_attr("a\nb\tc") == "a b c"
    assert html_attr("a\nb", multiline=True) == "a&#10;b"
    assert html_text("&lt;") == "&amp;lt;"                     # escaped once more, not decoded
    assert html_text(None) == "" and html_text(42) == "42"
    assert html_text("Grüße — 日本") == "Grüße — 日本"          # ordinary unicode untouched


def test_terminal_safe_strips_escapes_and_controls_but_keeps_lines():
    assert terminal_safe("\x1b[31mred\x1b[0m") == "red"
    assert terminal_safe("a\x1b]0;owned title\x07b") == "ab"           # OSC: set window title
    assert terminal_safe("a\x1b]8;;http://x\x1b\\link\x1b]8;;\x1b\\b") == "alinkb"  # hyperlink
    assert terminal_safe("a\x9b2Jb") == "ab"                            # 8-bit CSI
    assert terminal_safe("x\x1bPq#0;2;0;0;0#0~~\x1b\\y") == "xy"       # DCS (sixel)
    assert terminal_safe("keep\nlines\tand tabs") == "keep\nlines\tand tabs"
    assert terminal_safe("over\rwrite") == "over\nwrite"                # no line overwrite
    assert terminal_safe("bell\x07 nul\x00 del\x7f bs\x08") == "bell nul del bs"
    assert terminal_safe("\u202eevil\u202c \u2066x\u2069") == "evil x"   # no bidi reordering
    assert terminal_safe(None) == "" and terminal_safe(3.5) == "3.5"
    assert terminal_safe("Grüße — 日本 ✓") == "Grüße — 日本 ✓"
    assert strip_control("a\nb\tc", keep_newlines=False) == "a b c"


@pytest.mark.parametrize("cell", ["=1+1", "+1", "-1", "@SUM(A1)", "\t=1", "\r=1",
                                  "=HYPERLINK(\"http://x\",\"y\")", "\x00=1", "\u202e=1"])
def test_spreadsheet_safe_neutralises_formulas(cell):
    out = spreadsheet_safe(cell)
    assert out.startswith("'"), out
    assert not out.lstrip("'").startswith(("\x00", "\u202e"))


def test_spreadsheet_safe_leaves_plain_cells_alone():
    for cell in ("forward", "1.5", "input_ids dim 1: 17 -> 33", "", "a=b", "x-1"):
        assert spreadsheet_safe(cell) == cell
    assert spreadsheet_safe(-1) == "'-1"                                 # numbers as text too


# --------------------------------------------------------------------------- the HTML views

@pytest.mark.parametrize("kind", HOSTILE + ["nk-first", "first\"", "FIRST", "", None, 7,
                                            ["first"], "limit_hit extra"])
def test_event_table_row_class_comes_from_a_fixed_mapping(kind):
    log = CompileLog([hostile_event(IMG, 0, kind="first"), hostile_event(IMG, 1, kind=kind)])
    html = events_table_html(log)
    assert_inert(html)
    rows = classes_of(html, "tr")[1:]                   # the header row has no class
    assert len(rows) == 2 and all(len(c) == 1 and c <= ROW_CLASSES for c in rows), rows
    assert rows == [{"nk-unknown"}, {"nk-first"}]
    if isinstance(kind, str) and kind:
        assert strip_control(kind).replace("\n", "") in shown(html).replace("\n", "")


@pytest.mark.parametrize("kind", KINDS)
def test_event_table_known_kinds_keep_their_classes(kind):
    html = events_table_html(CompileLog([hostile_event("x", 0, kind=kind)]))
    assert classes_of(html, "tr")[1] == {f"nk-{kind.replace('_', '-')}"}


def test_event_table_escapes_every_field():
    log = hostile_log()
    html = events_table_html(log)
    assert_inert(html)
    text = shown(html)
    for value in HOSTILE:
        assert " ".join(strip_control(value).split()) in " ".join(text.split()), value
    assert "<img src=x onerror=alert(1)>" in text            # visible as text, not as a tag


def test_event_table_survives_non_numeric_and_odd_fields():
    """What a crafted log can put in numeric fields (the loader does not check their types)."""
    odd = CompileEvent(seq=IMG, started_at="<b>", duration_s=IMG, function=IMG, kind="recompile",
                       reasons=IMG, context=None, changed=7)
    nan = CompileEvent(seq=1, started_at=math.nan, duration_s=math.inf, function="f")
    floaty = CompileEvent(seq=2.5, started_at=3, duration_s=True, function="g", kernels=1.5,
                          kind="kernels")
    html = events_table_html(CompileLog([hostile_event(IMG, 0), odd, nan, floaty]))
    assert_inert(html)
    assert '<td class="nk-nowrap">2.5</td>' in html
    assert_inert(graph_counts_html(CompileLog([floaty, hostile_event(IMG, 3)])))
    assert "<img src=x onerror=alert(1)>" in shown(html)


def test_graph_counts_escape_function_names():
    html = graph_counts_html(hostile_log())
    assert_inert(html)
    assert "<img src=x onerror=alert(1)>" in shown(html)


def test_advice_escapes_text_and_maps_severity():
    items = [Advice(v, v, v, "warning") for v in HOSTILE]
    items.append(SimpleNamespace(title=IMG, detail=IMG, fix=IMG, severity=IMG))   # duck-typed
    items.append(SimpleNamespace(title=IMG, detail=IMG, fix="", severity=None))
    html = advice_html(items)
    assert_inert(html)
    sev = [c - {"nk-advice-item"} for c in classes_of(html, "div") if "nk-advice-item" in c]
    assert len(sev) == len(items) and all(c <= SEVERITY_CLASSES and len(c) == 1 for c in sev)
    assert sev[-1] == {"nk-sev-info"}
    assert "<img src=x onerror=alert(1)>" in shown(html)


def test_advice_of_a_hostile_log_is_escaped():
    from neuronkit.advice.diagnose import diagnose

    assert_inert(advice_html(diagnose(hostile_log())))


@pytest.mark.parametrize("value", HOSTILE)
def test_status_escapes_kind_text_and_detail(value):
    html = status_html(value, value, value)
    assert_inert(html)
    divs = [c for c in classes_of(html, "div") if any(t.startswith("nk-status") for t in c)]
    assert divs == [{"nk-status-error"}] or divs == [{"nk-status-info"}], divs
    assert "<span" in html and html.count("<span") == 1
    badge = parse(html).text[0]
    assert badge in views_html.STATUS_LABELS.values()


def test_status_known_kinds_keep_their_class_and_label():
    for kind, label in views_html.STATUS_LABELS.items():
        html = status_html(kind, "text")
        assert f'class="nk-status-{kind}"' in html and f">{label}</span>" in html


def test_replay_note_escapes_the_file_name_and_header():
    header = {"description": HOSTILE[6], "neuronkit": IMG, "torch": HOSTILE[3],
              "torch_neuronx": HOSTILE[7], "device": IMG}
    for source in ("/logs/" + IMG + ".jsonl", "/logs/a`b'c\".jsonl", HOSTILE[8]):
        html = replay_note(source, header)
        assert_inert(html)
        assert "<img src=x onerror=alert(1)>" in shown(html)
    odd = replay_note("x.jsonl", {"description": {"nested": IMG}, "torch": [IMG]})
    assert_inert(odd)


def test_escape_helper_is_safe_in_attributes():
    for value in HOSTILE:
        out = views_html.escape(value)
        assert not re.search(r"[<>\"'`]", out), out


# --------------------------------------------------------------------------- the widget

def all_html(widget) -> list[str]:
    """The value of every HTML widget inside ``widget`` (what the browser puts in innerHTML)."""
    out = []
    if isinstance(widget, (w.HTML, w.HTMLMath)):
        out.append(widget.value)
    for child in getattr(widget, "children", ()):
        out.extend(all_html(child))
    return out


def all_labels(widget) -> list[str]:
    """Dropdown labels, tooltips and descriptions (set as text by ipywidgets, kept clean)."""
    out = []
    if isinstance(widget, w.Dropdown):
        out.extend(widget._options_labels)
    for name in ("tooltip", "description", "placeholder"):
        value = getattr(widget, name, None)
        if isinstance(value, str):
            out.append(value)
    for child in getattr(widget, "children", ()):
        out.extend(all_labels(child))
    return out


def check_dashboard(dash: RecompileDashboard) -> str:
    values = all_html(dash)
    assert len(values) >= 8
    for value in values:
        assert_inert(value)
    for label in all_labels(dash):
        for char in FORBIDDEN_CHARS + ("\n",):
            assert char not in label, (repr(char), label)
    return "\n".join(shown(v) for v in values)


def test_replayed_hostile_log_renders_inert(tmp_path):
    path = hostile_log().save(tmp_path / (IMG.replace("/", "") + ".jsonl"))
    dash = RecompileDashboard.from_log(path)
    try:
        text = check_dashboard(dash)
        assert "<img src=x onerror=alert(1)>" in text          # the payload is shown, as text
        assert IMG in shown(dash.chart_key.value)                # the chart's key, as HTML
        rows = classes_of(dash.events_table.value, "tr")[1:]
        assert rows and all(c <= ROW_CLASSES for c in rows)
        assert dash.state.device == IMG                          # the value itself is kept
        assert "\x1b" not in "".join(dash.backend._options_labels)
    finally:
        dash.close()


def test_in_memory_hostile_kind_renders_inert():
    """Events built in memory skip any loader validation: the widget must hold on its own."""
    log = hostile_log()
    log.events += [hostile_event(v, 100 + i, kind=v) for i, v in enumerate(HOSTILE)]
    dash = RecompileDashboard(state=DashboardState(log=log, source="/tmp/" + IMG))
    try:
        check_dashboard(dash)
        rows = classes_of(dash.events_table.value, "tr")[1:]
        assert sum(c == {"nk-unknown"} for c in rows) == len(HOSTILE)
        assert all(c <= ROW_CLASSES for c in rows)
    finally:
        dash.close()


def test_every_widget_text_is_escaped():
    """Status, device note, placement, generated text and run summary, as the state sets them."""
    dash = RecompileDashboard(state=DashboardState(log=hostile_log(), source="x.jsonl"))
    s = dash.state
    try:
        for value in HOSTILE:
            s.device_note = value
            s.placement, s.placement_ok = value, False
            s.generated_text, s.run_summary = value, value
            s.error_detail = value
            s.status = value
            check_dashboard(dash)
            assert classes_of(dash.placement.value, "pre") == [{"nk-bad"}]
            seen = " ".join(shown(dash.output_text.value).split())
            assert " ".join(strip_control(value).split()) in seen     # shown, as text
        s.status_kind = "error"
        check_dashboard(dash)
    finally:
        dash.close()


def test_hostile_device_and_backend_labels_are_clean_but_values_kept():
    log = hostile_log()
    log.header["device"] = "\x1b[2Jneuron\u202e\nx"
    log.header["backend"] = "ne\x00uron\r\n"
    dash = RecompileDashboard(state=DashboardState(log=log, source="x.jsonl"))
    try:
        check_dashboard(dash)
        assert dash.device.value == "\x1b[2Jneuron\u202e\nx"    # linked to the state unchanged
        assert dash.device._options_labels == ("neuron x",)
        assert dash.backend._options_labels == ("neuron",)
    finally:
        dash.close()


def test_a_log_the_chart_cannot_draw_still_shows_table_and_status(monkeypatch):
    """A chart that fails to draw (whatever the log holds) must not stop the replay."""
    import neuronkit.apps.dashboard.widget as widget

    def broken(log, **options):
        raise ValueError("cannot draw this")

    monkeypatch.setattr(widget, "dashboard_chart", broken)
    log = CompileLog([CompileEvent(seq=0, function="$\\frac{$" + IMG, started_at=1.0),
                      CompileEvent(seq=1, function="$\\frac{$" + IMG, started_at=2.0,
                                   kind="recompile")])
    dash = RecompileDashboard(state=DashboardState(log=log, source="x.jsonl"))
    try:
        check_dashboard(dash)
        assert len(classes_of(dash.events_table.value, "tr")) == 3
        assert dash.state.status_kind == "error" and "nk-status-error" in dash.status.value
    finally:
        dash.close()


def test_a_maths_like_name_draws_as_plain_text():
    """matplotlib reads ``$...$`` as mathtext: the chart shows a crafted name as text."""
    log = CompileLog([CompileEvent(seq=0, function="$\\frac{$" + IMG, started_at=1.0)])
    dash = RecompileDashboard(state=DashboardState(log=log, source="x.jsonl"))
    try:
        assert dash.state.status_kind != "error" and dash.chart.value
    finally:
        dash.close()


def test_repr_of_a_replay_holds_no_terminal_escapes():
    log = CompileLog([CompileEvent(function="f")])
    dash = RecompileDashboard(state=DashboardState(log=log, source="/x/\x1b]0;owned\x07a\x1b[2J.jsonl"))
    try:
        assert repr(dash) == "<RecompileDashboard: replay of a.jsonl>"
    finally:
        dash.close()


# --------------------------------------------------------------------------- the Chrome trace

def _no_constants(name):
    raise AssertionError(f"non-standard JSON constant {name} in the trace")


def test_chrome_trace_is_strict_json_without_control_characters(tmp_path):
    log = hostile_log()
    log.events.append(CompileEvent(seq=50, function=IMG, kind=IMG, rank="<rank>",
                                   started_at=math.nan, duration_s=math.inf,
                                   neff_compile_s=math.nan, context="\x1b[31m"))
    log.events.append(CompileEvent(seq=51, function="f", kind="first", rank=1, started_at=2.0,
                                   duration_s=1.0, neff_compile_s=3.0, neff_cache=IMG))
    raw = write_chrome_trace(log, tmp_path / "t.json").read_text(encoding="utf-8")
    assert raw.isascii()
    assert "<" not in raw and ">" not in raw                        # safe to embed in a page
    assert not re.search(r"[\x00-\x1f\x7f]", raw)
    trace = json.loads(raw, parse_constant=_no_constants)["traceEvents"]

    def strings(obj):
        if isinstance(obj, str):
            yield obj
        elif isinstance(obj, dict):
            for k, v in obj.items():
                yield k
                yield from strings(v)
        elif isinstance(obj, list):
            for v in obj:
                yield from strings(v)

    for event in trace:
        assert isinstance(event["pid"], int) and isinstance(event["tid"], int)
        for key in ("ts", "dur"):
            if key in event:
                assert isinstance(event[key], (int, float)) and math.isfinite(event[key])
        assert not re.search(r"[\x00-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", event["name"])
        for text in strings(event.get("args", {})):
            assert not re.search(r"[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]", text)
    names = [e["name"] for e in trace if e.get("cat") == "compile"]
    assert any("<img src=x onerror=alert(1)>" in n for n in names)  # kept, JSON-escaped


def test_chrome_trace_is_built_only_by_json_dumps():
    """No string concatenation of JSON: the module writes what json.dumps returns."""
    source = Path(views_html.__file__).with_name("chrome_trace.py").read_text()
    assert "json.dumps(" in source
    assert not re.search(r"""['"]\s*[{\[]\s*['"]?\s*\+|write\(\s*f['"]""", source)


def test_chart_key_keeps_the_heaviest_functions_and_every_mark_with_fixed_colour_classes():
    functions = [KeyEntry(f"f{i} {IMG}", "#1f77b4" if i % 2 else "red;background:url(x)",
                          function=True, weight=i) for i in range(KEY_FUNCTIONS + 3)]
    marks = [KeyEntry("limit hit", "#d62728", "X"), KeyEntry("recompile", "#555555", filled=False)]
    html = chart_key_html(functions + marks)
    assert_inert(html)
    text = shown(html)
    assert "f0 " not in text and "f1 " not in text and "f2 " not in text  # the lightest cut
    assert f"f{KEY_FUNCTIONS + 2} {IMG}" in text and "+ 3 more" in text
    assert text.index("f3 ") < text.index("f4 ") < text.index("+ 3 more") < text.index("limit hit")
    assert "✖" in text and "○" in text  # the marks as the chart draws them
    spans = classes_of(html, "span")
    assert {"nk-key-c0"} < spans[0] and {"nk-key-c15"} < spans[1]  # unknown colour: grey
