"""Remake docs/dashboard.png: the dashboard following a two-rank training job, as a user sees it.

    python docs/dashboard_png.py            # about 1.5 minutes on 2 CPU cores
    python docs/dashboard_png.py --running  # the picture while the job still runs

A small training script (torch only: batches of a few sequence lengths, one compiled train step
and an evaluation, rank 1 drawing one longer batch) runs under
``neuronkit record --log-dir logs -- torchrun --nproc_per_node=2 train.py``, in a fresh folder.
Voilà serves a notebook whose one visible output is ``RecompileDashboard.follow("logs")``, opened
in Chromium (``/usr/bin/chromium`` through Playwright, as the browser tests drive it) before the
job starts, so it shows the events as they come. Inductor compiles with a cache of its own (cold:
the compile times are those of a first run). Once every process has closed its log the page says
"run finished" (with ``--running``: once both ranks compiled every shape, while the job still
runs) and the dashboard is saved as the picture.

Needs the test extra (``pip install -e '.[test]'``: Voilà, Playwright) and Chromium.
"""
from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tests"))

from helpers.browser import (  # noqa: E402  (the browser tests' helpers)
    CHROMIUM,
    CHROMIUM_ARGS,
    KERNEL_PID_FILE,
    isolated_env,
    stop_group,
    voila,
    write_notebook,
)

OUT = ROOT / "docs" / "dashboard.png"
VIEWPORT = {"width": 1280, "height": 3000}   # Voilà scrolls inside the page: all of it in view
WAIT_S = 300          # the job's compiles: inductor on a busy CPU
HOLD_S = 20           # the job keeps running this long after its last compile (the picture)
JOB = '''"""A small training job: batches of a few sequence lengths, one compiled train step."""
import os
import time
from pathlib import Path

import torch
import torch.distributed as dist

dist.init_process_group("gloo")
rank = dist.get_rank()
torch.manual_seed(0)
vocab, width = 512, 64
model = torch.nn.Sequential(torch.nn.Embedding(vocab, width), torch.nn.Linear(width, width),
                            torch.nn.GELU(), torch.nn.Linear(width, vocab))
optimizer = torch.optim.SGD(model.parameters(), lr=0.01)


def train_step(tokens):
    logits = model(tokens)
    return torch.nn.functional.cross_entropy(logits.flatten(0, 1), tokens.flatten())


@torch.no_grad()
def evaluate(tokens):
    return model(tokens).argmax(-1).eq(tokens).float().mean()


step = torch.compile(train_step, dynamic=False)        # static shapes, as on Trainium
score = torch.compile(evaluate, dynamic=False)
lengths = [64, 96, 64, 128, 96, 160] + ([192] if rank == 1 else [])  # rank 1: a longer batch
for i, n in enumerate(lengths):
    loss = step(torch.randint(0, vocab, (8, n)))
    loss.backward()
    optimizer.step()
    optimizer.zero_grad()
    if i == 2:
        score(torch.randint(0, vocab, (8, 64)))
    time.sleep(0.5)
Path(f"compiled.rank{rank}").touch()                   # every shape compiled
dist.barrier()
time.sleep(float(os.environ["HOLD_S"]))                # training goes on
dist.destroy_process_group()
'''


def notebook(folder: Path) -> Path:
    return write_notebook(folder / "dashboard.ipynb", [
        "import os\nfrom pathlib import Path\n"
        f"_ = Path({KERNEL_PID_FILE!r}).write_text(str(os.getpid()))\n"
        f"os.chdir({str(folder)!r})",
        "from neuronkit.widget import RecompileDashboard\n"
        "RecompileDashboard.follow('logs')",
    ])


def wait_for(condition, what: str, job: subprocess.Popen | None = None) -> None:
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if job is not None and job.poll() not in (None, 0):
            raise RuntimeError(f"the job failed ({job.returncode}) while waiting for {what}")
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out waiting for {what}")
        time.sleep(0.5)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, default=OUT, help=f"default: {OUT}")
    parser.add_argument("--running", action="store_true",
                        help="the picture while the job runs (default: once it has finished)")
    parser.add_argument("--keep", action="store_true", help="keep the job's folder")
    args = parser.parse_args()
    from playwright.sync_api import expect, sync_playwright

    import neuronkit as nk

    folder = Path(tempfile.mkdtemp(prefix="neuronkit-dashboard-png-"))
    (folder / "train.py").write_text(JOB)
    bin_dir = Path(sys.executable).parent
    env = isolated_env(folder / "jupyter", HOLD_S=str(HOLD_S),
                       TORCHINDUCTOR_CACHE_DIR=str(folder / "inductor-cache"))
    with voila(notebook(folder), folder, env) as (url, server_log), sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport=VIEWPORT)
        page.goto(url, timeout=WAIT_S * 1000)
        dash = page.locator(".nk-dashboard")
        status = dash.locator(".nk-status")
        expect(status).to_contain_text("Following logs: no log yet", timeout=60_000)
        with open(folder / "job.log", "wb") as out:
            job = subprocess.Popen([str(bin_dir / "neuronkit"), "record", "--log-dir", "logs", "--",
                                    str(bin_dir / "torchrun"), "--nproc_per_node=2", "train.py"],
                                   cwd=folder, env=env, stdout=out, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            wait_for(lambda: all((folder / f"compiled.rank{r}").exists() for r in (0, 1)),
                     "both ranks' compiles", job)
            events = len(nk.open_log(folder / "logs").events)
            expect(status).to_contain_text(f"{events} compile events", timeout=30_000)
            if not args.running:
                wait_for(lambda: job.poll() is not None, "the job's end")
                expect(status).to_contain_text("run finished", timeout=30_000)
                expect(dash.locator(".nk-follow-stop")).to_be_disabled(timeout=30_000)  # done
            page.wait_for_function("el => el.complete && el.naturalWidth > 0",
                                   arg=dash.locator("img.nk-chart").element_handle())
            page.wait_for_timeout(1000)
            box = dash.bounding_box()
            assert box is not None, "the dashboard is not on the page"
            args.out.parent.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(args.out), clip={
                "x": 0, "y": 0, "width": VIEWPORT["width"], "height": box["y"] + box["height"] + 16})
            print(f"wrote {args.out}: {status.inner_text().strip()}")
            wait_for(lambda: job.poll() is not None, "the job's end")
        except BaseException:
            print((folder / "job.log").read_text()[-3000:], server_log.read_text()[-3000:],
                  sep="\n--- server log ---\n", file=sys.stderr)
            raise
        finally:
            if job.poll() is None:
                stop_group(job)                   # neuronkit record, torchrun and its ranks
            browser.close()
    if args.keep:
        print(f"the job's folder: {folder}")
    else:
        shutil.rmtree(folder, ignore_errors=True)
    return job.returncode


if __name__ == "__main__":
    os.environ.setdefault("MPLBACKEND", "Agg")
    raise SystemExit(main())
