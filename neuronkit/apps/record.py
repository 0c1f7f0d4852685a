"""``neuronkit record [--log-dir DIR] -- COMMAND ...``: run a command unchanged, every Python
process it starts recording its compiles into DIR (one log per process, named by host and rank).

The command's processes find the hook through a ``sitecustomize.py`` in a temporary folder put
first on ``PYTHONPATH`` (the one it hides still runs), and ``$NEURONKIT_RECORD`` names the folder.
``--install-hook`` instead writes a ``.pth`` file into this Python's site-packages, so that setting
``NEURONKIT_RECORD=DIR`` alone records (a SLURM script you cannot wrap); ``--remove-hook`` removes it.
``--as-neuron`` sets ``$NEURONKIT_AS_NEURON=1`` for the command: each process records with Neuron's
compile rules (``nk.CompileRecorder(as_neuron=True)``), whatever the device.
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


def _environment(log_dir: Path, site: str, as_neuron: bool = False) -> dict[str, str]:
    env = dict(os.environ)
    env[ENV] = str(log_dir.resolve())
    if as_neuron:
        from neuronkit.apps.record_process import AS_NEURON_ENV

        env[AS_NEURON_ENV] = "1"
    env["PYTHONPATH"] = os.pathsep.join(p for p in (site, env.get("PYTHONPATH", "")) if p)
    return env


def record(command: list[str], log_dir: str | os.PathLike[str] | None = None,
           as_neuron: bool = False) -> int:
    """Run ``command`` with recording on in its Python processes; its exit code (a signal that
    ended it: 128 + the signal, as a shell says). ``as_neuron``: they record with Neuron's
    compile rules."""
    if not command:
        raise ValueError("neuronkit record needs a command: neuronkit record -- python train.py")
    folder = Path(log_dir) if log_dir is not None else _new_run_dir()
    folder.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="neuronkit-record-") as site:
        Path(site, "sitecustomize.py").write_text(SITECUSTOMIZE)
        try:
            proc = subprocess.Popen(command, env=_environment(folder, site, as_neuron))
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
        _write_manifest(folder, command)
    return code if code >= 0 else 128 - code


def _write_manifest(folder: Path, command: list[str]) -> None:
    """The run's manifest beside its logs (every graph it built, and the command: what
    ``neuronkit warmup --manifest`` builds ahead of time), written quietly (docs/cli.md names
    it); a failure is said, not raised."""
    from neuronkit.workloads.run_manifest import write_run_manifest

    try:
        write_run_manifest(folder, command)
    except (OSError, ValueError) as exc:
        print(terminal_safe(f"neuronkit record: no manifest written: {exc}"), file=sys.stderr)
