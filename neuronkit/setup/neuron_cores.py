"""Which processes hold NeuronCores, as ``neuron-ls --json-output`` says, for ``neuronkit doctor``.

The Neuron runtime reserves a process's NeuronCores (by default all of them) until that process
ends: "Once a NeuronCore is reserved for a process, it cannot be used by another process at all,
until the process reserving that NeuronCore is terminated" (Neuron 2.33 docs, Neuron Runtime
configuration, NeuronCore allocation:
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.33.0/neuron-runtime/guides/configuration-guide.html).
A notebook kernel that ran a model on Neuron therefore blocks a second notebook and the torchrun
workers it launches.

``neuron-ls -j`` prints a list with one object per Neuron device: ``neuron_device``, ``nc_count``,
``neuroncore_ids`` and ``neuron_processes``, a list of ``{"pid", "command",
"neuron_runtime_version"}`` (the ``neuron-ls -j`` example of the Neuron LS User Guide,
https://awsdocs-neuron.readthedocs-hosted.com/en/v2.28.0/_sources/tools/neuron-sys-tools/neuron-ls.rst).
Neuron 2.34 drops that format for ``--output-format json`` (announce-intent-eos-neuron-ls-json),
so anything else is reported as unreadable, never guessed at. Its text is untrusted: every field
is type-checked and shown escaped.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from neuronkit.setup.cache_text import printable
from neuronkit.setup.neuron_stack import Finding

NEURON_LS = "neuron-ls"
NEURON_LS_DEFAULT = "/opt/aws/neuron/bin/neuron-ls"  # where aws-neuronx-tools installs it
NEURON_LS_TIMEOUT_S = 10.0
VISIBLE_CORES_ENV = "NEURON_RT_VISIBLE_CORES"
NUM_CORES_ENV = "NEURON_RT_NUM_CORES"
CHECK_NAME = "NeuronCores"

__all__ = ["CHECK_NAME", "NEURON_LS", "NEURON_LS_DEFAULT", "NUM_CORES_ENV", "VISIBLE_CORES_ENV",
           "CoreUser", "core_ranges", "find_neuron_ls", "neuron_core_checks", "parse_neuron_ls"]


@dataclass
class CoreUser:
    """A process ``neuron-ls`` lists on one or more devices, and the NeuronCores of those."""

    pid: int
    command: str
    devices: list[int] = field(default_factory=list)
    cores: list[int] = field(default_factory=list)

    def __str__(self) -> str:
        me = "this process" if self.pid == os.getpid() else ""
        label = ": ".join(x for x in (me, self.command) if x)
        where = (f"device{'s' if len(self.devices) != 1 else ''} {core_ranges(self.devices)}"
                 + (f", NeuronCores {core_ranges(self.cores)}" if self.cores else ""))
        return f"pid {self.pid}" + (f" ({label})" if label else "") + f" on {where}"


def core_ranges(ids: list[int]) -> str:
    """``[0, 1, 2, 3, 8]`` -> ``"0-3,8"``."""
    runs: list[list[int]] = []
    for i in sorted(set(ids)):
        if runs and runs[-1][1] == i - 1:
            runs[-1][1] = i
        else:
            runs.append([i, i])
    return ",".join(str(a) if a == b else f"{a}-{b}" for a, b in runs)


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def parse_neuron_ls(text: str, limit: int = 120) -> list[CoreUser]:
    """The processes in ``neuron-ls --json-output`` text, one per pid, with their devices and
    cores; raises ValueError where the text is not that JSON (a list of device objects)."""
    data = json.loads(text)
    if not isinstance(data, list) or not all(isinstance(d, dict) for d in data):
        raise ValueError("not a list of device objects")
    users: dict[int, CoreUser] = {}
    for device in data:
        index = _int(device.get("neuron_device"))
        procs, ids = device.get("neuron_processes"), device.get("neuroncore_ids")
        cores = [i for i in ids if _int(i) is not None] if isinstance(ids, list) else []
        for proc in procs if isinstance(procs, list) else []:
            pid = _int(proc.get("pid")) if isinstance(proc, dict) else None
            if pid is None or pid <= 0:
                continue
            command = proc.get("command")
            command = printable(command) if isinstance(command, str) else ""
            user = users.setdefault(pid, CoreUser(pid, command[:limit - 3] + "..."
                                                  if len(command) > limit else command))
            if index is not None:
                user.devices.append(index)
            user.cores += cores
    return sorted(users.values(), key=lambda u: (min(u.devices, default=1 << 30), u.pid))


def find_neuron_ls(env: Mapping[str, str]) -> str | None:
    """``neuron-ls`` on ``PATH``, else where aws-neuronx-tools installs it, else None."""
    found = shutil.which(NEURON_LS, path=env.get("PATH", os.defpath))
    if found:
        return found
    return NEURON_LS_DEFAULT if os.access(NEURON_LS_DEFAULT, os.X_OK) else None


def _read(path: str, run: Callable[..., Any]) -> tuple[list[CoreUser] | None, str]:
    """(the processes, "") or (None, why not)."""
    try:
        done = run([path, "--json-output"], capture_output=True, text=True, errors="replace",
                   stdin=subprocess.DEVNULL, timeout=NEURON_LS_TIMEOUT_S)
    except subprocess.TimeoutExpired:
        return None, f"{printable(path)} --json-output ran past {NEURON_LS_TIMEOUT_S:g} s"
    except OSError as exc:
        return None, f"{printable(path)} could not be run ({exc.strerror})"
    if done.returncode != 0:
        said = next((ln for ln in (done.stderr or "").splitlines() if ln.strip()), "")
        return None, (f"{printable(path)} --json-output exited with {done.returncode}"
                      + (f": {printable(said[:200])}" if said else ""))
    try:
        return parse_neuron_ls(done.stdout or ""), ""
    except ValueError:
        return None, (f"the output of {printable(path)} --json-output is not the JSON neuronkit "
                      "reads (a list of devices; Neuron 2.34 replaces it with --output-format "
                      "json)")


def _env_note(env: Mapping[str, str]) -> str:
    """What this environment passes on to the processes it starts."""
    value = env.get(VISIBLE_CORES_ENV)
    if not value:
        return ""
    return (f" {VISIBLE_CORES_ENV}={printable(value)} is set here: every process started from "
            "this one inherits it, and torch-neuronx's process group keeps it instead of giving "
            "each rank its own core (distributed/backend.py:216-218,263-265), so torchrun workers "
            "started with it ask for the same cores.")


def neuron_core_checks(stack: str, env: Mapping[str, str] | None = None,
                       run: Callable[..., Any] = subprocess.run) -> list[Finding]:
    """One check: the processes holding NeuronCores, as ``neuron-ls`` says. Where it cannot be
    run, it says so (on a machine without a Neuron stack, where there is nothing to hold, it is
    left out)."""
    env = os.environ if env is None else env
    path = find_neuron_ls(env)
    if path is None:
        if not stack:
            return []
        return [Finding("tip", CHECK_NAME, "could not check which processes hold NeuronCores: "
                        f"neuron-ls is not on PATH (nor at {NEURON_LS_DEFAULT}; it comes with "
                        "aws-neuronx-tools)." + _env_note(env))]
    users, why = _read(path, run)
    if users is None:
        return [Finding("tip", CHECK_NAME, f"could not check which processes hold NeuronCores: "
                        f"{why}." + _env_note(env))]
    if not users:
        return [Finding("ok", CHECK_NAME, "neuron-ls lists no process using a Neuron device: "
                        "the NeuronCores are free." + _env_note(env))]
    return [Finding("warn", CHECK_NAME, f"in use by {'; '.join(str(u) for u in users)}. The Neuron "
                    "runtime keeps a process's NeuronCores until that process ends, so another "
                    "process that needs them (a second notebook, torchrun's workers) fails. Fix: "
                    "end that process (restart its notebook kernel: `del model` does not release "
                    f"them), or give each process its own cores ({VISIBLE_CORES_ENV}=0-3, or "
                    f"{NUM_CORES_ENV}=N) before it first uses Neuron." + _env_note(env))]
