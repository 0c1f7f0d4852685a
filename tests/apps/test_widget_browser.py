"""The dashboard's safety in a real browser: Voilà replays a crafted log, Chromium shows it, no
payload runs, every one shows as text, and the replay's model controls are off. Also the
browser helpers: a missing Chromium or server skips (or fails in CI), a dialog over the page is
accepted, a widget lost to JupyterLab's websocket race is run again, a failure's screenshot is
kept. (A live dashboard generating in Voilà and JupyterLab: test_dashboard_browser.py.)
"""
from __future__ import annotations

import importlib.util
import threading
import time
from pathlib import Path
from urllib.parse import quote

import pytest

from helpers import browser as _browser
from helpers.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    KERNEL_PID_CELL,
    REQUIRE_ENV,
    SERVER_PACKAGES,
    dismiss_dialogs,
    isolated_env,
    keep_artifact,
    require_browser,
    tail,
    voila,
    write_notebook,
)

WAIT_MS = 90_000          # one bounded wait: a page run, a model load, a compile on a busy CPU


def screenshot(page, path: Path, failed: bool = False) -> Path:
    """The whole page (a tall viewport: Voilà scrolls inside the page), kept for CI (and kept
    at a failure even outside CI); returns where it is."""
    page.set_viewport_size({"width": 1280, "height": 2600})
    page.screenshot(path=str(path), full_page=True)
    return keep_artifact(path, failed) or path


def test_missing_chromium_skips_or_fails_in_ci(monkeypatch):
    monkeypatch.setattr(_browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="/nonexistent/chromium not found"):
        require_browser()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="failure, not a skip"):
        require_browser()


def test_a_browser_test_waits_for_chromiums_install_under_way(tmp_path, monkeypatch):
    """.ci/run installs Chromium beside the Python install: a browser test that starts first
    waits for the install's exit status; a failed install is a failure that says so."""
    status = tmp_path / "chromium-install-status"
    monkeypatch.setenv(_browser.INSTALL_ENV, str(status))
    writer = threading.Timer(0.6, status.write_text, args=("0\n",))
    writer.start()
    start = time.monotonic()
    _browser.wait_for_chromium_install(timeout_s=30)
    assert status.exists() and time.monotonic() - start >= 0.5
    writer.join()
    status.write_text("100\n")
    with pytest.raises(pytest.fail.Exception, match="install failed .*'100'"):
        require_browser()
    status.unlink()
    with pytest.raises(pytest.fail.Exception, match="did not end within 0.2 s"):
        _browser.wait_for_chromium_install(timeout_s=0.2)
    monkeypatch.delenv(_browser.INSTALL_ENV)
    _browser.wait_for_chromium_install(timeout_s=0)    # nothing under way: no wait


@pytest.mark.parametrize("front_end", sorted(SERVER_PACKAGES))
def test_missing_server_package_skips_or_fails_in_ci(front_end, monkeypatch):
    """Each front end's server package is checked like Chromium: a skip, or a failure in CI."""
    package, find_spec = SERVER_PACKAGES[front_end], importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *args: None if name == package else find_spec(name, *args))
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match=f"package {package!r} not installed"):
        require_browser(front_end)
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="failure, not a skip"):
        require_browser(front_end)


# --------------------------------------------------------------------------- hostile replay

# Each payload would set window.__pwned (or leave an element behind) if it reached the page as
# markup. The kinds in the file are valid (a loader may reject unknown ones); the free-text
# fields and the header carry the payloads. A second dashboard is built in memory with a
# hostile kind and seq, which no loader sees.
PAYLOADS = {
    "function": "<img src=x onerror=window.__pwned=1>",
    "changed": '"><img src=x onerror=window.__pwned=2>',
    "reason": "</td></tr></table><svg onload=window.__pwned=3></svg>",
    "reason2": "' onmouseover='window.__pwned=4' x='",
    "context": '<iframe srcdoc="<script>parent.__pwned=5</script>"></iframe>',
    "description": "</style><script>window.__pwned=6</script>"
                   "<b data-nk-pwned=1>x</b><img src=x onerror=window.__pwned=6>",
    "torch": "<img src=x onerror=window.__pwned=7>",
    "device": "<img src=x onerror=window.__pwned=8>",
    "backend": '"><img src=x onerror=window.__pwned=9>',
    "kind": 'first"><img src=x onerror=window.__pwned=10>',
    "seq": "<img src=x onerror=window.__pwned=11>",
    "file": "log-<img src=x onerror=window.__pwned=12>",
}
# the dashboard's own pictures are Image widgets (the chart, the comparison chart): any other
# image in it came from markup
INJECTED = ".nk-dashboard script, .nk-dashboard iframe, .nk-dashboard svg, [data-nk-pwned], " \
           ".nk-dashboard img:not(.widget-image)"


def hostile_log_file(folder: Path) -> Path:
    """A crafted log: valid kinds, payloads in every free-text field and in the header."""
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog

    header = {"format": "neuronkit-compile-log", "version": 2, "neuronkit": "0.1",
              "torch": PAYLOADS["torch"], "device": PAYLOADS["device"],
              "backend": PAYLOADS["backend"], "description": PAYLOADS["description"]}
    log = CompileLog(header=header)
    for i, kind in enumerate(("first", "recompile", "limit_hit")):
        log.append(CompileEvent(
            compile_id=f"0/{i}", function=PAYLOADS["function"], location="model.py:1",
            started_at=100.0 + i, duration_s=1.0, input_shapes={"input_ids": [1, 8 + i]},
            changed=PAYLOADS["changed"] if i else "",
            reasons=[PAYLOADS["reason"], PAYLOADS["reason2"]] if i else [],
            kind=kind, graph_count=i + 1, context=PAYLOADS["context"]))
    return log.save(folder / f"{PAYLOADS['file']}.jsonl")


def hostile_notebook(folder: Path, log_file: Path) -> Path:
    return write_notebook(folder / "hostile.ipynb", [
        KERNEL_PID_CELL,
        "from neuronkit.widget import RecompileDashboard\n"
        f"RecompileDashboard.from_log({str(log_file)!r})",
        "from neuronkit.events.event import CompileEvent\n"
        "from neuronkit.log.compile_log import CompileLog\n"
        "from neuronkit.apps.dashboard.state import DashboardState\n"
        f"log = CompileLog.load({str(log_file)!r})\n"
        f"log.events.append(CompileEvent(seq={PAYLOADS['seq']!r}, function='forward', "
        f"kind={PAYLOADS['kind']!r}, started_at=200.0, context={PAYLOADS['context']!r}))\n"
        f"RecompileDashboard(state=DashboardState(log=log, source={str(log_file)!r}))",
    ])


@pytest.mark.slow
@pytest.mark.browser
def test_replayed_hostile_log_runs_no_script_in_chromium(tmp_path):
    """A crafted log replayed in Voilà: every payload shows as text, none runs as markup."""
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    log_file = hostile_log_file(tmp_path)
    notebook = hostile_notebook(tmp_path, log_file)
    env = isolated_env(tmp_path / "jupyter")
    shot = tmp_path / "hostile-log-browser.png"
    with voila(notebook, tmp_path, env) as (url, server_log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(url, timeout=WAIT_MS)
            dashboards = page.locator(".nk-dashboard")
            expect(dashboards).to_have_count(2, timeout=WAIT_MS)
            replay, memory = dashboards.nth(0), dashboards.nth(1)
            for dash in (replay, memory):
                expect(dash.locator(".nk-events-table tbody tr").first).to_be_visible(
                    timeout=WAIT_MS)
                page.wait_for_function("el => el.complete && el.naturalWidth > 0",
                                       arg=dash.locator("img.nk-chart").element_handle(),
                                       timeout=WAIT_MS)
            # hover the reasons (an injected onmouseover would fire) and give errors time
            for cell in replay.locator(".nk-events-table td[title]").all():
                cell.hover()
            page.wait_for_timeout(1500)

            assert page.evaluate("() => window.__pwned") is None
            assert page.locator(INJECTED).count() == 0
            # a replay: its status says so and the model controls are off
            expect(replay.locator(".nk-status")).to_contain_text("Replaying")
            expect(replay.locator(".nk-load")).to_be_disabled()
            expect(replay.locator(".nk-generate")).to_be_disabled()
            # the rows render with their fixed classes; the hostile kind is an unknown row
            assert replay.locator(".nk-events-table tbody tr").count() == 3
            assert replay.locator(".nk-events-table tr.nk-limit-hit").count() == 1
            assert memory.locator(".nk-events-table tr.nk-unknown").count() == 1
            # ... and every payload is visible as text
            table = replay.locator(".nk-events-table").inner_text()
            for field in ("function", "changed", "context"):
                assert PAYLOADS[field] in table, field
            titles = replay.locator(".nk-events-table td[title]").first.get_attribute("title")
            assert PAYLOADS["reason"] in titles and PAYLOADS["reason2"] in titles
            header = replay.locator(".nk-title + .nk-muted").inner_text()
            for field in ("description", "torch", "file"):
                assert PAYLOADS[field] in header, field
            assert PAYLOADS["device"] in replay.locator(".nk-device-note").inner_text()
            assert PAYLOADS["file"] in replay.locator(".nk-status").inner_text()
            memory_table = memory.locator(".nk-events-table").inner_text()
            assert PAYLOADS["kind"] in memory_table       # an unknown kind: the text it is
            # a seq that is no number reads as unknown ("?"), like every number views read
            assert PAYLOADS["seq"] not in memory_table and "\n?\t" in memory_table

            # control: the same kind of payload, inserted as markup, does run in this page
            page.evaluate("() => document.body.insertAdjacentHTML('beforeend', "
                          "'<img id=nk-control src=x onerror=window.__nk_control=1>')")
            page.wait_for_function("() => window.__nk_control === 1", timeout=10_000)
        except Exception as exc:
            kept = screenshot(page, shot, failed=True)
            raise AssertionError(f"{exc}\n--- screenshot: {kept}\n--- server log ---\n"
                                 f"{tail(server_log)}") from exc
        screenshot(page, shot)
        browser.close()


def test_a_screenshot_taken_at_a_failure_is_kept_without_the_ci_folder(tmp_path, monkeypatch):
    shot = tmp_path / "failed.png"
    shot.write_bytes(b"png")
    monkeypatch.delenv(_browser.ARTIFACTS_ENV, raising=False)
    monkeypatch.setattr(_browser, "DEFAULT_ARTIFACTS", tmp_path / "kept")
    assert keep_artifact(shot) is None                      # a passing test's: only in CI
    assert keep_artifact(shot, failed=True) == tmp_path / "kept" / "failed.png"
    monkeypatch.setenv(_browser.ARTIFACTS_ENV, str(tmp_path / "ci"))
    assert keep_artifact(shot) == tmp_path / "ci" / "failed.png"


@pytest.mark.slow
@pytest.mark.browser
def test_a_dialog_over_the_page_is_accepted_so_the_click_goes_through():
    """A JupyterLab-style modal dialog that appears while a test clicks (a kernel choice, a
    start-up notice) would take the click; dismiss_dialogs accepts it and the click lands."""
    require_browser()
    from playwright.sync_api import sync_playwright

    page_html = """<button id=run onclick="window.ran = 1">Run</button>
      <div class=jp-Dialog style="position:fixed;inset:0;background:#fff">
        <div class=jp-Dialog-header>Select Kernel</div>
        <button class="jp-Dialog-button jp-mod-accept" onclick="this.parentNode.remove()">
          Select</button></div>"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        seen = dismiss_dialogs(page)
        page.set_content(page_html)               # the dialog covers the button
        page.locator("#run").click(timeout=10_000)
        assert page.evaluate("window.ran") == 1 and seen == ["Select Kernel"]
        browser.close()


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("cell_says", ["Error displaying widget: model not found",
                                       "Loading widget..."])
def test_a_widget_lost_to_jupyterlabs_websocket_race_is_run_again(cell_says, monkeypatch):
    """JupyterLab's first kernel websocket can fail while the kernel starts; the widget's model
    is then lost: the cell says "Error displaying widget: model not found", or stays at "Loading
    widget..." for good (the widget manager waits for a model that never comes; seen in CI).
    The cells run once more."""
    require_browser()
    from playwright.sync_api import sync_playwright

    page_html = f"""<div class="jp-NotebookPanel"><div class="jp-Notebook-ExecutionIndicator"
      data-status="idle">idle</div><div class=cell>{cell_says}</div>
      </div><span class="lm-MenuBar-itemLabel"
        onclick="document.getElementById('menu').hidden = false">Run</span>
      <div id=menu hidden><span class="lm-Menu-itemLabel" onclick="document.querySelector('.cell')
        .outerHTML = '<div class=nk-dashboard>dashboard</div>'">Run All Cells</span></div>"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        page.set_content(page_html)
        idle = page.locator('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status="idle"]')
        monkeypatch.setattr(_browser, "STUCK_LOADING_MS", 1_000)
        _browser._rerun_if_a_widget_was_lost(page, page.locator(".nk-dashboard"), idle, 10_000)
        assert page.locator(".nk-dashboard").count() == 1
        browser.close()


@pytest.mark.slow
@pytest.mark.browser
def test_cells_jupyterlab_dropped_are_run_again():
    """Run All may run the first cell and drop the others (a kernel websocket that reconnects
    forgets what it queued): they are run again until every cell has its number."""
    require_browser()
    from playwright.sync_api import sync_playwright

    page_html = """<div class="jp-NotebookPanel"><div class="jp-Notebook-ExecutionIndicator"
      data-status="idle">idle</div><div class="jp-Cell"><div class="jp-InputPrompt">[ ]:</div>
      </div><div class="jp-Cell"><div class="jp-InputPrompt">[ ]:</div></div></div>
      <span class="lm-MenuBar-itemLabel"
        onclick="document.getElementById('menu').hidden = false">Run</span>
      <div id=menu hidden><span class="lm-Menu-itemLabel" onclick="
        window.runs = (window.runs || 0) + 1;
        const prompts = document.querySelectorAll('.jp-InputPrompt');
        prompts[0].textContent = '[' + window.runs + ']:';
        if (window.runs > 1) prompts[1].textContent = '[' + (window.runs + 1) + ']:';
        ">Run All Cells</span></div>"""
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page()
        _browser.run_all_in_jupyterlab(page, "data:text/html," + quote(page_html), 20_000)
        prompts = page.locator(".jp-InputPrompt").all_inner_texts()
        assert prompts == ["[2]:", "[3]:"] and page.evaluate("window.runs") == 2
        browser.close()
