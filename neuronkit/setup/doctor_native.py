"""``neuronkit doctor`` checks for the native torch-neuronx ("TorchNeuron", Trn2/Trn3): how it
compiles (``NEURON_LAUNCH_BLOCKING``), what it measures (``TORCH_NEURONX_METRICS_ENABLED``), what
reaches neuronx-cc (``NEURON_CC_FLAGS``) and whether the compiler is on ``PATH``, where its NEFFs
go (``TORCH_NEURONX_NEFF_CACHE_DIR``) and what its lock files say, and whether transformers /
accelerate have the Neuron paths neuronkit uses.

Reads the environment, ``PATH``, lock files and package metadata only; whatever touches
torch_neuronx is in device.py.
"""
from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Callable, Mapping

from neuronkit.setup.cache_native import LOCK_TIMEOUT_ENV, NativeCache
from neuronkit.setup.cache_text import printable
from neuronkit.setup.device import DeviceReport, neuronx_build_type
from neuronkit.setup.neuron_stack import NEURON_PIP_REPO, Finding
from neuronkit.setup.packages import package_version

Check = Finding  # status "ok" | "warn" | "tip", name, text (what was found, and the fix)

LAUNCH_BLOCKING_ENV = "NEURON_LAUNCH_BLOCKING"
METRICS_ENV = "TORCH_NEURONX_METRICS_ENABLED"
METRICS_ON = ("1", "true", "TRUE", "yes", "YES")  # the only values torch-neuronx accepts
CC_FLAGS_ENV = "NEURON_CC_FLAGS"
NEFF_CACHE_ENV = "TORCH_NEURONX_NEFF_CACHE_DIR"
NEFF_CACHE_DEFAULT = "/tmp/neff_cache"
NEFF_DISABLE_ENV = "TORCH_NEURONX_NEFF_DISABLE_CACHE"
NEFF_CACHE_FIX = f"set {NEFF_CACHE_ENV} to a writable folder (default {NEFF_CACHE_DEFAULT})"

# First releases with each Neuron path neuronkit relies on, read from the released wheels'
# source (training_args.py, modeling_utils.py, distributed/, accelerate/state.py).
TRANSFORMERS_NEURON = (
    ("5.4.0", "Trainer runs on the 'neuron' device (is_torch_neuron_available)"),
    ("5.14.0", "TrainingArguments(torch_compile=True) picks torch_compile_backend='neuron', and "
               "device_map='neuron' skips the allocator warm-up Neuron lacks"),
    ("5.15.0", "the 'neuron' torch.distributed backend for the neuron device"),
    ("5.16.1", "from transformers import DistributedConfig (tp_size / fsdp_size)"),
)
ACCELERATE_NEURON = (
    ("1.13.0", "accelerate knows the 'neuron' device (PartialState, MULTI_NEURON, device maps)"),
)

__all__ = ["settings_checks", "library_checks", "launch_blocking_check", "metrics_check",
           "cc_flags_check", "neff_cache_check", "compiler_check", "lock_checks",
           "missing_features", "Check", "METRICS_ON",
           "NEFF_CACHE_DEFAULT", "NEFF_CACHE_FIX", "TRANSFORMERS_NEURON", "ACCELERATE_NEURON"]

_SYNC = ("sync mode: every op waits for its compile and run (csrc/c10/neuron/NeuronStream.cpp:"
         "288-299). For recording: a torch.compile graph's neuronx-cc build lies inside Dynamo's "
         "compile time; eager ops bypass the C++ compilation cache and compile in Python "
         "(python_ops/torch_mlir/kernel.py:785-806,925-934), and neuronkit counts their kernels "
         "from that process-global dict (python_ops/compilation/cache.py:15-71) without their "
         "build times; whether each was built or read from the NEFF disk cache is not told "
         "apart per kernel: neuronkit counts at most as many builds as NEFF files written to the "
         "cache folder since the last safe point")
_ASYNC = ("async mode: NEFF builds finish on a worker thread after Dynamo returns, so their time "
          "is not in Dynamo's compile time: neuronkit reads it at safe points (synchronize, step "
          "ends; get_dynamo_metrics() and the C++ cache entries); eager-op kernels are seen "
          "through the C++ compilation cache, counted and timed; errors surface at the next "
          "synchronize()")


def settings_checks(report: DeviceReport, env: Mapping[str, str] | None = None) -> list[Check]:
    """The compile settings of native torch-neuronx. Where it is not installed, a setting is
    shown only when its variable is set (``NEURON_CC_FLAGS`` always)."""
    env = os.environ if env is None else env
    native = report.stack == "native"
    out = []
    if native or LAUNCH_BLOCKING_ENV in env:
        out.append(launch_blocking_check(env))
    if native or METRICS_ENV in env:
        out.append(metrics_check(env))
    out.append(cc_flags_check(report.stack, env))
    if native:
        out.append(compiler_check(env))
    disabled = neff_cache_check(env)
    if disabled is not None:
        out.append(disabled)
    return out


def launch_blocking_check(env: Mapping[str, str],
                          build: tuple[str | None, str] | None = None) -> Check:
    """Which mode this machine runs: ``NEURON_LAUNCH_BLOCKING`` where set (``"1"`` sync, anything
    else async), else the installed build's default, read from its ``_build_config.py`` without
    importing it (RELEASE "1", otherwise "0": ``tn/_build_config.py:7-18``, applied with
    ``setdefault`` at ``tn/__init__.py:46``). ``build``: (build type, how found), for tests."""
    value = env.get(LAUNCH_BLOCKING_ENV)
    build_type, found = neuronx_build_type() if build is None else build
    default = None if build_type is None else ("1" if build_type == "RELEASE" else "0")
    once = "read once per process: set it before importing torch_neuronx"
    if value is None and default is None:
        return Check("ok", LAUNCH_BLOCKING_ENV, f"not set, and this machine's torch-neuronx build "
                     f"type is not known ({found}): the mode is not known. RELEASE builds default "
                     f"to '1', DEV builds to '0'. '1' = {_SYNC}. '0' = {_ASYNC}. Set it to know "
                     f"which ({once})")
    effective = value if value is not None else default
    mode = _SYNC if effective == "1" else _ASYNC
    this = f"this {build_type} build ({found})"
    if value is None:
        where = f"not set: {this} defaults to {effective!r}"
    elif value == default:
        where = f"{value!r}, {this}'s default (importing torch_neuronx sets it when unset)"
    else:
        where = f"{value!r}" + (f" (set; {this} defaults to {default!r})" if default else "")
    if effective != "1":
        return Check("ok", LAUNCH_BLOCKING_ENV, f"{where} = {mode}. '1' gives sync mode ({once})")
    fix = (f"unset it, or export {LAUNCH_BLOCKING_ENV}=0" if default == "0" else
           f"export {LAUNCH_BLOCKING_ENV}=0 before starting Python; unsetting it does not help: "
           + ("this build's default is '1'" if default else "RELEASE builds default to '1'"))
    return Check("ok", LAUNCH_BLOCKING_ENV, f"{where} = {mode}. For async mode: {fix} ({once})")


def metrics_check(env: Mapping[str, str]) -> Check:
    """``TORCH_NEURONX_METRICS_ENABLED``: on, misspelt, off, or not set (then a tip)."""
    value = env.get(METRICS_ENV)
    enable = f"export {METRICS_ENV}=1 (accepted: {'/'.join(METRICS_ON)}) before starting Python"
    if value in METRICS_ON:
        return Check("ok", METRICS_ENV, f"{value!r}: kernel compiles are counted and timed "
                     "(CompilationCache.TotalCompilations / CompilationTime in "
                     "torch_neuronx.metrics)")
    if value is not None and value.strip().lower() in ("1", "true", "yes", "on", "y", "enabled"):
        return Check("warn", METRICS_ENV, f"{value!r} does not turn metrics on: torch-neuronx "
                     f"accepts only {', '.join(METRICS_ON)}. Fix: {enable}")
    what = "not set" if value is None else f"{value!r} (off)"
    return Check("tip", METRICS_ENV, f"{what}: torch-neuronx keeps no cache hit/miss counters and "
                 "no CompilationTime samples (torch_neuronx.metrics); compile times are kept all "
                 "the same: each in-memory cache entry carries its build time "
                 "(_C._get_compilation_cache_entries(), which works with metrics off), and "
                 "neuronkit reads NEFF and kernel seconds from there. For the counters too: "
                 f"{enable}")


def cc_flags_check(stack: str, env: Mapping[str, str]) -> Check:
    """``NEURON_CC_FLAGS``: parseable, honest about quoting, no XLA-era ``--cache_dir``."""
    flags = env.get(CC_FLAGS_ENV)
    if not flags or not flags.strip():
        return Check("ok", CC_FLAGS_ENV, "not set: neuronx-cc gets torch-neuronx's defaults only "
                     "(eager ops -O1, graphs -O2; NEURON_COMPILER_OPT_LEVEL changes the level)")
    native = ("native torch-neuronx passes it straight to neuronx-cc, split on whitespace (no "
              "quoting), and it is part of the compile-cache key, so changing it recompiles every "
              "graph")
    problems, fixes, serious = [], [], False
    try:
        quoted = shlex.split(flags) != flags.split()
    except ValueError as exc:
        problems.append(f"cannot be parsed ({exc})")
        fixes.append("balance or drop the quotes")
        serious = True
    else:
        if quoted and stack != "xla":
            problems.append("uses quotes, which native torch-neuronx passes on as they are")
            fixes.append("drop the quotes (one option per word)")
            serious = True
    if stack != "xla" and any(w.split("=", 1)[0] == "--cache_dir" for w in flags.split()):
        problems.append("has --cache_dir, an option of the XLA-based torch-neuronx that the "
                        "native NEFF cache ignores (neuronx-cc receives it as is)")
        fixes.append(f"remove --cache_dir and {NEFF_CACHE_FIX}")
        serious = serious or stack == "native"
    if not problems:
        return Check("ok", CC_FLAGS_ENV, f"{flags!r}: {native}")
    return Check("warn" if serious else "ok", CC_FLAGS_ENV,
                 f"{flags!r} {'; '.join(problems)}. Note: {native}. Fix: {'; '.join(fixes)}")


def compiler_check(env: Mapping[str, str],
                   which: Callable[..., str | None] = shutil.which) -> Check:
    """``neuronx-cc`` on ``PATH``: torch-neuronx runs it by name, ``execvp`` searching ``PATH``
    (``csrc/core/compilation/NeuronCompiler.cpp``; the Python path uses ``shutil.which``)."""
    found = which("neuronx-cc", path=env.get("PATH", os.defpath))
    if found:
        return Check("ok", "neuronx-cc", f"{found}: torch-neuronx runs it by name (execvp "
                     "searches PATH) for every NEFF build")
    version = package_version("neuronx-cc")
    where = (f"neuronx-cc {version} is installed, but its command is not on PATH: activate the "
             "environment it was installed in (its bin/ folder on PATH) before starting Python"
             if version else f"pip install 'neuronx-cc==2.*' --extra-index-url={NEURON_PIP_REPO} "
             "in this environment, with its bin/ folder on PATH")
    return Check("warn", "neuronx-cc", "not on PATH: torch-neuronx runs neuronx-cc by name "
                 "(execvp), so every NEFF build fails: compiled graphs raise at the next "
                 f"synchronize and eager ops fall back to the CPU. Fix: {where}")


def lock_checks(cache: NativeCache) -> list[Check]:
    """The native cache's lock files. A held lock is a build in progress: its holder is named
    where ``/proc/locks`` tells, never called stale (lock files are reused and their time never
    refreshed, ``core/cache/FileLock.cpp:87``; a waiter breaks a lock after the timeout counted
    from its own wait start, ``:114-167``). An old lock file nobody holds is a normal leftover."""
    locks = cache.locks
    if not locks:
        return []
    held, old = cache.held_locks, len(cache.leftover_locks)
    unknown = sum(lk.held is None for lk in locks)
    text = f"{len(locks)} lock file{'s' if len(locks) != 1 else ''}, {len(held)} held now"
    if old:
        text += (f"; {old} old one{'s' if old != 1 else ''} no process holds: "
                 + ("a normal leftover of a finished compile (`neuronkit cache --prune` tidies it)"
                    if old == 1 else "normal leftovers of finished compiles (`neuronkit cache "
                    "--prune` tidies them)"))
    if unknown:
        text += f"; {unknown} could not be checked (no permission to open them)"
    out = [Check("ok", "lock files", text)]
    if held:
        who = sorted({str(h) for lk in held for h in lk.holders})
        named = (f"held by {'; '.join(who[:3])}" + (f" and {len(who) - 3} more" if len(who) > 3
                                                     else "")
                 if who else "their holder not named (/proc/locks does not list it)")
        one = len(held) == 1
        out.append(Check("ok", "held locks", f"{len(held)} lock{'' if one else 's'} held now, "
                         f"{named}: a NEFF build in progress (e.g. {printable(held[0].path)}). "
                         "How long a lock has been held cannot be read from its file (lock files "
                         "are reused and their time is never refreshed). torch-neuronx's waiters "
                         f"break a lock after {cache.timeout_s} s ({LOCK_TIMEOUT_ENV}, "
                         f"{cache.timeout_source}) counted from the start of their own wait, "
                         "then build that NEFF themselves"))
    return out


def neff_cache_check(env: Mapping[str, str]) -> Check | None:
    """A warning when the native NEFF cache on disk is switched off, else None (the folder
    itself is the compile cache section's)."""
    if env.get(NEFF_DISABLE_ENV) != "1":
        return None
    return Check("warn", "neff cache", f"{NEFF_DISABLE_ENV}=1: native torch-neuronx keeps no NEFF "
                 f"on disk, so every new process recompiles every graph. Fix: unset "
                 f"{NEFF_DISABLE_ENV}")


def missing_features(version: str | None,
                     table: tuple[tuple[str, str], ...]) -> list[tuple[str, str]] | None:
    """The (first version, feature) rows ``version`` lacks; None when it cannot be compared."""
    try:
        from packaging.version import InvalidVersion, Version
    except ImportError:  # pragma: no cover - packaging comes with transformers
        return None
    try:
        have = Version(version) if version else None
    except InvalidVersion:
        return None
    if have is None:
        return None
    return [(first, what) for first, what in table if have < Version(first)]


def _library_check(name: str, dist: str, table: tuple[tuple[str, str], ...], ok: str) -> Check:
    need = table[-1][0]
    pin = f"'{dist}>={need},<6'" if dist == "transformers" else f"'{dist}>={need}'"
    version = package_version(dist)
    if version is None:
        return Check("warn", name, f"{dist} is not installed. Fix: pip install {pin}")
    missing = missing_features(version, table)
    if missing is None:
        return Check("ok", name, f"{dist} {version}: cannot check its Neuron paths (not a release "
                     f"version); they need {dist}>={need}. {ok}")
    if not missing:
        return Check("ok", name, ok)
    lacks = "; ".join(f"{what} (from {first})" for first, what in missing)
    return Check("warn", name, f"{dist} {version} lacks Neuron paths neuronkit uses: {lacks}. "
                 f"Fix: pip install {pin}")


def library_checks() -> list[Check]:
    """Whether the installed transformers and accelerate have the Neuron paths neuronkit uses."""
    return [
        _library_check("Trainer on Neuron", "transformers", TRANSFORMERS_NEURON,
                       "this transformers knows the neuron device; its Trainer compiles with "
                       "dynamic=False there, so every new padded length recompiles. Fix: "
                       "nk.fixed_shape_args + nk.FixedLengthCollator"),
        _library_check("accelerate", "accelerate", ACCELERATE_NEURON,
                       "this accelerate knows the neuron device (Trainer's device and "
                       "process group come from it)"),
    ]
