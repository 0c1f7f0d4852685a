"""``neuronkit record [--log-dir DIR] -- COMMAND ...``: run a command unchanged, every Python
process it starts recording its compiles into DIR (one log per process, named by host and rank).

The command's processes find the hook through a ``sitecustomize.py`` in a temporary folder put
first on ``PYTHONPATH`` (the one it hides still runs), and ``$NEURONKIT_RECORD`` names the folder.
``--install-hook`` instead writes a ``.pth`` file into this Python's site-packages, so that setting
``NEURONKIT_RECORD=DIR`` alone records (a SLURM script you cannot wrap); ``--remove-hook`` removes it.
"""
from __future__ import annotations

import os
import signal
import subprocess
import sys
import sysconfig
import tempfile
import time
from pathlib import Path

from neuronkit.apps.autorecord import ENV, PTH_LINE, PTH_NAME, SITECUSTOMIZE
from neuronkit.log.runs import RUNS_DIR
from neuronkit.safe import terminal_safe

__all__ = ["default_log_dir", "hook_path", "install_hook", "record", "remove_hook"]


def default_log_dir(n: int = 1) -> Path:
    """``neuronkit-logs/<date>-<time>`` under the current folder (``-<n>`` after it for the n-th
    run started in the same second); ``neuronkit report`` with no path reads the latest run."""
    name = time.strftime("%Y%m%d-%H%M%S") + (f"-{n}" if n > 1 else "")
    return Path(RUNS_DIR) / name


def _new_run_dir() -> Path:
    """A run folder of its own: two runs started in the same second never share one."""
    for n in range(1, 1000):
        path = default_log_dir(n)
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            path.mkdir()
            return path
        except FileExistsError:
            continue
    raise FileExistsError(f"no free run folder name under {RUNS_DIR}: pass --log-dir DIR")


def hook_path() -> Path:
    """Where ``--install-hook`` writes the .pth file: this Python's site-packages."""
    return Path(sysconfig.get_paths()["purelib"]) / PTH_NAME


def install_hook() -> Path:
    """Write the .pth hook (then ``NEURONKIT_RECORD=DIR`` alone records any Python process)."""
    path = hook_path()
    path.write_text(PTH_LINE)
    return path


def remove_hook() -> bool:
    """Remove the .pth hook; whether there was one."""
    path = hook_path()
    if not path.exists():
        return False
    path.unlink()
    return True


def _environment(log_dir: Path, site: str) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV] = str(log_dir.resolve())
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    return env


def record(command: list[str], log_dir: str | os.PathLike[str] | None = None) -> int:
    """Run ``command`` with recording on in its Python processes; its exit code (a signal that
    ended it: 128 + the signal, as a shell says)."""
    if not command:
        raise ValueError("neuronkit record needs a command: neuronkit record -- python train.py")
    folder = Path(log_dir) if log_dir is not None else _new_run_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="neuronkit-record-") as site:
        Path(site, "sitecustomize.py").write_text(SITECUSTOMIZE)
        try:
            proc = subprocess.Popen(command, env=_environment(folder, site))
        except OSError as exc:
            print(terminal_safe(f"neuronkit record: cannot run {command[0]!r}: {exc.strerror}"),
                  file=sys.stderr)
            return 127
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)  # Ctrl-C reaches the command
        try:
            code = proc.wait()
        finally:
            signal.signal(signal.SIGINT, previous)
    logs = sorted(folder.glob("*.jsonl"))
    if not logs:
        print(terminal_safe(f"neuronkit record: no compile recorded in {folder}: no Python "
                            "process of the command compiled a graph (torch.compile) before it "
                            "ended"), file=sys.stderr)
    else:
        view = "neuronkit report" + ("" if log_dir is None else f" {folder}")
        print(terminal_safe(f"neuronkit record: {len(logs)} log(s) in {folder}. View them: "
                            f"{view} | neuronkit watch {folder} | "
                            f"RecompileDashboard.follow({str(folder)!r})"), file=sys.stderr)
    return code if code >= 0 else 128 - code
