"""Two things the source creates or reads late, so that code which touches them early shows.

- **The resource manager** (``csrc/core/utils/NeuronResourceManager.cpp:148-205``): built by the
  first ``Instance()`` call (a ``_C`` cache call, ``csrc/core/NeuronBindings.cpp:1014-1140``, or
  the engine at a submit), not at import. Its ``CompilationCache`` reads
  ``NEURON_COMPILATION_CACHE_MAX_*`` (``compilation/CompilationCache.cpp:13-38``) and the lock
  folder (``:41-72``), and its persistent backend ``TORCH_NEURONX_NEFF_CACHE_DIR`` and
  ``TORCH_NEURONX_NEFF_DISABLE_CACHE`` (``cache/PersistentCacheBackend.cpp:18-33,55-59``), then,
  once. ``configure_cache`` does that at the first such call; ``Runtime.manager_created_by``
  names the call.
- **Sync-mode eager ops** (``NEURON_LAUNCH_BLOCKING=1``): ``_get_or_compile_neff`` looks in the
  process-global dict ``_GLOBAL_CACHE`` (``python_ops/compilation/cache.py:15-71``,
  ``python_ops/torch_mlir/kernel.py:785-806``), then ``CompilerSubprocess.get_or_compile``: the
  file ``<dir>/<h>/<h>.neff``, the lock ``<local>/<h>/locks/compile.lock``, the file again, and
  else a neuronx-cc build written atomically (``kernels/compiler_subprocess.py:99-102,161-206``,
  ``kernels/cache_utils.py:8-38``), with the folders read from the environment at each call. No
  C++ counter or entry changes.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from . import keys
from .disk_cache import cache_dirs


def configure_cache(rt: Any, env: Mapping[str, str] | None) -> None:
    """What the ``NeuronResourceManager`` constructor reads, read now (its first ``Instance()``);
    options a test fixed in ``make_fake`` win."""
    env = os.environ if env is None else env
    fixed = rt.fixed
    disk_dir, local_dir = cache_dirs(env)
    rt.persistent_enabled = fixed.get("persistent_enabled",
                                      env.get("TORCH_NEURONX_NEFF_DISABLE_CACHE") != "1")
    if rt.use_disk:
        rt.cache_dir = Path(fixed.get("cache_dir") or disk_dir)
        rt.local_cache_dir = Path(fixed.get("local_cache_dir") or local_dir)
    rt.max_cache_entries = int(env.get("NEURON_COMPILATION_CACHE_MAX_ENTRIES", "0"))
    rt.max_cache_size_bytes = int(env.get("NEURON_COMPILATION_CACHE_MAX_SIZE_MB", "0")) << 20
    rt.configured_cache_dir = Path(fixed.get("cache_dir") or disk_dir)


def _python_caching_disabled() -> bool:
    return os.environ.get("TORCH_NEURONX_NEFF_DISABLE_CACHE", "").lower() in ("true", "1", "yes")


def _write(path: Path, data: bytes) -> None:
    """``atomic_write_bytes``: ``NamedTemporaryFile(suffix=".tmp")`` beside it, then rename."""
    path.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.NamedTemporaryFile(dir=path.parent, delete=False, suffix=".tmp") as tmp:
        tmp.write(data)
    Path(tmp.name).rename(path)


def run_python_eager(rt: Any, op_name: str, py_key: str, ir: bytes) -> None:
    """One sync-mode eager op: the dict, then the Python disk layout, then a build."""
    if py_key in rt.python_cache:
        rt.executed_ops.add(op_name)
        return
    plan = rt._next_plan()
    if plan.outcome == "failed":  # the compile raised; CPU fallback when enabled
        if rt.fallback_enabled:
            rt.fallback_ops.add(op_name)
            return
        raise RuntimeError(f"Compilation failed for {op_name}: {plan.error}")
    disk_dir, local_dir = cache_dirs()
    h = keys.python_neff_key(ir)
    path = disk_dir / h / f"{h}.neff"
    neff = None
    if not _python_caching_disabled():
        if plan.outcome == "disk_hit" and not path.is_file():
            _write(path, rt._neff(py_key))   # as another process wrote it, an hour ago
            old = time.time() - 3600
            os.utime(path, (old, old))
        if not path.is_file():
            lock = local_dir / h / "locks" / "compile.lock"
            lock.parent.mkdir(parents=True, exist_ok=True)
            lock.touch()
        if path.is_file():
            neff = path.read_bytes()
    if neff is None:
        neff = rt._neff(py_key)
        rt.python_builds.append(py_key)   # neuronx-cc ran
        if not _python_caching_disabled():
            _write(path, neff)
    rt.python_cache[py_key] = neff
    rt.executed_ops.add(op_name)
