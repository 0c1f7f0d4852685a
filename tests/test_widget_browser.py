"""The dashboard in a real browser: Voilà serves a notebook, Chromium clicks Load and Generate.

Checks what a user sees: the event table gains rows, the chart image is redrawn, the status
says what happened, the generated text appears; and a replayed log shows with its model
controls disabled. A full-page screenshot is saved in the test's folder (and copied to
$NEURONKIT_TEST_OUTPUT when set), also when the test fails.
"""
from __future__ import annotations

from pathlib import Path

import pytest

import _browser
from _browser import (CHROMIUM, CHROMIUM_ARGS, KERNEL_PID_FILE, REQUIRE_ENV, isolated_env,
                      keep_artifact, require_browser, tail, voila, write_notebook)

SAMPLE_LOG = Path(__file__).resolve().parents[1] / "notebooks" / "data" / "sample_compile_log.jsonl"
WAIT_MS = 90_000          # one bounded wait: a page run, a model load, a compile on a busy CPU

def screenshot(page, path: Path) -> None:
    """The whole page (a tall viewport: Voilà scrolls inside the page), kept for CI."""
    page.set_viewport_size({"width": 1280, "height": 2600})
    page.screenshot(path=str(path), full_page=True)
    keep_artifact(path)


def dashboard_notebook(folder: Path) -> Path:
    return write_notebook(folder / "dashboard.ipynb", [
        "import os\nfrom pathlib import Path\n"
        f"_ = Path({KERNEL_PID_FILE!r}).write_text(str(os.getpid()))",
        "from neuronkit.widget import RecompileDashboard\n"
        "live = RecompileDashboard(backend='eager', dtype='float32')\nlive",
        f"RecompileDashboard.from_log({str(SAMPLE_LOG)!r})",
    ])


def test_missing_chromium_skips_or_fails_in_ci(monkeypatch):
    monkeypatch.setattr(_browser, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv(REQUIRE_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="/nonexistent/chromium not found"):
        require_browser()
    monkeypatch.setenv(REQUIRE_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="failure, not a skip"):
        require_browser()


@pytest.mark.slow
@pytest.mark.browser
def test_dashboard_generates_and_draws_in_chromium(tiny_model_path, tmp_path):
    require_browser()
    from playwright.sync_api import expect, sync_playwright

    notebook = dashboard_notebook(tmp_path)
    env = isolated_env(tmp_path / "jupyter", NEURONKIT_HOME=str(tiny_model_path.parent),
                       NEURONKIT_CPU_BACKEND="eager")
    shot = tmp_path / "dashboard-browser.png"
    with voila(notebook, tmp_path, env) as (url, server_log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1280, "height": 900})
        try:
            page.goto(url, timeout=WAIT_MS)           # Voilà runs the notebook before it answers
            dashboards = page.locator(".nk-dashboard")
            live, replay = dashboards.nth(0), dashboards.nth(1)
            expect(live.locator(".nk-load")).to_be_enabled(timeout=WAIT_MS)
            expect(live.locator(".nk-generate")).to_be_disabled()     # no model yet

            live.locator(".nk-load").click()
            expect(live.locator(".nk-placement")).to_contain_text("placement ok", timeout=WAIT_MS)
            expect(live.locator(".nk-status")).to_contain_text("Loaded tiny-qwen3")
            chart = live.locator("img.nk-chart")
            before = chart.get_attribute("src")

            live.locator(".nk-generate").click()
            expect(live.locator(".nk-status")).to_contain_text("Generated:", timeout=WAIT_MS)
            expect(live.locator(".nk-events-table tbody tr").first).to_be_visible(timeout=WAIT_MS)
            page.wait_for_function(
                """([el, before]) => el.src !== before && el.complete && el.naturalWidth > 0""",
                arg=[chart.element_handle(), before], timeout=WAIT_MS)

            rows = live.locator(".nk-events-table tbody tr").count()
            assert rows >= 1
            assert live.locator(".nk-events-table tbody tr.nk-first").count() == 1
            assert chart.evaluate("img => img.naturalWidth") > 0
            assert live.locator(".nk-graph-count .nk-total-graphs").inner_text() == str(rows)
            assert live.locator(".nk-output-text pre").inner_text().strip()
            assert "tokens/s" in live.locator(".nk-output-text").inner_text()
            assert live.locator(".nk-advice .nk-advice-item").count() >= 1
            expect(live.locator(".nk-generate")).to_be_enabled()
            expect(live.locator(".nk-load")).to_be_enabled()

            # the replayed sample log: rows, a limit hit, model controls disabled
            expect(replay.locator(".nk-status")).to_contain_text("Replaying")
            assert replay.locator(".nk-events-table tr.nk-limit-hit").count() == 1
            assert replay.locator("img.nk-chart").evaluate("img => img.naturalWidth") > 0
            expect(replay.locator(".nk-load")).to_be_disabled()
            expect(replay.locator(".nk-generate")).to_be_disabled()
        except Exception as exc:
            screenshot(page, shot)
            raise AssertionError(f"{exc}\n--- server log ---\n{tail(server_log)}") from exc
        screenshot(page, shot)
        browser.close()
    assert shot.stat().st_size > 10_000
