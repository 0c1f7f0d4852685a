"""Distributed runs: launching torchrun, and whether Trainer can train a tensor-parallel model here.

Compile events are per process: each rank compiles (and recompiles) on its own and writes
``<base>.rank<N>.jsonl``; ``merge_logs`` (``log/rank_logs.py``) folds them into one
:class:`CompileLog` whose events all carry their rank, so charts and advice can compare ranks.

    result = nk.launch("train.py", nproc_per_node=2, log_dir="logs")   # torchrun, streamed
    log = nk.merge_logs(result.log_paths)

:func:`launch` builds the command (:func:`torchrun_command`), streams the run's output within a
deadline (killing the whole process group past it) and names the failed rank. Trainer with
tensor parallelism (``DistributedConfig(tp_size=N)``) only runs where accelerate supports it:
FSDP2 or multi-accelerator runs (Neuron, CUDA). On CPU accelerate refuses it; use
:func:`check_trainer_parallelism` before building the Trainer to get the explanation and the
workaround (a plain training loop here; Trainer on Neuron).

The groups of ranks of a tensor-parallel x FSDP layout, and what each compiled: ``rank_groups.py``.
"""
from __future__ import annotations

import os
import queue
import re
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.log.compile_log import CompileLog
from neuronkit.log.rank_logs import find_rank_logs, merge_logs
from neuronkit.sources.torch_logs import failed_ranks, rank_output, ranks_that_printed, worker_lines

LOG_DIR_ENV = "NEURONKIT_LOG_DIR"   # launch() tells the ranks where to write their logs

__all__ = ["launch", "LaunchResult", "LaunchError", "TrainerParallelismError",
           "check_trainer_parallelism", "torchrun_command", "LOG_DIR_ENV"]


# -- Trainer + tensor parallelism --------------------------------------------------------------
class TrainerParallelismError(RuntimeError):
    """Trainer cannot run this parallel layout on this device."""


def check_trainer_parallelism(model: Any, device: str | None = None) -> None:
    """Raise a clear error when Trainer would refuse ``model`` (tensor parallel on CPU).

    accelerate accepts a tensor-parallel layout only under FSDP2 or on several accelerators; on
    CPU (gloo, DistributedType.MULTI_CPU) Trainer fails at construction with
    "ParallelismConfig is only compatible DistributedType.FSDP ...". Call this before Trainer.
    """
    tp = int(getattr(model, "tp_size", None) or 1)
    if tp <= 1:
        return
    if device is None:
        param = next(iter(model.parameters()), None) if hasattr(model, "parameters") else None
        device = getattr(getattr(param, "device", None), "type", None) or "cpu"
    kind = str(device).partition(":")[0]
    fsdp = getattr(model, "fsdp_size", None)
    sizes = f"tp_size={tp}" + (f", fsdp_size={fsdp}" if isinstance(fsdp, int) and fsdp > 1 else "")
    also = (" (the model's own FSDP sharding does not change that: on CPU accelerate's "
            "distributed type stays MULTI_CPU)" if "fsdp" in sizes else "")
    if kind == "cpu":
        raise TrainerParallelismError(
            f"this model is tensor parallel ({sizes}) on CPU, and Trainer cannot train that: "
            "accelerate accepts a tensor-parallel model only with FSDP2 or on several accelerators "
            "(Neuron, CUDA), and would fail in Trainer(...) with 'ParallelismConfig is only "
            f"compatible DistributedType.FSDP ... but got DistributedType.MULTI_CPU'{also}. Here, "
            "train it with a plain loop (create the optimizer, then forward/backward/step; see "
            "`python -m neuronkit.examples.distributed_training --tp-size N [--fsdp-size M]`), "
            "or use DistributedConfig(fsdp_size=N) with Trainer. On Neuron, with several "
            "accelerators, accelerate's check accepts a tensor-parallel model, so Trainer gets "
            "past this point; neuronkit has not run Trainer with tensor parallelism on "
            "Neuron.")


# -- launching torchrun ------------------------------------------------------------------------
@dataclass
class LaunchResult:
    """What a :func:`launch` run left: exit code, its output lines, the rank logs it wrote."""

    returncode: int
    lines: list[str] = field(default_factory=list)
    log_paths: list[Path] = field(default_factory=list)
    wall_s: float = 0.0
    command: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return self.returncode == 0

    def merged_log(self) -> CompileLog:
        return merge_logs(self.log_paths)


class LaunchError(RuntimeError):
    """A launched run failed (a rank exited non-zero) or ran out of time."""

    def __init__(self, message: str, result: LaunchResult):
        super().__init__(message)
        self.result = result


def launch(script: str | os.PathLike[str], nproc_per_node: int = 2, args: Sequence[str] = (),
           timeout_s: float = 300.0, env: dict[str, str] | None = None,
           cwd: str | os.PathLike[str] | None = None, *, log_dir: str | os.PathLike[str] | None
           = None, on_line: Callable[[str], Any] | None = print, tail: int = 30) -> LaunchResult:
    """Run ``torchrun --standalone --nproc_per_node=N script args`` and stream its output.

    ``script`` is a ``.py`` file or a module name (run with ``-m``). Output lines go to
    ``on_line`` as they arrive (default ``print``: works in a notebook; None: silent). The run is
    killed (its whole process group) after ``timeout_s``. ``log_dir`` is passed to the ranks as
    $NEURONKIT_LOG_DIR and searched for the ``*.rank<N>.jsonl`` logs written during the run.
    A failed rank raises :class:`LaunchError` naming the rank, its exit code and the last lines.
    The ranks run unbuffered and share one pipe: a rank that writes each line in one call
    (``sys.stdout.write(line + "\\n")``) never has its lines split by another rank's.
    """
    command = torchrun_command(script, nproc_per_node, args, cwd)
    child_env = {**os.environ, "PYTHONUNBUFFERED": "1", **(env or {})}
    child_env.setdefault("OMP_NUM_THREADS", "1")
    if log_dir is not None:
        Path(log_dir).mkdir(parents=True, exist_ok=True)
        child_env[LOG_DIR_ENV] = str(Path(log_dir).resolve())
    started = time.time()
    returncode, lines, timed_out = _stream(command, child_env, cwd, started + timeout_s, on_line)
    logs = find_rank_logs(log_dir, newer_than=started - 1) if log_dir is not None else []
    result = LaunchResult(returncode, lines, logs, time.time() - started, command)
    if timed_out:
        last = "\n".join(f"  | {ln}" for ln in lines[-tail:])
        raise LaunchError(f"torchrun ran past timeout_s={timeout_s:g} s and was stopped (all "
                          f"ranks killed). Last lines:\n{last}", result)
    if returncode != 0:
        raise LaunchError(f"torchrun failed: {_failure(lines, returncode, tail)}", result)
    return result


def torchrun_command(script: str | os.PathLike[str], nproc_per_node: int, args: Sequence[str],
                     cwd: str | os.PathLike[str] | None) -> list[str]:
    """The torchrun command line for :func:`launch` (``script``: a ``.py`` file or a module)."""
    if isinstance(nproc_per_node, bool) or not isinstance(nproc_per_node, int) \
            or nproc_per_node < 1:
        raise ValueError(f"nproc_per_node must be a positive int, got {nproc_per_node!r}")
    if isinstance(args, (str, bytes)):
        raise TypeError("args must be a list of strings, e.g. ['--steps', '4'], not one string")
    target = Path(script)
    where = target if target.is_absolute() or cwd is None else Path(cwd) / target
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone",
               f"--nproc_per_node={nproc_per_node}"]
    if target.suffix == ".py" or where.exists():
        if not where.is_file():
            raise FileNotFoundError(f"training script not found: {where}")
        command.append(str(target))
    elif re.fullmatch(r"[A-Za-z_][\w.]*", str(script)):
        command += ["-m", str(script)]
    else:
        raise FileNotFoundError(f"{script!r} is neither a .py file nor a module name")
    return command + [str(a) for a in args]


def _stream(command: list[str], env: dict[str, str], cwd: str | os.PathLike[str] | None,
            deadline: float, on_line: Callable[[str], Any] | None) -> tuple[int, list[str], bool]:
    """Run ``command`` in a process group of its own, handing each output line to ``on_line``;
    past ``deadline`` (or if ``on_line`` raises, or Ctrl-C) the whole group is killed. Returns the
    exit code, every line, and whether the deadline passed."""
    proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                            bufsize=1, env=env, cwd=cwd, start_new_session=True,
                            errors="replace")
    lines: list[str] = []
    lines_q: queue.Queue[str | None] = queue.Queue()
    reader = threading.Thread(target=_pump, args=(proc, lines_q), daemon=True)
    reader.start()
    try:
        timed_out = not _read_until(lines_q, deadline, lines, on_line)
        if not timed_out:           # output closed: the run is ending; still bound the wait
            try:
                proc.wait(timeout=max(0.1, deadline - time.time()))
            except subprocess.TimeoutExpired:
                timed_out = True
        if timed_out:
            _kill_group(proc)
        returncode = proc.wait()
        reader.join(timeout=5)
    except BaseException:       # Ctrl-C, or on_line raised: never leave torchrun running
        _kill_group(proc)
        raise
    finally:
        if proc.stdout is not None:
            proc.stdout.close()
    while not lines_q.empty():  # what arrived while the run was being stopped
        line = lines_q.get_nowait()
        if line is not None:
            lines.append(line)
    return returncode, lines, timed_out


def _pump(proc: subprocess.Popen, lines_q: queue.Queue[str | None]) -> None:
    """The reader thread: every output line into ``lines_q``, then None (the output closed)."""
    assert proc.stdout is not None
    for line in proc.stdout:
        lines_q.put(line.rstrip("\n"))
    lines_q.put(None)


def _read_until(lines_q: queue.Queue[str | None], deadline: float, lines: list[str],
                on_line: Callable[[str], Any] | None) -> bool:
    """Take lines into ``lines`` (and ``on_line``) until the output closes (True) or the
    deadline passes (False)."""
    while True:
        left = deadline - time.time()
        if left <= 0:
            return False
        try:
            line = lines_q.get(timeout=min(left, 0.5))
        except queue.Empty:
            continue
        if line is None:
            return True
        lines.append(line)
        if on_line is not None:
            on_line(line)


def _failure(lines: list[str], returncode: int, tail: int) -> str:
    """Which rank failed first, with what, and its last lines (torchrun prefixes them [rankN]:)."""
    failed, root = failed_ranks("\n".join(lines))
    root = root or (failed[0] if failed else None)
    if root is None:
        raised = ranks_that_printed(lines)
        root = (raised[0], returncode) if raised else None
    if root is None:
        own, head = [], f"exit code {returncode}"
    else:
        own = rank_output(lines, root[0])
        head = f"rank {root[0]} exited with code {root[1]}"
        others = [f"rank {r} ({c})" for r, c in failed if r != root[0]]
        if own:
            head += f": {own[-1]}"
        if others:
            head += f"\n(other ranks stopped too: {', '.join(others)})"
    shown = own or worker_lines(lines) or lines
    last = "\n".join(f"  | {ln}" for ln in shown[-tail:])
    whose = f"rank {root[0]}'s" if own and root is not None else "the"
    return f"{head}\n{whose} last {min(tail, len(shown))} lines:\n{last}"


def _kill_group(proc: subprocess.Popen) -> None:
    """SIGTERM the run's process group (torchrun and every rank), SIGKILL after 5 s."""
    for sig, wait in ((signal.SIGTERM, 5.0), (signal.SIGKILL, 5.0)):
        try:
            os.killpg(proc.pid, sig)
        except ProcessLookupError:
            return
        try:
            proc.wait(timeout=wait)
            return
        except subprocess.TimeoutExpired:
            continue
