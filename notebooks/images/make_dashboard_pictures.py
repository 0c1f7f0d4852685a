"""Remake the pictures of the dashboard that notebook 06 embeds, for readers without a kernel (a
widget draws only in a running kernel: not on GitHub, nor on Binder before the notebook runs).

    python notebooks/images/make_dashboard_pictures.py      # about a minute on 2 CPU cores

Voilà serves a notebook that does what notebook 06 does up to its naive sweep (the embedded tiny
model, one prompt, then four prompts of growing length with no padding, the sweep kept as a run)
and replays the shipped sample log; Chromium (``/usr/bin/chromium`` through Playwright, as the
browser tests drive it) saves each dashboard as a picture:

    06_dashboard_live.png     the live dashboard after the sweep (Model, Generation, Runs, Compiles)
    06_dashboard_replay.png   RecompileDashboard.from_log("data/sample_compile_log.jsonl")

Needs the test extra (``pip install -e '.[test]'``: Voilà, Playwright) and Chromium.
"""
from __future__ import annotations

import os
import shutil
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.browser import (  # noqa: E402  (the browser tests' helpers)
    CHROMIUM,
    CHROMIUM_ARGS,
    KERNEL_PID_FILE,
    isolated_env,
    voila,
    write_notebook,
)

VIEWPORT = {"width": 1280, "height": 4000}   # Voilà scrolls inside the page: all of it in view
WAIT_MS = 300_000                            # the model's load and the sweep's compiles, busy CPU
SAMPLE = ROOT / "notebooks" / "data" / "sample_compile_log.jsonl"
PICTURES = (HERE / "06_dashboard_live.png", HERE / "06_dashboard_replay.png")


def small(path: Path) -> None:
    """256 colours (a screenshot of a page uses few): a third of the bytes, the same picture."""
    from PIL import Image

    with Image.open(path) as picture:
        picture.convert("RGB").quantize(256).save(path, optimize=True)


def notebook(folder: Path) -> Path:
    return write_notebook(folder / "dashboard.ipynb", [
        "import os\nfrom pathlib import Path\n"
        f"_ = Path({KERNEL_PID_FILE!r}).write_text(str(os.getpid()))",
        "from neuronkit.widget import RecompileDashboard\n"
        "dash = RecompileDashboard()          # the Model field empty: the embedded tiny model\n"
        "dash.load()\n"
        "dash.generate('Trainium compiles one graph for every input shape')\n"
        "dash.state.sweep_count = 4\n"
        "dash.state.padding = 'none'\n"
        "dash.sweep()\n"
        "dash.state.keep_run('naive sweep')\n"
        "dash",
        f"RecompileDashboard.from_log({str(SAMPLE)!r})",
    ])


def main() -> int:
    from playwright.sync_api import expect, sync_playwright

    folder = Path(tempfile.mkdtemp(prefix="neuronkit-dashboard-pictures-"))
    env = isolated_env(folder / "jupyter")
    try:
        with voila(notebook(folder), folder, env) as (url, server_log), sync_playwright() as p:
            browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
            page = browser.new_page(viewport=VIEWPORT)
            page.goto(url, timeout=WAIT_MS)
            dashboards = page.locator(".nk-dashboard")
            expect(dashboards).to_have_count(2, timeout=WAIT_MS)
            for i, out in enumerate(PICTURES):
                dash = dashboards.nth(i)
                page.wait_for_function("el => el.complete && el.naturalWidth > 0",
                                       arg=dash.locator("img.nk-chart").element_handle())
                page.wait_for_timeout(500)
                dash.screenshot(path=str(out))
                small(out)
                print(f"wrote {out.relative_to(ROOT)}: {dash.locator('.nk-status').inner_text()}")
            browser.close()
    except BaseException:
        log = folder / "voila.log"
        print(log.read_text()[-3000:] if log.exists() else "(no server log)", file=sys.stderr)
        raise
    finally:
        shutil.rmtree(folder, ignore_errors=True)
    return 0


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    raise SystemExit(main())
