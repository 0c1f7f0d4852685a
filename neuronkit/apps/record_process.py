"""One recorded process of ``neuronkit record``: its log in the folder, named by host and rank,
its steps and generate calls labelled, its clock noted at the first barrier, stopped at exit.

Started by the startup hook (``autorecord.py``) right after the process imported torch.
``$NEURONKIT_AS_NEURON=1`` (``neuronkit record --as-neuron``): it records with Neuron's compile
rules (``as_neuron=True``).
"""
from __future__ import annotations

import atexit
import itertools
import os
import socket
import sys
import time
from pathlib import Path
from types import ModuleType
from typing import Any

from neuronkit.apps.import_hooks import after_import
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.sources.precompile_shard import install_shard_from_env

__all__ = ["AS_NEURON_ENV", "RANK_VARIABLES", "is_launcher", "log_name", "start"]

# where a launcher puts the process's rank: torchrun, SLURM, then a local rank
RANK_VARIABLES = ("RANK", "SLURM_PROCID", "LOCAL_RANK")
AS_NEURON_ENV = "NEURONKIT_AS_NEURON"  # "1" (record --as-neuron): record with Neuron's rules
_CLOCK_KEY = "neuronkit/clock"
_CLOCK_TIMEOUT_S = 120.0


def _rank() -> int | None:
    for name in RANK_VARIABLES:
        value = os.environ.get(name, "")
        if value.isdigit():
            return int(value)
    return None


def log_name(host: str, rank: int | None, pid: int) -> str:
    """``<host>.rank<N>.jsonl``, or ``<host>.pid<P>.jsonl`` for a process no launcher ranked."""
    host = "".join(c if c.isalnum() or c in "-_" else "_" for c in host) or "host"
    return f"{host}.rank{rank}.jsonl" if rank is not None else f"{host}.pid{pid}.jsonl"


def _path(folder: Path, host: str, rank: int | None) -> Path:
    path = folder / log_name(host, rank, os.getpid())
    if path.exists():  # a restarted rank (an elastic restart): a log of its own
        path = folder / f"{path.name.removesuffix('.jsonl').replace('.rank', f'-{os.getpid()}.rank')}.jsonl"
    return path


def is_launcher(argv: list[str] | None = None) -> bool:
    """torch's own launcher (``torchrun``, ``python -m torch.distributed.run``): it starts the
    ranks and compiles nothing, so it is not recorded (its log would show as one more rank)."""
    first = (sys.argv if argv is None else argv)[:1]
    path = Path(first[0]) if first and first[0] else Path()
    return path.name == "torchrun" or path.parts[-3:] == ("torch", "distributed", "run.py")


def start(folder: str | os.PathLike[str]) -> CompileRecorder | None:
    """Record this process into ``folder`` until it exits (torch's launcher: not recorded)."""
    if is_launcher():
        return None
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    host, rank = socket.gethostname(), _rank()
    ranks = {name.lower(): int(os.environ[name]) for name in ("RANK", "LOCAL_RANK", "WORLD_SIZE",
                                                              "SLURM_PROCID")
             if os.environ.get(name, "").isdigit()}
    path = _path(folder, host, rank)
    recorder = CompileRecorder(path, rank=rank or 0, header={
        "host": host, "pid": os.getpid(), "command": [str(a) for a in sys.argv[:64]],
        "recorded_by": "neuronkit record", **ranks},
        as_neuron=os.environ.get(AS_NEURON_ENV) == "1")
    install_shard_from_env()  # a warm-up shard (NEURONKIT_PRECOMPILE): builds only its graphs
    recorder.start()
    atexit.register(_stop, recorder, path, rank)
    after_import("transformers.trainer", lambda m: _attach_to_trainer(m, recorder))
    after_import("transformers.generation.utils", lambda m: _label_generate(m, recorder))
    _note_clock_at_init(recorder, host)
    return recorder


def _stop(recorder: CompileRecorder, path: Path, rank: int | None) -> None:
    try:
        recorder.stop()
    except Exception as exc:  # e.g. an async device error at the last safe point
        print(f"neuronkit record: stopping the recorder failed ({exc!r})", file=sys.stderr)
    if rank is None and not recorder.events:  # a launcher or helper that compiled nothing
        recorder.log.release()
        path.unlink(missing_ok=True)


def _attach_to_trainer(module: ModuleType, recorder: CompileRecorder) -> None:
    """Every ``Trainer`` gets the compile-events callback on this recorder (step labels, NEFF
    times at logging steps), beside any the script added for a recorder of its own."""
    from neuronkit.workloads.training import CompileEventsCallback

    trainer_class: Any = module.Trainer
    original = trainer_class.__init__

    def __init__(self: Any, *args: Any, **kwargs: Any) -> None:
        original(self, *args, **kwargs)
        handler = getattr(self, "callback_handler", None)
        present = getattr(handler, "callbacks", [])
        ours = [c for c in present if isinstance(c, CompileEventsCallback)]
        if any(c.recorder is recorder for c in ours):
            return
        if ours and handler is not None:  # the script's labels only its recorder; add_callback warns
            handler.callbacks.append(CompileEventsCallback(recorder, quiet=True))  # "already one"
        else:
            self.add_callback(CompileEventsCallback(recorder, quiet=True))
    trainer_class.__init__ = __init__


def _label_generate(module: ModuleType, recorder: CompileRecorder) -> None:
    """``generate()`` calls are labelled ``generate call N`` where nothing else labels them."""
    mixin: Any = module.GenerationMixin
    original = mixin.generate
    calls = itertools.count(1)

    def generate(self: Any, *args: Any, **kwargs: Any) -> Any:
        if recorder.current_context:
            return original(self, *args, **kwargs)
        with recorder.context(f"generate call {next(calls)}"):
            return original(self, *args, **kwargs)
    generate.__doc__, generate.__wrapped__ = original.__doc__, original  # type: ignore[attr-defined]
    mixin.generate = generate


def _note_clock_at_init(recorder: CompileRecorder, host: str) -> None:
    """After ``torch.distributed.init_process_group`` returns, every rank meets at a barrier on
    the process group's store (TCP, no device work) and notes its wall time there."""
    import torch.distributed as dist

    if not dist.is_available():
        return
    original = dist.init_process_group

    def init_process_group(*args: Any, **kwargs: Any) -> Any:
        result = original(*args, **kwargs)
        try:
            recorder.log.set_clock(_store_barrier(dist), host=host)
        except Exception as exc:
            print(f"neuronkit record: no clock point for this rank ({exc!r}); its times are "
                  "not aligned with other hosts'", file=sys.stderr)
        return result
    dist.init_process_group = init_process_group


def _store_barrier(dist: Any) -> float:
    """The wall time when every rank has arrived at the store's counter."""
    from torch.distributed.distributed_c10d import _get_default_store

    store, world = _get_default_store(), dist.get_world_size()
    store.add(_CLOCK_KEY, 1)
    deadline = time.monotonic() + _CLOCK_TIMEOUT_S
    while store.add(_CLOCK_KEY, 0) < world:
        if time.monotonic() > deadline:
            raise TimeoutError(f"not every rank reached the clock barrier in {_CLOCK_TIMEOUT_S} s")
        time.sleep(0.001)
    return time.time()
