"""The dashboard's live views in a real browser, in both Voilà and JupyterLab.

One notebook builds one live dashboard whose compile backend sleeps on purpose; one server and
one Chromium page per front end run every scenario in turn:

1. Generate shows the compile in progress (a row with a ticking clock) before its event lands
   in the table, and the row goes once the event is there; then the chart is drawn again and
   the graph counts, the generated text and the advice show the run.
2. Stop ends a sweep after its current batch; the status says so and the table keeps the
   events recorded.
3. A JSONL log uploaded through the "Open logs" button is shown as a run, named after its file.

And, on a page of its own in Voilà only (one more page start, not two): a notebook that calls
``RecompileDashboard.follow(folder)`` shows the events written to the folder's rank logs while
the page is open, a new rank's log included, without a reload, and "run finished" at the end.

A screenshot of the page is kept after each scenario (also when it fails), and each front end's
time is printed.
"""
from __future__ import annotations

import contextlib
import re
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Iterator

import pytest

from helpers.browser import (
    CHROMIUM,
    CHROMIUM_ARGS,
    KERNEL_PID_CELL,
    SERVER_PACKAGES,
    isolated_env,
    jupyterlab,
    keep_artifact,
    require_browser,
    run_all_in_jupyterlab,
    tail,
    voila,
    write_notebook,
)

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FRONT_ENDS = tuple(SERVER_PACKAGES)            # voila, jupyterlab
WAIT_MS = 90_000          # one bounded wait: a page run, a model load, a compile on a busy CPU
SLOW_BACKEND = "nk_slow_eager"
SLOW_COMPILE_S = 3.0      # long enough to watch the clock tick, short enough for CI
COMPILE_S_FILE = "compile-seconds.txt"   # the backend's sleep, read at each compile
SWEEP_PROMPTS = 6
VIEWPORT = {"width": 1280, "height": 2400}     # the whole dashboard, in either front end
UPLOADED_FUNCTION = "uploaded_forward"
FOLLOWED_FUNCTION = "train_step"
FOLLOW_VIEWPORT = {"width": 1280, "height": 1400}  # a followed run shows no model or text panel


def dashboard_notebook(folder: Path, model_path: Path) -> Path:
    """A notebook that registers a compile backend sleeping the seconds written in COMPILE_S_FILE
    (SLOW_COMPILE_S to start with) per graph and shows a live dashboard on CPU with it."""
    seconds = folder / COMPILE_S_FILE
    seconds.write_text(str(SLOW_COMPILE_S))
    return write_notebook(folder / "dashboard.ipynb", [
        KERNEL_PID_CELL,
        "import time\nfrom pathlib import Path\n\nimport torch\n\n\n"
        f"@torch._dynamo.register_backend(name={SLOW_BACKEND!r})\n"
        "def slow_eager(gm, example_inputs):\n"
        f"    time.sleep(float(Path({str(seconds)!r}).read_text()))\n"
        "    return gm.forward",
        "from neuronkit.widget import RecompileDashboard\n"
        f"dash = RecompileDashboard({str(model_path)!r}, device='cpu', dtype='float32',\n"
        f"                          backend={SLOW_BACKEND!r}, max_new_tokens=8)\n"
        "dash",
    ])


def uploaded_log(folder: Path) -> Path:
    """A small saved log: a first compile and two recompiles of one function."""
    from neuronkit.events.event import CompileEvent
    from neuronkit.log.compile_log import CompileLog

    log = CompileLog(header={"format": "neuronkit-compile-log", "version": 2,
                             "device": "cpu", "backend": "eager"})
    for i, kind in enumerate(("first", "recompile", "recompile")):
        log.append(CompileEvent(
            compile_id=f"0/{i}", function=UPLOADED_FUNCTION, location="model.py:10",
            backend="eager", device="cpu", started_at=1000.0 + i, duration_s=0.5 + i,
            input_shapes={"input_ids": [1, 8 * (i + 1)]}, kind=kind, graph_count=i + 1,
            changed="input_ids: size 1 changed" if i else "",
            reasons=["tensor 'input_ids' size mismatch at index 1"] if i else []))
    return log.save(folder / "uploaded-run.jsonl")


def follow_notebook(folder: Path, logs: Path) -> Path:
    """A notebook that follows the run folder ``logs``."""
    return write_notebook(folder / "follow.ipynb", [
        KERNEL_PID_CELL,
        "from neuronkit.widget import RecompileDashboard\n"
        f"RecompileDashboard.follow({str(logs)!r})",
    ])


def rank_log(logs: Path, rank: int) -> Any:
    """A rank's log being written, as ``neuronkit record`` writes one (its header first)."""
    from neuronkit.events.schema import FORMAT
    from neuronkit.log.compile_log import CompileLog

    return CompileLog(path=logs / f"node-a.rank{rank}.jsonl",
                      header={"format": FORMAT, "version": 3, "device": "cpu",
                              "backend": "eager", "rank": rank, "host": "node-a"})


def followed_event(i: int, rank: int) -> Any:
    """The ``i``-th compile of FOLLOWED_FUNCTION on ``rank``: a longer sequence each time."""
    from neuronkit.events.event import CompileEvent

    n = 64 * (i + 1)
    return CompileEvent(
        compile_id=f"0/{i}", function=FOLLOWED_FUNCTION, location="train.py:12", backend="eager",
        device="cpu", started_at=time.time(), duration_s=1.5 + i, rank=rank,
        input_shapes={"tokens": [8, n]}, kind="first" if i == 0 else "recompile",
        graph_count=i + 1, changed=f"tokens dim 1: {n - 64} -> {n}" if i else "",
        reasons=[f"tensor 'tokens' size mismatch at index 1. expected {n - 64}, actual {n}"]
        if i else [])


@dataclass
class DashboardPage:
    """A front end's page showing the notebook's dashboard, and what its scenarios leave."""

    front_end: str
    page: Any
    dash: Any                       # the .nk-dashboard locator
    server_log: Path
    folder: Path
    page_errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)   # JupyterLab dialogs accepted on the way
    timings: dict[str, float] = field(default_factory=dict)

    def compile_takes(self, seconds: float) -> None:
        """Set the slow backend's sleep per graph from now on."""
        (self.folder / COMPILE_S_FILE).write_text(str(seconds))

    def rows(self) -> Any:
        return self.dash.locator(".nk-events-table tbody tr")

    def screenshot(self, name: str, failed: bool = False) -> Path:
        shot = self.folder / f"dashboard-{self.front_end}-{name}.png"
        self.page.screenshot(path=str(shot), full_page=True)
        return keep_artifact(shot, failed) or shot

    @contextlib.contextmanager
    def scenario(self, name: str) -> Iterator[None]:
        """Time a scenario; screenshot after it; on failure, say where with the server log."""
        start = time.monotonic()
        try:
            yield
        except Exception as exc:
            shot = self.screenshot(f"{name}-failed", failed=True)
            errors = "\n".join(self.page_errors) or "none"
            dialogs = ", ".join(self.dialogs) or "none"
            raise AssertionError(f"{self.front_end}, {name}: {exc}\n--- screenshot: {shot}\n"
                                 f"--- dialogs dismissed: {dialogs}\n--- page errors ---\n"
                                 f"{errors}\n--- server log ---\n{tail(self.server_log)}") from exc
        finally:
            self.timings[name] = time.monotonic() - start
        self.screenshot(name)


@pytest.fixture(scope="module")
def chromium():
    """One Chromium for the module (both front ends); asked for once the front end's browser
    stack was checked (require_browser)."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        yield browser
        browser.close()


def _open_in_voila(page: Any, url: str) -> None:
    page.goto(url, timeout=WAIT_MS)           # Voilà runs the notebook before it answers


@pytest.fixture(scope="module", params=FRONT_ENDS)
def dashboard_page(request, tmp_path_factory):
    """The notebook served by one front end, open in a Chromium page, its dashboard loaded
    with the tiny model; prints the front end's time at the end."""
    front_end = request.param
    require_browser(front_end)                 # before anything is built or started
    from playwright.sync_api import expect

    tiny_model_path = request.getfixturevalue("tiny_model_path")
    chromium = request.getfixturevalue("chromium")
    folder = tmp_path_factory.mktemp(f"dashboard-{front_end}")
    notebook = dashboard_notebook(folder, tiny_model_path)
    env = isolated_env(folder / "jupyter")
    started = time.monotonic()
    serve = (voila(notebook, folder, env) if front_end == "voila"
             else jupyterlab(folder, folder, env, open_file=notebook.name))
    with serve as (url, server_log):
        context = chromium.new_context(viewport=VIEWPORT)
        page = context.new_page()
        ui = DashboardPage(front_end, page, page.locator(".nk-dashboard"), server_log, folder)
        page.on("pageerror", lambda error: ui.page_errors.append(str(error)))
        try:
            with ui.scenario("load"):
                if front_end == "voila":
                    _open_in_voila(page, url)
                else:
                    run_all_in_jupyterlab(page, url, WAIT_MS, ui.dialogs, shows=ui.dash)
                expect(ui.dash).to_have_count(1, timeout=WAIT_MS)
                expect(ui.dash.locator(".nk-load")).to_be_enabled(timeout=WAIT_MS)
                expect(ui.dash.locator(".nk-generate")).to_be_disabled()   # no model yet
                expect(ui.dash.locator(".nk-backend select")).to_have_value(SLOW_BACKEND)
                ui.dash.locator(".nk-load").click()
                expect(ui.dash.locator(".nk-status")).to_contain_text("Loaded tiny-qwen3",
                                                                      timeout=WAIT_MS)
                expect(ui.dash.locator(".nk-placement")).to_contain_text("placement ok")
                expect(ui.dash.locator(".nk-generate")).to_be_enabled()
            yield ui
        finally:
            context.close()
    ui.timings["total"] = time.monotonic() - started
    steps = ", ".join(f"{name} {seconds:.1f} s" for name, seconds in ui.timings.items())
    with request.config.pluginmanager.getplugin("capturemanager").global_and_fixture_disabled():
        print(f"\n[{front_end}] {steps}")


def test_generate_shows_the_compile_in_progress_before_its_event(dashboard_page):
    """The compiling-now row, with a clock that ticks, shows while the slow compile runs and
    before any row in the table; it goes once the event is in the table."""
    from playwright.sync_api import expect

    ui = dashboard_page
    dash = ui.dash
    with ui.scenario("compiling"):
        ui.compile_takes(SLOW_COMPILE_S)
        assert ui.rows().count() == 0                          # a fresh session: no compile yet
        chart = dash.locator("img.nk-chart")
        before = chart.get_attribute("src")
        dash.locator(".nk-generate").click()
        row = dash.locator(".nk-compiling .nk-compiling-row")
        expect(row).to_have_count(1, timeout=WAIT_MS)
        expect(row).to_contain_text("compiling")
        expect(row).to_contain_text("forward")
        assert ui.rows().count() == 0                          # the event has not landed yet
        clock = row.locator(".nk-clock")
        first = clock.inner_text()
        assert re.fullmatch(r"\d+:\d\d", first), first
        expect(clock).not_to_have_text(first, timeout=int(SLOW_COMPILE_S * 1000) + 5_000)
        ui.screenshot("compiling-now")
        ui.compile_takes(0.0)                                  # the run's other graph: no wait

        expect(dash.locator(".nk-status")).to_contain_text("Generated:", timeout=WAIT_MS)
        expect(row).to_have_count(0)
        expect(dash.locator(".nk-events-table")).to_contain_text("forward")
        compiles = re.search(r"(\d+) compile\(s\)", dash.locator(".nk-output-text").inner_text())
        assert compiles and int(compiles[1]) >= 1, "the run summary names no compile"
        assert ui.rows().count() == int(compiles[1])            # each compile, one row
        # what the run drew: the chart again, graphs per function, its text and advice
        ui.page.wait_for_function(
            "([el, before]) => el.src !== before && el.complete && el.naturalWidth > 0",
            arg=[chart.element_handle(), before], timeout=WAIT_MS)
        assert dash.locator(".nk-events-table tbody tr.nk-first").count() == 2  # prefill, decode
        assert dash.locator(".nk-graph-count .nk-total-graphs").inner_text() == compiles[1]
        assert dash.locator(".nk-output-text pre").inner_text().strip()
        assert "tokens/s" in dash.locator(".nk-output-text").inner_text()
        assert dash.locator(".nk-advice .nk-advice-item").count() >= 1
        expect(dash.locator(".nk-generate")).to_be_enabled()
        expect(dash.locator(".nk-load")).to_be_enabled()


def test_stop_ends_a_sweep_and_keeps_its_events(dashboard_page):
    """Stop pressed after the first batch of a sweep: the sweep ends between batches, the status
    says how far it got, and the table keeps every event recorded."""
    from playwright.sync_api import expect

    ui = dashboard_page
    dash = ui.dash
    with ui.scenario("stop"):
        ui.compile_takes(0.0)     # tracing alone keeps a batch seconds long: time to press Stop
        before = ui.rows().count()
        stop = dash.locator(".nk-stop")
        expect(stop).to_be_disabled()                          # nothing to stop yet
        count = dash.locator(".nk-sweep-count input")
        count.fill(str(SWEEP_PROMPTS))
        count.blur()
        dash.locator(".nk-sweep").click()
        status = dash.locator(".nk-status")
        expect(status).to_contain_text(f"Sweep 2/{SWEEP_PROMPTS}", timeout=WAIT_MS)
        expect(dash.locator(".nk-progress")).to_be_visible()
        expect(dash.locator(".nk-eta")).to_contain_text(f"of {SWEEP_PROMPTS} batches")
        stop.click()

        expect(status).to_contain_text("Stopped after", timeout=WAIT_MS)
        done = re.search(r"Stopped after (\d+) of (\d+) batches", status.inner_text())
        assert done, status.inner_text()
        assert 1 <= int(done[1]) < SWEEP_PROMPTS and int(done[2]) == SWEEP_PROMPTS, done[0]
        expect(stop).to_be_disabled()
        expect(dash.locator(".nk-sweep")).to_be_enabled()
        expect(dash.locator(".nk-progress")).to_be_hidden()
        expect(dash.locator(".nk-compiling .nk-compiling-row")).to_have_count(0)
        assert ui.rows().count() > before                      # the sweep's compiles stayed


def test_uploaded_log_is_shown_as_a_run(dashboard_page):
    """A JSONL log opened with the upload button: its events fill the table and the Show
    dropdown names its file; picking this session again brings back the session's events."""
    from playwright.sync_api import expect

    ui = dashboard_page
    dash = ui.dash
    with ui.scenario("upload"):
        session_rows = ui.rows().count()
        log_file = uploaded_log(ui.folder)
        # the widget's <input type=file> is never attached to the page: a click opens it
        with ui.page.expect_file_chooser(timeout=WAIT_MS) as chooser:
            dash.locator(".nk-upload").click()
        chooser.value.set_files(str(log_file))

        expect(dash.locator(".nk-status")).to_contain_text(
            f"Showing '{log_file.name}': 3 compile events", timeout=WAIT_MS)
        expect(ui.rows()).to_have_count(3)
        expect(dash.locator(".nk-events-table")).to_contain_text(UPLOADED_FUNCTION)
        shown = dash.locator(".nk-run select")
        assert shown.evaluate("s => s.options[s.selectedIndex].text") == log_file.name
        ui.screenshot("uploaded")

        shown.select_option(label="this session")
        expect(ui.rows()).to_have_count(session_rows)
        expect(dash.locator(".nk-events-table")).not_to_contain_text(UPLOADED_FUNCTION)


def test_follow_mode_shows_a_run_as_its_logs_are_written(chromium, tmp_path):
    """``RecompileDashboard.follow(folder)`` served by Voilà while the test writes the folder's
    rank logs: each event reaches the page's table, graph counts and status (logs, ranks, which
    are still open) with no reload, a second rank's log is picked up when it appears, and the
    status says "run finished" once both are closed."""
    require_browser("voila")
    from playwright.sync_api import expect

    logs = tmp_path / "logs"
    logs.mkdir()
    rank0 = rank_log(logs, 0)
    rank0.append(followed_event(0, 0))                     # written before the page opens
    env = isolated_env(tmp_path / "jupyter")
    with voila(follow_notebook(tmp_path, logs), tmp_path, env) as (url, server_log):
        context = chromium.new_context(viewport=FOLLOW_VIEWPORT)
        page = context.new_page()
        ui = DashboardPage("voila", page, page.locator(".nk-dashboard"), server_log, tmp_path)
        page.on("pageerror", lambda error: ui.page_errors.append(str(error)))
        try:
            with ui.scenario("follow"):
                _open_in_voila(page, url)
                dash, status = ui.dash, ui.dash.locator(".nk-status")
                expect(dash).to_have_count(1, timeout=WAIT_MS)
                expect(dash).to_contain_text(f"following {logs} while its job writes it")
                expect(status).to_contain_text("1 log, rank 0; still open: rank 0; 1 compile "
                                               "event", timeout=WAIT_MS)
                expect(ui.rows()).to_have_count(1)
                expect(dash.locator(".nk-load")).to_be_hidden()          # no model here
                expect(dash.locator(".nk-follow-stop")).to_be_enabled()
                page.evaluate("window.nkNotReloaded = true")
                chart = dash.locator("img.nk-chart")
                before = chart.get_attribute("src")

                rank1 = rank_log(logs, 1)                  # a rank that starts later
                for i in (1, 2):
                    rank0.append(followed_event(i, 0))
                rank1.append(followed_event(0, 1))
                expect(status).to_contain_text("2 logs, ranks 0, 1; still open: ranks 0, 1; "
                                               "4 compile events", timeout=WAIT_MS)
                expect(ui.rows()).to_have_count(4)
                recompiles = dash.locator(".nk-events-table tbody tr.nk-recompile")
                expect(recompiles).to_have_count(2)
                kind = recompiles.first.locator("td.nk-kind")          # one word, never broken
                assert kind.evaluate("e => getComputedStyle(e).whiteSpace") == "nowrap"
                expect(dash.locator(".nk-graph-count .nk-total-graphs")).to_have_text("4")
                expect(dash.locator(".nk-advice")).to_contain_text(FOLLOWED_FUNCTION)
                ui.page.wait_for_function(
                    "([el, before]) => el.src !== before && el.complete && el.naturalWidth > 0",
                    arg=[chart.element_handle(), before], timeout=WAIT_MS)
                ui.screenshot("following")

                rank0.set_wall_time(30.0)
                rank1.set_wall_time(28.0)
                expect(status).to_contain_text("run finished, 2 logs (ranks 0, 1) all closed; 4 "
                                               "compile events", timeout=WAIT_MS)
                assert page.evaluate("window.nkNotReloaded") is True, "the page was reloaded"
        finally:
            context.close()
