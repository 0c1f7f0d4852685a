"""``neuronkit doctor``: versions, devices, the device and compile backend in use, the compile
cache, and the known Neuron traps, each checked with ok / warn / tip and a one-line fix. The
checks of the native torch-neuronx stack are in ``doctor_native``."""
from __future__ import annotations

import os
import time

from neuronkit._version import __version__
from neuronkit.safe import strip_control
from neuronkit.setup.cache import inspect_cache
from neuronkit.setup.cache_report import CacheReport
from neuronkit.setup.device import CPU_BACKEND_ENV, DEFAULT_CPU_BACKEND, STACK_NAMES, DeviceReport, detect
from neuronkit.setup.doctor_native import (
    NEFF_CACHE_FIX,
    Check,
    library_checks,
    lock_checks,
    settings_checks,
)
from neuronkit.setup.neuron_cores import neuron_core_checks
from neuronkit.setup.neuron_stack import install_hint, torch_xla_version
from neuronkit.setup.packages import package_version

STALE_LOCK_S = 3600.0

__all__ = ["doctor_report"]


def _detect() -> tuple[DeviceReport, Check | None]:
    """detect(), but a bad $NEURONKIT_CPU_BACKEND becomes a warning instead of an exception."""
    try:
        return detect(), None
    except ValueError as exc:
        check = Check("warn", "cpu backend",
                      f"${CPU_BACKEND_ENV}={os.environ.get(CPU_BACKEND_ENV)!r}"
                      f" is not usable ({exc}); using {DEFAULT_CPU_BACKEND!r}. Fix: unset it "
                      "or name a backend from torch.compiler.list_backends()")
        return detect(DEFAULT_CPU_BACKEND), check


def _backend_source(report: DeviceReport) -> str:
    if report.device == "neuron":
        return "the Neuron backend for torch.compile (torch-neuronx)"
    if report.device == "cuda":
        return "default on CUDA"
    if os.environ.get(CPU_BACKEND_ENV) == report.compile_backend:
        return f"from ${CPU_BACKEND_ENV}"
    return f"default off Neuron; set ${CPU_BACKEND_ENV} to change"


def checks(report: DeviceReport, cache: CacheReport | None) -> list[Check]:
    """The known traps, checked against this machine."""
    out: list[Check] = []
    if report.neuron_available:
        out.append(Check("ok", "neuron devices", f"{report.device_count} found; tensors go to "
                         "'neuron' / 'neuron:N'"))
    elif report.versions.get("torch-neuronx"):
        out.append(Check("warn", "neuron devices", "torch-neuronx is installed but sees no "
                         "device. Fix: run on a Trn2/Trn3 instance (the only ones native "
                         "torch-neuronx supports); check `neuron-ls` and the driver"))
    else:
        out.append(Check("warn", "neuron devices", f"no Neuron device found: running on "
                         f"{report.device} with the {report.compile_backend!r} backend instead. "
                         f"Fix (on Trn2/Trn3): {install_hint(report.versions.get('torch'))}"))
    out.extend(report.findings)  # instance, torch / torch-neuronx pairing, torch_xla
    out.extend(neuron_core_checks(report.stack))  # who holds NeuronCores (neuron-ls)
    out.append(Check("ok", "device_map='auto'", "it does not see Neuron (model stays on CPU); "
                     f"nk.load_model passes device_map={report.device!r} explicitly and checks "
                     "placement. In your own code use device_map='neuron'"))
    out.append(Check("ok", "generate inputs", "leave input_ids on CPU: generate() moves only "
                     "forward's tensors to the device; nk.generate does this and pads to buckets"))
    out.extend(library_checks())
    disabled = [v for v in ("TORCH_COMPILE_DISABLE", "TORCHDYNAMO_DISABLE")
                if os.environ.get(v, "").lower() in ("1", "true")]
    if disabled:
        out.append(Check("warn", "torch.compile", f"{'/'.join(disabled)} is set: nothing compiles "
                         "and no compile events are recorded. Fix: unset it"))
    else:
        out.append(Check("ok", "torch.compile", "enabled (TORCH_COMPILE_DISABLE not set)"))
    out.extend(settings_checks(report))
    out.extend(_cache_checks(cache, report.stack))
    return out


def _cache_checks(cache: CacheReport | None, stack: str = "") -> list[Check]:
    if cache is None:
        return []
    fix = ("NEURON_CC_FLAGS='--cache_dir=<a folder you can write>' (XLA-based torch-neuronx)"
           if stack == "xla" else NEFF_CACHE_FIX)
    if not cache.exists:
        parent = next((p for p in cache.path.parents if p.exists()), None)
        if parent is not None and not os.access(parent, os.W_OK | os.X_OK):
            return [Check("warn", "compile cache", f"{cache.path} cannot be created ({parent} is "
                          f"not writable): every run recompiles. Fix: {fix}")]
        return [Check("ok", "compile cache", f"{cache.path} does not exist yet (created by the "
                      "first Neuron compile)")]
    out: list[Check] = []
    if not os.access(cache.path, os.W_OK):
        out.append(Check("warn", "compile cache", f"{cache.path} is not writable: every run "
                         f"recompiles. Fix: chmod it, or {fix}"))
    if cache.native is not None:  # its locks, in torch-neuronx's meaning of "stale"
        found = lock_checks(cache.native)
        if not out and not found:
            found = [Check("ok", "compile cache", f"{len(cache.native.neffs)} NEFFs, no lock "
                           "files")]
        return out + found
    if cache.failed:
        what = "1 failed entry blocks" if len(cache.failed) == 1 else \
            f"{len(cache.failed)} failed entries block"
        out.append(Check("warn", "failed compiles", f"{what} recompiling its graph. Fix: remove "
                         "the folder (`neuronkit cache` lists them)"))
    stale = [e for e in cache.entries
             if e.state == "locked" and time.time() - e.mtime > STALE_LOCK_S]
    if stale:
        out.append(Check("warn", "stale locks", f"{len(stale)} entry folder(s) locked for over "
                         "an hour: a compile probably died and others wait on it. Fix: remove "
                         "those folders when no compile is running"))
    if not out:
        out.append(Check("ok", "compile cache", "no failed entries, no stale locks"))
    return out


def _table(title: str, rows: list[tuple[str, str]]) -> list[str]:
    width = max(len(label) for label, _ in rows)
    return [title, *(f"  {label:<{width}}  {value}" for label, value in rows), ""]


def doctor_report(cache_dir: str | os.PathLike | None = None) -> str:
    """One readable report of what neuronkit found and will use, and the traps it checked (values
    from the environment and file names shown without control characters)."""
    report, backend_check = _detect()
    versions = dict(report.versions)
    versions.update({"accelerate": package_version("accelerate"),
                     "neuronx-cc": package_version("neuronx-cc"), "neuronkit": __version__})
    xla = torch_xla_version()
    if xla:
        versions["torch-xla"] = xla
    try:
        cache = inspect_cache(cache_dir)
        cache_line = cache.summary_line()
    except ValueError as exc:
        cache, cache_line = None, f"cannot read: {exc}"
    where = "" if cache_dir is not None or cache is None else f" ({cache.source})"
    found = (f"yes, {report.device_count} device(s)" if report.neuron_available
             else "NO - no Neuron device found")
    why = report.reason or f"{report.device_count} Neuron device(s) found"
    lines = ["neuronkit doctor", ""]
    lines += _table("versions", [(k, v or "not installed") for k, v in versions.items()])
    lines += _table("devices", [
        ("neuron", found), ("cuda", "yes" if report.cuda_available else "no"),
        ("device used", report.device), ("why", why),
        ("compile backend", f"{report.compile_backend} ({_backend_source(report)})"),
        ("bf16", "yes" if report.bf16_supported else "no"),
        ("neuron stack", STACK_NAMES.get(report.stack, "none (torch-neuronx not installed)")),
        *([("instance", f"{report.instance} (from {report.instance_source})")]
          if report.instance else [])])
    lines += _table("compile cache" + where, [("folder", cache_line)])
    found_checks = ([backend_check] if backend_check else []) + checks(report, cache)
    name_w = max(len(c.name) for c in found_checks)
    lines.append("known traps")
    lines += [f"  [{c.status:<4}] {c.name:<{name_w}}  {c.text}" for c in found_checks]
    shown = {c.text for c in found_checks}
    lines += [f"  [warn] {w}" for w in report.warnings if w not in shown]
    lines.append("")
    if report.neuron_available:
        lines.append(f"Neuron found: neuronkit runs on {report.device} with the "
                     f"{report.compile_backend!r} compile backend.")
    else:
        lines.append(f"No Neuron device was found: neuronkit runs on {report.device} with the "
                     f"{report.compile_backend!r} compile backend instead. Compile events, shapes "
                     "and advice are the same kind; compile times are not Neuron's.")
    # each line one line, nothing a terminal acts on: paths and settings come from the environment
    return "\n".join(strip_control(line, keep_newlines=False) for line in lines)
