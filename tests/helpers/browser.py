"""Helpers for the real-browser tests: a Voilà or JupyterLab server on 127.0.0.1 and Debian's
Chromium.

A server runs in its own process group with private JUPYTER_* / IPYTHON dirs and a token, and
is always killed (the whole group) on exit. Chromium is ``/usr/bin/chromium`` driven by
Playwright; no browser is ever downloaded. Without Chromium (or Playwright, or the server's
package) the tests skip with the reason, unless NEURONKIT_REQUIRE_BROWSER=1 (CI), where they
fail instead.
"""
from __future__ import annotations

import contextlib
import importlib.util
import json
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Iterator
from urllib.parse import quote

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-background-networking",
                 "--disable-component-update", "--disable-sync", "--no-first-run"]
REQUIRE_ENV = "NEURONKIT_REQUIRE_BROWSER"
# .ci/run installs Chromium beside the Python install; when the install ends it writes apt-get's
# exit status to the file this names, and a browser test waits for that file first
INSTALL_ENV = "NEURONKIT_CHROMIUM_INSTALL_STATUS"
INSTALL_WAIT_S = 900.0
# a widget that still says "Loading widget..." this long after its cell ran was lost on the way
STUCK_LOADING_MS = 30_000
KERNEL_PID_FILE = "kernel.pid"     # a test notebook writes os.getpid() here (see stop_kernel)
KERNEL_PID_CELL = ("import os\nfrom pathlib import Path\n"   # a test notebook's first cell
                   f"_ = Path({KERNEL_PID_FILE!r}).write_text(str(os.getpid()))")
SERVER_PACKAGES = {"voila": "voila", "jupyterlab": "jupyterlab"}   # front end -> python package
# JupyterLab user settings: every cell attached to the page (a tall output stays laid out when
# scrolled away), the notebook's kernel started without a "Select Kernel" dialog, and no news or
# update toasts over the notebook
LAB_SETTINGS = {
    "@jupyterlab/notebook-extension/tracker.jupyterlab-settings": {
        "windowingMode": "none", "autoStartDefaultKernel": True},
    "@jupyterlab/apputils-extension/notification.jupyterlab-settings": {
        "fetchNews": "false", "checkForUpdates": False, "doNotDisturbMode": True},
    "@jupyterlab/apputils-extension/sessionDialogs.jupyterlab-settings": {
        "skipKernelRestartDialog": True},
}
ARTIFACTS_ENV = "NEURONKIT_TEST_OUTPUT"
DEFAULT_ARTIFACTS = Path(__file__).resolve().parents[2] / "test-output"   # git ignores it


def wait_for_chromium_install(timeout_s: float = INSTALL_WAIT_S) -> None:
    """Where $NEURONKIT_CHROMIUM_INSTALL_STATUS names a file, wait until the install writes it;
    fail if it says the install failed or does not come within ``timeout_s``."""
    status_file = os.environ.get(INSTALL_ENV)
    if not status_file:
        return
    deadline = time.monotonic() + timeout_s
    while not os.path.exists(status_file):
        if time.monotonic() > deadline:
            pytest.fail(f"Chromium's install did not end within {timeout_s:g} s "
                        f"(no {status_file}; {INSTALL_ENV} names it)")
        time.sleep(0.5)
    status = Path(status_file).read_text(encoding="utf-8").strip()
    if status != "0":
        pytest.fail(f"Chromium's install failed (apt-get exit status {status!r}, from {status_file})")


def require_browser(front_end: str = "voila") -> None:
    """Skip (or, with NEURONKIT_REQUIRE_BROWSER=1, fail) when the browser stack is missing:
    Chromium, Playwright, and the package serving ``front_end`` ('voila' or 'jupyterlab').
    First waits for a Chromium install still under way (:func:`wait_for_chromium_install`)."""
    wait_for_chromium_install()
    missing = []
    if not os.access(CHROMIUM, os.X_OK):
        missing.append(f"{CHROMIUM} not found (apt-get install -y chromium)")
    for module in ("playwright", SERVER_PACKAGES[front_end]):
        if importlib.util.find_spec(module) is None:
            missing.append(f"python package {module!r} not installed (pip install -e '.[test]')")
    if not missing:
        return
    reason = "browser test needs: " + "; ".join(missing)
    if os.environ.get(REQUIRE_ENV) == "1":
        pytest.fail(f"{reason} ({REQUIRE_ENV}=1 makes this a failure, not a skip)")
    pytest.skip(reason)


def write_notebook(path: Path, cells: list[str]) -> Path:
    """A minimal nbformat-4 notebook of code cells, for the python3 kernel."""
    notebook = {
        "cells": [{"cell_type": "code", "execution_count": None, "id": f"cell-{i}",
                   "metadata": {}, "outputs": [], "source": source}
                  for i, source in enumerate(cells)],
        "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                    "name": "python3"}},
        "nbformat": 4, "nbformat_minor": 5,
    }
    path.write_text(json.dumps(notebook, indent=1), encoding="utf-8")
    return path


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def isolated_env(root: Path, **extra: str) -> dict[str, str]:
    """os.environ with private Jupyter/IPython dirs under ``root`` and this venv first on PATH."""
    env = dict(os.environ)
    for name in ("JUPYTER_CONFIG_DIR", "JUPYTER_DATA_DIR", "JUPYTER_RUNTIME_DIR", "IPYTHONDIR"):
        folder = root / name.lower()
        folder.mkdir(parents=True, exist_ok=True)
        env[name] = str(folder)
    env["PATH"] = os.path.dirname(sys.executable) + os.pathsep + env.get("PATH", "")
    env["MPLBACKEND"] = "Agg"
    env.update(extra)
    return env


def _wait_for_port(port: int, proc: subprocess.Popen, timeout_s: float, log: Path) -> None:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited with {proc.returncode}:\n{tail(log)}")
        with contextlib.suppress(OSError), socket.create_connection(("127.0.0.1", port), 0.5):
            return
        time.sleep(0.2)
    raise TimeoutError(f"the server did not listen on port {port} within {timeout_s} s:\n"
                       f"{tail(log)}")


def tail(path: Path, chars: int = 4000) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")[-chars:]
    except OSError:
        return "(no server log)"


@contextlib.contextmanager
def voila(notebook: Path, workdir: Path, env: dict[str, str],
          timeout_s: float = 60.0) -> Iterator[tuple[str, Path]]:
    """Serve ``notebook`` with Voilà; yields (url with token, server log path)."""
    port, token = free_port(), secrets.token_hex(16)
    cmd = [sys.executable, "-m", "voila", str(notebook), "--no-browser", f"--port={port}",
           "--Voila.ip=127.0.0.1", f"--Voila.token={token}", "--show_tracebacks=True",
           f"--Voila.root_dir={notebook.parent}"]
    with _serve(cmd, port, workdir, env, workdir / "voila.log", timeout_s) as log:
        yield f"http://127.0.0.1:{port}/?token={token}", log


@contextlib.contextmanager
def jupyterlab(notebook_dir: Path, workdir: Path, env: dict[str, str], open_file: str = "",
               timeout_s: float = 90.0) -> Iterator[tuple[str, Path]]:
    """Serve ``notebook_dir`` with JupyterLab (its user settings and workspaces in ``workdir``);
    yields (url with token, server log path). The url opens ``open_file``, a path in
    ``notebook_dir``, when one is given."""
    port, token = free_port(), secrets.token_hex(16)
    settings = workdir / "lab-user-settings"
    for name, values in LAB_SETTINGS.items():
        (settings / name).parent.mkdir(parents=True, exist_ok=True)
        (settings / name).write_text(json.dumps(values), encoding="utf-8")
    cmd = [sys.executable, "-m", "jupyterlab", "--no-browser", "--ServerApp.ip=127.0.0.1",
           f"--ServerApp.port={port}", "--ServerApp.port_retries=0",
           f"--IdentityProvider.token={token}", f"--ServerApp.root_dir={notebook_dir}",
           f"--LabApp.user_settings_dir={settings}",
           f"--LabApp.workspaces_dir={workdir / 'lab-workspaces'}",
           "--LabApp.check_for_updates_class=jupyterlab.NeverCheckForUpdate",
           "--LabApp.extension_manager=readonly"]       # no index to ask about extensions
    if hasattr(os, "geteuid") and os.geteuid() == 0:   # a CI container's user
        cmd.append("--ServerApp.allow_root=True")
    with _serve(cmd, port, workdir, env, workdir / "jupyterlab.log", timeout_s) as log:
        if open_file.endswith(".ipynb"):
            start_notebook_kernel(port, token, open_file, env, timeout_s)
        yield f"http://127.0.0.1:{port}/lab/tree/{quote(open_file)}?token={token}", log


def start_notebook_kernel(port: int, token: str, notebook: str, env: dict[str, str],
                          timeout_s: float) -> None:
    """Start ``notebook``'s session and kernel through the REST API and wait until the kernel
    answers, before the page opens it: JupyterLab then connects to a running kernel (as when a
    user reopens a notebook). Opened while the kernel starts, the first websocket can fail
    (jupyter_server answers 500) and a widget's model is lost on the way."""
    import urllib.error
    import urllib.request

    from jupyter_client import BlockingKernelClient

    body = {"path": notebook, "name": notebook, "type": "notebook", "kernel": {"name": "python3"}}
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/api/sessions", data=json.dumps(body).encode(), method="POST",
        headers={"Authorization": f"token {token}", "Content-Type": "application/json"})
    deadline = time.monotonic() + timeout_s
    while True:
        try:
            with urllib.request.urlopen(request, timeout=timeout_s) as answer:
                kernel_id = json.load(answer)["kernel"]["id"]
            break
        except urllib.error.URLError:
            if time.monotonic() > deadline:
                raise
            time.sleep(0.5)
    client = BlockingKernelClient(
        connection_file=str(Path(env["JUPYTER_RUNTIME_DIR"]) / f"kernel-{kernel_id}.json"))
    client.load_connection_file()
    client.start_channels()
    try:
        client.wait_for_ready(timeout=max(deadline - time.monotonic(), 1.0))
    finally:
        client.stop_channels()


@contextlib.contextmanager
def _serve(cmd: list[str], port: int, workdir: Path, env: dict[str, str], log: Path,
           timeout_s: float) -> Iterator[Path]:
    """Run a server in its own process group until it listens on ``port``; yields its log. On
    exit the whole group is killed, and the notebook's kernel by the pid it wrote in
    ``workdir``."""
    with open(log, "wb") as out:
        proc = subprocess.Popen(cmd, cwd=workdir, env=env, stdout=out, stderr=subprocess.STDOUT,
                                start_new_session=True)
    try:
        _wait_for_port(port, proc, timeout_s, log)
        yield log
    finally:
        stop_group(proc)
        stop_kernel(workdir / KERNEL_PID_FILE)


def run_all_in_jupyterlab(page, url: str, timeout_ms: float = 90_000,
                          dialogs: list[str] | None = None, shows=None) -> None:
    """Open the notebook at ``url`` (from :func:`jupyterlab`) in a Playwright page and run every
    cell from the Run menu, as a user would, until every cell has run. A dialog over the page is
    accepted (its title added to ``dialogs``). JupyterLab can drop queued cells: the kernel
    indicator may say idle before the kernel is connected, and the kernel's first websocket can
    fail while it starts (jupyter_server answers 500, the client reconnects and forgets what it
    queued): cells left unrun ("[ ]") while the kernel is idle are run again from the menu.
    ``shows``: a locator of what the notebook displays (a widget), waited for."""
    dismiss_dialogs(page, dialogs)
    page.goto(url, timeout=timeout_ms)
    idle = page.locator('.jp-NotebookPanel .jp-Notebook-ExecutionIndicator[data-status="idle"]')
    prompts = page.locator(".jp-NotebookPanel .jp-Cell .jp-InputPrompt")
    deadline = time.monotonic() + timeout_ms / 1000
    while not _every_cell_ran(page, prompts, idle, deadline):
        if time.monotonic() > deadline:
            raise AssertionError(f"JupyterLab did not run every cell within {timeout_ms / 1000:.0f} "
                                 f"s: prompts {prompts.all_inner_texts()}")
    if shows is not None:
        _rerun_if_a_widget_was_lost(page, shows, idle, timeout_ms)


def _every_cell_ran(page, prompts, idle, deadline: float) -> bool:
    """Run all cells once from the menu; True once every cell has its number, False when the
    kernel went idle with some cell still unrun (run them all again then)."""
    idle.wait_for(timeout=max(deadline - time.monotonic(), 1) * 1000)
    _run_all_cells(page)
    clicked = time.monotonic()
    while time.monotonic() < deadline:
        texts = [t.strip() for t in prompts.all_inner_texts()]
        if texts and all(re.fullmatch(r"\[\d+\]:?", t) for t in texts):
            return True
        # dropped: nothing queued or running, yet a cell unrun (give the queue a moment first)
        if (time.monotonic() - clicked > 3 and idle.count()
                and not any("*" in t for t in texts) and any(re.fullmatch(r"\[ ?\]:?", t) for t in texts)):
            return False
        page.wait_for_timeout(250)
    return False


def _run_all_cells(page) -> None:
    page.locator(".lm-MenuBar-itemLabel", has_text=re.compile(r"^Run$")).click()
    page.locator(".lm-Menu-itemLabel", has_text=re.compile(r"^Run All Cells$")).click()


def _rerun_if_a_widget_was_lost(page, shows, idle, timeout_ms: float) -> None:
    """When the kernel's first websocket fails (jupyter_server answers 500 while the kernel is
    still starting), the widget's model can be lost on the way: the cell says "Error displaying
    widget: model not found", or "Loading widget..." for good (the widget manager waits for a
    model that never comes). JupyterLab's race, not the widget's. Run the cells once more then
    (also when "Loading widget..." stays STUCK_LOADING_MS); ``shows`` (the widget's locator)
    must appear."""
    from playwright.sync_api import expect

    lost = page.get_by_text("Error displaying widget")
    loading = page.get_by_text("Loading widget...")
    expect(shows.or_(lost).or_(loading).first).to_be_visible(timeout=timeout_ms)
    if loading.count() and not (shows.count() or lost.count()):
        with contextlib.suppress(AssertionError):   # still loading then: lost as well
            expect(shows.or_(lost).first).to_be_visible(timeout=STUCK_LOADING_MS)
    if not shows.count():
        idle.wait_for(timeout=timeout_ms)
        _run_all_cells(page)
        expect(shows.first).to_be_visible(timeout=timeout_ms)


def dismiss_dialogs(page, seen: list[str] | None = None) -> list[str]:
    """Whenever a JupyterLab dialog (kernel choice, a start-up notice) covers the page while the
    test acts, accept it so the click goes through (Playwright's locator handler); each
    dialog's title is added to ``seen`` (returned), for the failure message."""
    seen = [] if seen is None else seen
    dialog = page.locator(".jp-Dialog")

    def accept(found) -> None:
        seen.append(found.locator(".jp-Dialog-header").inner_text(timeout=5_000))
        found.locator(".jp-Dialog-button.jp-mod-accept").first.click(timeout=5_000)

    page.add_locator_handler(dialog, accept)
    return seen


def stop_group(proc: subprocess.Popen, grace_s: float = 10.0) -> None:
    """SIGTERM the process group, then SIGKILL whatever is left after ``grace_s``."""
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGTERM)
    try:
        proc.wait(grace_s)
    except subprocess.TimeoutExpired:
        pass
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, signal.SIGKILL)   # the kernel too, if it outlived the server
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.wait(5)


def stop_kernel(pid_file: Path) -> None:
    """Kill the notebook's kernel by the pid it wrote (jupyter starts kernels in their own
    session, so the server's group does not hold it; it also exits on its own once the server
    is gone)."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(pid_file.read_text().strip())
        for _ in range(20):
            os.kill(pid, 0)                  # raises once it is gone
            time.sleep(0.1)
        os.kill(pid, signal.SIGKILL)


def keep_artifact(path: Path, failed: bool = False) -> Path | None:
    """Copy a screenshot or log to $NEURONKIT_TEST_OUTPUT so CI keeps it; one taken at a failure
    is kept even without it (in ``test-output/`` of the repository). Returns the copy."""
    target = os.environ.get(ARTIFACTS_ENV) or (str(DEFAULT_ARTIFACTS) if failed else "")
    if not target or not path.exists():
        return None
    Path(target).mkdir(parents=True, exist_ok=True)
    return Path(shutil.copy2(path, Path(target) / path.name))
