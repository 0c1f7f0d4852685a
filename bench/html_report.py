"""The HTML report of a 100k-event log (``neuronkit report LOG --html FILE``): its size, the time
to make it, and the time Chromium takes to open it.

Goal: the page opens in Chromium (``page.goto(file://...)`` until ``load``) in under 3 s, and it
stays bounded (under 2 MB: at most ``MOST_ROWS`` newest rows, the charts as PNGs). By default the
largest page the command makes (``--limit all``: ``MOST_ROWS`` rows); ``--limit 50`` is the
command's default. The log is
``log_scale.py``'s: synthetic but shaped like a long distributed run gone wrong (8 ranks, a dozen
functions, limit hits, NEFF builds), deterministic (one seed). Making the page is timed as the
command does it: the log loaded, ``diagnose`` and ``summary`` made once, then the page. Opening
is timed in a fresh page of one Chromium (Debian's ``/usr/bin/chromium``, driven by Playwright;
nothing is downloaded), the best and the median of ``--opens`` tries.

    python bench/html_report.py [--events 100000] [--limit all|N] [--opens 5] [--keep DIR]
"""
from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from log_scale import build  # noqa: E402  (beside this file)

from neuronkit.advice.diagnose import diagnose  # noqa: E402
from neuronkit.log.compile_log import CompileLog  # noqa: E402
from neuronkit.views.report_page import write_report_page  # noqa: E402

GOAL_OPEN_S = 3.0
GOAL_PAGE_KB = 2000.0
CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]


def make_page(log_path: Path, page_path: Path, limit: int | None) -> dict[str, float]:
    """The page as ``neuronkit report LOG --html`` makes it; seconds per step."""
    times: dict[str, float] = {}
    start = time.perf_counter()
    log = CompileLog.load(log_path)
    times["load"] = time.perf_counter() - start
    start = time.perf_counter()
    advice, summary = diagnose(log), log.summary()
    times["diagnose + summary"] = time.perf_counter() - start
    start = time.perf_counter()
    write_report_page(log, page_path, advice=advice, summary=summary, limit=limit)
    times["page"] = time.perf_counter() - start
    return times


def open_times(page_path: Path, opens: int) -> tuple[list[float], list[str], int]:
    """Seconds to open the page (until load) in a fresh page each time; the requests seen and
    the event rows shown."""
    from playwright.sync_api import sync_playwright

    url, seconds, requests, rows = page_path.resolve().as_uri(), [], [], 0
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        try:
            for _ in range(opens):
                page = browser.new_page()
                page.on("request", lambda r: requests.append(r.url))
                start = time.perf_counter()
                page.goto(url, wait_until="load", timeout=60_000)
                seconds.append(time.perf_counter() - start)
                rows = page.locator("table.nk-events tbody tr").count()
                page.close()
        finally:
            browser.close()
    return seconds, [r for r in requests if r != url], rows


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--limit", type=lambda t: None if t == "all" else int(t), default=None,
                        help="event rows: a number, or all (default: all, up to MOST_ROWS)")
    parser.add_argument("--opens", type=int, default=5)
    parser.add_argument("--keep", type=Path, default=None, help="keep the log and page here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        log_path, page_path = folder / "log.jsonl", folder / "report.html"
        size = build(log_path, args.events)
        print(f"log: {args.events} events, {size / 1e6:.1f} MB")
        for step, seconds in make_page(log_path, page_path, args.limit).items():
            print(f"  {step:<20} {seconds:6.2f} s")
        kb = page_path.stat().st_size / 1e3
        seconds, others, rows = open_times(page_path, args.opens)
        best, median = min(seconds), statistics.median(seconds)
        print(f"page: {kb:.0f} kB (goal < {GOAL_PAGE_KB:.0f} kB), {rows} event rows")
        print(f"open in Chromium until load: best {best:.3f} s, median {median:.3f} s of "
              f"{len(seconds)} (goal < {GOAL_OPEN_S:.0f} s)")
        print(f"requests besides the page: {len(others)}" + (f" {others[:5]}" if others else ""))
        ok = median < GOAL_OPEN_S and kb < GOAL_PAGE_KB and not others
        print("goal met" if ok else "GOAL MISSED")
        return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
