"""``neuronkit report LOG --html PATH``: the page written, and the page in Chromium.

In Chromium a crafted log's page runs no script and fetches nothing (no request but the file
itself), with its Content-Security-Policy and without it (the escaping alone holds); a control
page with one payload left unescaped shows the checks do catch a payload that runs. A 100k-event
log's page opens (its time is measured by bench/html_report.py, not asserted here).
"""
from __future__ import annotations

import importlib.util
import os
import time
from pathlib import Path

import pytest

from helpers.browser import CHROMIUM, CHROMIUM_ARGS, REQUIRE_ENV, wait_for_chromium_install
from neuronkit.apps.cli import main
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.safe import html_attr, html_text
from neuronkit.views.report_page import CSP, report_page

PAYLOADS = [
    "<script>window.__pwned = 1</script>",
    '"><img src=x onerror="window.__pwned = 2">',
    "'><svg onload=window.__pwned=3>",
    "</style><script>window.__pwned = 4</script>",
    "</title><script>window.__pwned = 5</script>",
    '" onmouseover="window.__pwned = 6" x="',
    "javascript:window.__pwned = 7",
    '<img src="http://127.0.0.1:9/leak.png">',
    '<link rel="stylesheet" href="http://127.0.0.1:9/leak.css">',
    '<meta http-equiv="refresh" content="0; url=http://127.0.0.1:9/">',
    "</td></tr></table><script>window.__pwned = 8</script>",
]


def require_chromium() -> None:
    """Skip without Chromium or Playwright (fail instead with NEURONKIT_REQUIRE_BROWSER=1): a
    file page needs no server package."""
    wait_for_chromium_install()
    missing = [f"{CHROMIUM} not found"] if not os.access(CHROMIUM, os.X_OK) else []
    missing += ["python package 'playwright'"] if importlib.util.find_spec("playwright") is None \
        else []
    if missing:
        if os.environ.get(REQUIRE_ENV) == "1":
            pytest.fail("browser test needs: " + "; ".join(missing))
        pytest.skip("browser test needs: " + "; ".join(missing))


def write_log(path: Path, values: list[str]) -> CompileLog:
    """A log on disk whose every text field holds one of ``values``; two ranks."""
    header = {"format": "neuronkit-compile-log", "version": 2, "device": values[0],
              "backend": values[1 % len(values)], "torch": values[2 % len(values)],
              "description": values[-1]}
    log = CompileLog(header=header, path=path)
    for i, value in enumerate(values):
        log.append(CompileEvent(function=value, location=value, compile_id=f"0/{i}",
                                started_at=10.0 + i, duration_s=1.0, changed=value,
                                reasons=[value], kind="first" if i == 0 else "recompile",
                                context=value, rank=i % 2, input_shapes={"x": [1, i + 1]}))
    return log


def open_page(page, url: str) -> list[str]:
    """Open ``url`` until load, hover every cell with a tooltip (an injected handler would fire),
    give errors a moment; returns every request the page made."""
    requests: list[str] = []
    page.on("request", lambda request: requests.append(request.url))
    page.goto(url, wait_until="load", timeout=30_000)
    for cell in page.locator("td[title]").all()[:20]:
        cell.hover()
    page.wait_for_timeout(500)
    return requests


@pytest.mark.slow
@pytest.mark.browser
def test_a_crafted_logs_page_runs_no_script_and_fetches_nothing_in_chromium(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    log = write_log(tmp_path / "crafted.jsonl", PAYLOADS)
    written = report_page(log, title=PAYLOADS[4], extra_sections=[(PAYLOADS[3], "<b>diff</b>")])
    csp_meta = f'<meta http-equiv="Content-Security-Policy" content="{html_attr(CSP)}">'
    assert csp_meta in written
    bare = written.replace(csp_meta, "")  # the escaping alone, without the CSP's net
    # control: one payload left as markup (and no CSP) does run and fetch: the checks can fail
    control = bare.replace(html_text(PAYLOADS[1]), PAYLOADS[1], 1).replace(
        html_text(PAYLOADS[7]), PAYLOADS[7], 1)
    pages = {}
    for name, text in (("written", written), ("bare", bare), ("control", control)):
        pages[name] = tmp_path / f"{name}.html"
        pages[name].write_text(text, encoding="utf-8")
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for name in ("written", "bare"):
                page = browser.new_page()
                url = pages[name].resolve().as_uri()
                assert open_page(page, url) == [url], name
                assert page.evaluate("() => window.__pwned") is None, name
                body = page.locator("body").inner_text()
                for payload in (PAYLOADS[0], PAYLOADS[7], PAYLOADS[10]):  # shown as text
                    assert payload in body, (name, payload)
                assert page.title() == PAYLOADS[4]
                # markup put in by hand: the CSP blocks its handler and its fetch; without it,
                # the same markup runs (what the escaping keeps out)
                page.evaluate("() => document.body.insertAdjacentHTML('beforeend', "
                              "'<img src=http://127.0.0.1:9/late.png onerror=window.__late=1>')")
                page.wait_for_timeout(1000)
                late = page.evaluate("() => window.__late")
                assert late == (None if name == "written" else 1), name
                page.close()
            page = browser.new_page()
            url = pages["control"].resolve().as_uri()
            requests = open_page(page, url)
            assert page.evaluate("() => window.__pwned") == 2
            assert "http://127.0.0.1:9/leak.png" in requests
        finally:
            browser.close()


@pytest.mark.slow
@pytest.mark.browser
def test_a_100k_event_logs_page_opens_in_chromium(tmp_path):
    require_chromium()
    from playwright.sync_api import sync_playwright

    log = CompileLog([CompileEvent(seq=i, function=f"fn{i % 9}", kind="recompile",
                                   started_at=float(i), duration_s=0.25, rank=i % 8,
                                   reasons=[f"size mismatch at index 1. expected {i}"])
                      for i in range(100_000)])
    path = tmp_path / "big.html"
    path.write_text(report_page(log, advice=[]), encoding="utf-8")
    assert path.stat().st_size < 1_000_000
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            page = browser.new_page()
            start = time.perf_counter()
            requests = open_page(page, path.resolve().as_uri())
            print(f"100k-event page: {path.stat().st_size / 1e3:.0f} kB, opened in "
                  f"{time.perf_counter() - start:.2f} s (goal: bench/html_report.py)")
            assert requests == [path.resolve().as_uri()]
            assert page.locator("table.nk-events tbody tr").count() == 200
            assert page.locator("img.nk-chart").evaluate_all(
                "imgs => imgs.map(i => i.complete && i.naturalWidth > 0)") == [True, True]
        finally:
            browser.close()


# -- the command line -----------------------------------------------------------------------

def test_report_html_into_a_folder_writes_the_log_stem(tmp_path, capsys):
    log_path = tmp_path / "rank0.jsonl"
    write_log(log_path, ["forward", "<b>step</b>"])
    out = tmp_path / "out"
    rc = main(["report", str(log_path), "--html", f"{out}/"])
    printed = capsys.readouterr().out
    page = out / "rank0.html"
    assert rc == 0 and f"HTML report written to {page}" in printed
    text = page.read_text(encoding="utf-8")
    assert text.startswith("<!DOCTYPE html>") and "&lt;b&gt;step&lt;/b&gt;" in text
    assert "<b>step</b>" not in text
    named = tmp_path / "named.html"  # a file name is used as it is
    assert main(["report", str(log_path), "--json", "--html", str(named)]) == 0
    assert "HTML report written to" in capsys.readouterr().err  # stdout stays JSON
    assert named.read_text(encoding="utf-8") .startswith("<!DOCTYPE html>")


def test_report_html_to_an_unwritable_path_is_exit_2(tmp_path, capsys):
    log_path = tmp_path / "compile-log.jsonl"
    write_log(log_path, ["forward"])
    blocker = tmp_path / "a-file"
    blocker.write_text("not a folder")
    assert main(["report", str(log_path), "--html", str(blocker / "report.html")]) == 2
    err = capsys.readouterr().err
    assert "cannot write the HTML report" in err and str(blocker) in err
    assert main(["report", str(log_path), "--html", str(log_path)]) == 2  # never over the log
    assert "is a compile log given to read" in capsys.readouterr().err
