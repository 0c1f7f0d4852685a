"""What native torch-neuronx's state says, read without creating or configuring anything in it.

Read against the source snapshot (``parmoham-aws/test-repo-parmoham`` at ``98154b86``; paths
under ``torch_neuronx/``):

- **The compilation cache is created by its first user.** ``NeuronResourceManager::Instance()``
  builds the C++ ``CompilationCache`` (``csrc/core/utils/NeuronResourceManager.cpp:148-205``),
  which reads ``NEURON_COMPILATION_CACHE_MAX_*`` and the lock folder
  (``csrc/core/compilation/CompilationCache.cpp:13-72``) and whose persistent backend reads
  ``TORCH_NEURONX_NEFF_CACHE_DIR`` (``csrc/core/cache/PersistentCacheBackend.cpp:22-33``), once,
  and starts the worker. Every ``_C`` cache call (``_get_all_cache_keys``,
  ``_get_compilation_cache_entries``, ... ``csrc/core/NeuronBindings.cpp:1014-1140``) calls
  ``Instance()``; importing torch-neuronx does not. A recorder that called them at start would fix
  the job's cache folder before the job set it. So they are called only once the job has used
  the device: its runtime initialized (``csrc/core/NeuronBindings.cpp:258-326``; a device tensor's
  allocation also calls ``Instance()``, ``csrc/core/allocator/NeuronCachingAllocator.cpp:192``), a
  graph compiled (``neuron_dynamo_backend/metrics.py:183-201``) or an eager op ran
  (``csrc/core/NeuronOpTracking.cpp``: its own singletons, no cache).
- **Graphs built before recording** are in the backend's private list of metrics, whose
  ``graph_id`` is set when the graph is submitted (``neuron_dynamo_backend/metrics.py:183-201``):
  a plain list, read without a synchronize.
- **Sync mode** (``NEURON_LAUNCH_BLOCKING=1``, the RELEASE build's default,
  ``_build_config.py:7-11`` applied by ``__init__.py:46``): eager ops compile in Python and keep
  their NEFFs in a process-global dict (``python_ops/compilation/cache.py:15-71``,
  ``python_ops/torch_mlir/kernel.py:785-806,925-934``), not in the C++ cache. A miss there is built
  by neuronx-cc, or read from the Python layout of the NEFF disk cache
  ``<TORCH_NEURONX_NEFF_CACHE_DIR>/<h>/<h>.neff`` (``kernels/compiler_subprocess.py:99-102,161-206``),
  which nothing tells apart per kernel; a build writes that file (``kernels/cache_utils.py:28-38``).
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any

from neuronkit.setup.device import loaded_neuronx_attr

__all__ = ["blocking", "cache_in_use", "compiled_graphs", "graph_keys", "graph_keys_before",
           "is_graph_key", "op_of_key", "ops_executed", "python_kernel_keys", "python_neffs_written"]

_GRAPH_KEY = re.compile(r"^[0-9a-f]{64}(_|$)")          # sha256 base key of a compiled graph
_HASH_DIR = re.compile(r"^[0-9a-f]{64}$")               # the Python layout's <h>
# What may follow the op name in an eager key (``kernels/base.py:135-160``): a tensor
# (``t0_(2, 3)``), a list element (``sub_arg0_0``), a static value, a slice, a scalar's type
# (``s1_int``), or torch-neuronx's C++ suffix ``_<target>_<lnc>_<opt>_--model-type...``
# (``csrc/core/KernelExecution.cpp:25-57``).
_AFTER_OP = re.compile(r"_(?:t\d+_\(|sub_arg\d+_\d+_|static\d+_|slice\d+_|s\d+_[A-Za-z]"
                       r"|[a-z]+\d*[a-z]*_\d+_[^_]+_--)")
_OP = re.compile(r"^[A-Za-z_][\w]*::[\w]+(?:\.[\w]+)?")


def blocking() -> bool:
    """Sync mode: exactly "1" (torch_neuronx sets its build's default at import, so once it is
    loaded the variable is there; any other value is async, as the doctor says)."""
    return os.environ.get("NEURON_LAUNCH_BLOCKING") == "1"


def is_graph_key(key: str) -> bool:
    """A compiled graph's cache key (64 hex characters first), not an eager op's."""
    return bool(_GRAPH_KEY.match(key))


def op_of_key(key: str) -> str:
    """The op an eager kernel's cache key names (``aten::cat``, ``aten::zeros``), else "?".

    Op names hold underscores, and so do the parts after them, so the name ends at the first
    ``_`` that a key part or the C++ suffix follows (or at the key's end)."""
    match = _OP.match(key)
    if match is None:
        return "?"
    head = match.group(0)
    for i, char in enumerate(head):
        if char == "_" and i > head.index("::") + 2 and _AFTER_OP.match(key, i):
            return head[:i]
    rest = key[len(head):]
    return head if not rest or _AFTER_OP.match(rest) or rest.startswith("_") else "?"


def compiled_graphs() -> int:
    """torch-neuronx's count of graphs it compiled (``counters["neuron"]``), without a sync."""
    from torch._dynamo.utils import counters

    neuron = counters.get("neuron")
    return int(neuron.get("compiled_graphs", 0)) if neuron is not None else 0


def ops_executed(module: Any) -> bool:
    """Some eager op ran on Neuron (``get_executed_ops()``: a tracker of its own, no cache)."""
    try:
        return bool(module.get_executed_ops())
    except Exception:  # a changed private API: not known
        return False


def cache_in_use(module: Any) -> bool:
    """Whether the job has created torch-neuronx's compilation cache (see the module docstring):
    reading it now changes nothing the job would have chosen."""
    if compiled_graphs() > 0:
        return True
    try:
        if module.is_neuron_runtime_initialized():
            return True
    except Exception:  # a changed API: not known to be in use
        pass
    return ops_executed(module)


def _backend_metrics() -> list[Any] | None:
    """The backend's private list of per-graph metrics (``neuron_dynamo_backend/metrics.py``)."""
    entries = loaded_neuronx_attr("neuron_dynamo_backend.metrics", "_compilation_metrics")
    return entries if isinstance(entries, list) else None


def graph_keys_before(module: Any) -> set[str] | None:
    """The graph keys torch-neuronx's backend has recorded so far (no sync, no cache call), or
    None where its private list is not there."""
    entries = _backend_metrics()
    if entries is None:
        return None
    return {str(getattr(e, "graph_id", "")) for e in list(entries)} - {""}


def graph_keys(lo: int, hi: int) -> list[str] | None:
    """The cache keys of the backend's graphs ``lo`` to ``hi`` (indices into its list, which
    ``reset_dynamo_metrics`` clears with the counter), or None where not readable."""
    entries = _backend_metrics()
    if entries is None or len(entries) < hi:
        return None
    return [str(getattr(e, "graph_id", "")) for e in entries[lo:hi]]


def python_kernel_keys() -> set[str] | None:
    """Sync mode's eager kernels: the keys of the process-global NEFF dict, or None where absent."""
    cache = loaded_neuronx_attr("python_ops.compilation.cache", "_GLOBAL_CACHE")
    return {str(k) for k in list(cache)} if isinstance(cache, dict) else None


def _python_cache_disabled() -> bool:
    """``kernels/cache_utils.py:18-20``: the Python writer's switch (true / 1 / yes)."""
    return os.environ.get("TORCH_NEURONX_NEFF_DISABLE_CACHE", "").lower() in ("true", "1", "yes")


def python_neffs_written(since: float) -> int | None:
    """NEFF files of the Python layout written at or after ``since`` (a wall-clock time) in the
    NEFF cache folder: sync-mode kernel builds, of this process or of another sharing the
    folder. None when the folder is not written (the cache disabled): every miss is a build."""
    if _python_cache_disabled():
        return None
    root = Path(os.environ.get("TORCH_NEURONX_NEFF_CACHE_DIR") or "/tmp/neff_cache")
    count = 0
    try:
        folders = list(os.scandir(root))
    except OSError:
        return 0
    for entry in folders:
        if not _HASH_DIR.match(entry.name):
            continue
        try:
            if os.stat(Path(entry.path) / f"{entry.name}.neff").st_mtime >= since:
                count += 1
        except OSError:
            continue
    return count
