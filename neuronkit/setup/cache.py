"""Inspect a Neuron compile cache folder (read-only) in either of its two layouts, which one it is,
and prune the native one. Reading each layout lives in ``cache_native`` / ``cache_legacy``.

- ``"native"``: native torch-neuronx ("TorchNeuron") keeps NEFFs in ``TORCH_NEURONX_NEFF_CACHE_DIR``
  (default ``/tmp/neff_cache``) as ``ab/cd/<key>.neff`` and ``<sha256>/<sha256>.neff``, with
  lock files in ``TORCH_NEURONX_NEFF_LOCAL_CACHE_DIR``; see :mod:`neuronkit.setup.cache_native`.
- ``"legacy"``: the XLA-based torch-neuronx (trn1/inf2) wrote
  ``<cache>/neuronxcc-<version>/MODULE_<hlo-hash>+<flags-hash>/`` holding ``model.neff`` (the
  compiled graph), ``model.done`` (success marker), ``model.log`` and ``*.lock`` files while a
  compile runs. A failed entry blocks recompiling that graph until it is removed, so the failed
  ones are listed by path.

Symbolic links in either layout are never followed (one may lead out of the cache, or back into
it): they are left out of the counts and named in a note.
"""
from __future__ import annotations

import os
from pathlib import Path

from neuronkit.setup.cache_legacy import default_cache_dir, scan_legacy
from neuronkit.setup.cache_native import CACHE_DIR_ENV, is_native_shard, native_cache_dir, scan_native
from neuronkit.setup.cache_prune import PruneResult, prune_native
from neuronkit.setup.cache_report import CacheReport
from neuronkit.setup.cache_text import printable
from neuronkit.setup.device import loaded_neuronx, neuronx_installed, neuronx_is_native
from neuronkit.setup.packages import module_installed

LAYOUTS = ("native", "legacy")

# CacheReport, PruneResult, default_cache_dir, human_size and printable live in cache_report,
# cache_prune, cache_legacy and cache_text; they stay importable from here
__all__ = ["LAYOUTS", "detect_layout", "inspect_cache", "prune_cache"]


def _package_layout() -> tuple[str, str] | None:
    if loaded_neuronx() is None and not neuronx_installed():
        return None
    if neuronx_is_native():
        return "native", "the installed torch-neuronx is the native one (neuron_dynamo_backend)"
    if module_installed("torch_xla"):
        return "legacy", "torch-neuronx is installed with torch_xla (the XLA-based one)"
    return "native", "torch-neuronx is installed without torch_xla"


def _on_disk(root: Path) -> str | None:
    """The layout the folder's contents show, if any."""
    if root.name.startswith("neuronxcc-"):
        return "legacy"
    try:
        with os.scandir(root) as it:
            names = [e.name for e in it if e.is_dir(follow_symlinks=False)]
    except OSError:
        return None
    if any(n.startswith("neuronxcc-") for n in names):
        return "legacy"
    return "native" if any(is_native_shard(n) for n in names) else None


def detect_layout(path: str | os.PathLike | None = None) -> tuple[str, str]:
    """(``"native"`` | ``"legacy"``, why) for the folder ``path``, or for this machine's cache.

    What the folder holds decides; then the installed torch-neuronx (native without torch_xla);
    then the environment; then which default folder exists (native when neither does)."""
    if path is not None:
        root = Path(path).expanduser()
        found = _on_disk(root)
        if found:
            return found, ("it holds neuronxcc-* folders" if found == "legacy"
                           else "it holds native cache folders (ab/ or <sha256>/)")
        if root == native_cache_dir()[0]:
            return "native", "it is the native cache folder"
        return _package_layout() or ("legacy", "nothing in it or installed here shows a layout")
    package = _package_layout()
    if package:
        return package
    if os.environ.get(CACHE_DIR_ENV):
        return "native", f"{CACHE_DIR_ENV} is set"
    legacy_dir, legacy_source = default_cache_dir()
    if legacy_source != "the Neuron default":
        return "legacy", f"the folder comes {legacy_source}"
    if legacy_dir.exists() and not native_cache_dir()[0].exists():
        return "legacy", "only the legacy cache folder exists"
    return "native", "no torch-neuronx installed here; native is the current one"


def _notes(layout: str, root: Path, forced: bool, auto_default: bool) -> list[str]:
    """Settings and folders worth a look, for the layout read."""
    notes = []
    if forced and _on_disk(root) not in (None, layout):
        other = "native" if layout == "legacy" else "legacy"
        notes.append(f"this folder looks like the {other} layout: try --layout {other}")
    if auto_default:
        other_dir = default_cache_dir()[0] if layout == "native" else native_cache_dir()[0]
        if other_dir.is_dir():
            other = "legacy" if layout == "native" else "native"
            notes.append(f"the {other} cache folder {printable(other_dir)} exists too: "
                         f"`neuronkit cache --layout {other}`")
    if layout != "native":
        return notes
    if default_cache_dir()[1] == "from NEURON_CC_FLAGS --cache_dir":
        notes.append("NEURON_CC_FLAGS has --cache_dir, an XLA-era option: native torch-neuronx "
                     "passes NEURON_CC_FLAGS straight to neuronx-cc (and into every cache key) "
                     f"and caches in {CACHE_DIR_ENV} instead. Fix: move the folder to "
                     f"{CACHE_DIR_ENV} and drop --cache_dir")
    if os.environ.get("NEURON_COMPILE_CACHE_URL"):
        notes.append("NEURON_COMPILE_CACHE_URL is XLA-era: native torch-neuronx ignores it")
    if os.environ.get(CACHE_DIR_ENV) == "":
        notes.append(f"{CACHE_DIR_ENV} is set but empty: the C++ path then uses /tmp/neff_cache, "
                     "the Python sync-mode path the current folder. Fix: unset it or name a folder")
    if os.environ.get("TORCH_NEURONX_DISABLE_NEFF_CACHE") is not None:
        notes.append("TORCH_NEURONX_DISABLE_NEFF_CACHE switches off the in-process NEFF dict "
                     "only; the disk cache's switch is TORCH_NEURONX_NEFF_DISABLE_CACHE")
    return notes


def inspect_cache(path: str | os.PathLike | None = None, *,
                  layout: str | None = None) -> CacheReport:
    """Read the cache folder and count what it holds; never writes.

    ``layout``: ``"native"`` or ``"legacy"``; default: :func:`detect_layout`. ``path``: native,
    the folder ``TORCH_NEURONX_NEFF_CACHE_DIR`` names (default ``/tmp/neff_cache``); legacy, the
    cache root (holding ``neuronxcc-*`` folders) or one ``neuronxcc-<version>`` folder, default
    ``--cache_dir`` in ``NEURON_CC_FLAGS``, else ``/var/tmp/neuron-compile-cache``.
    """
    if layout is not None and layout not in LAYOUTS:
        raise ValueError(f"layout must be 'native' or 'legacy', not {layout!r}")
    chosen, why = (layout, "as asked") if layout else detect_layout(path)
    if path is None:
        root, source = native_cache_dir() if chosen == "native" else default_cache_dir()
    else:
        root, source = Path(path).expanduser(), "as given"
    notes = _notes(chosen, root, forced=layout is not None, auto_default=path is None and
                   layout is None)
    report = CacheReport(path=root, source=source, exists=root.exists(), layout=chosen,
                         layout_reason=why, notes=notes)
    if not report.exists:
        return report
    if not root.is_dir():
        expected = ("the folder TORCH_NEURONX_NEFF_CACHE_DIR names" if chosen == "native"
                    else "a folder holding neuronxcc-<version>/MODULE_* folders")
        raise ValueError(f"{printable(root)} is a file, not a Neuron compile cache folder "
                         f"(expected {expected})")
    if chosen == "native":
        report.native = scan_native(root)
        return report
    report.entries, links_notes = scan_legacy(root)
    report.notes += links_notes
    return report


def prune_cache(path: str | os.PathLike | None = None, *, layout: str | None = None,
                dry_run: bool = True) -> PruneResult:
    """Remove the native cache's temp leftovers, zero-size NEFFs and old lock files no process
    holds; by default a dry run that only lists them. Good NEFFs and recent or held locks are
    never touched."""
    report = inspect_cache(path, layout=layout)
    where = printable(report.path)
    if not report.exists:
        raise FileNotFoundError(f"no cache folder at {where} ({report.source}): nothing to prune. "
                                "Check the path, or pass the folder TORCH_NEURONX_NEFF_CACHE_DIR "
                                "names")
    if report.native is None:
        raise ValueError(f"--prune cleans the native torch-neuronx layout only, and {where} is "
                         f"read as the legacy layout ({report.layout_reason}). Fix: pass "
                         "--layout native if it is a native cache; in a legacy cache remove the "
                         "failed entries `neuronkit cache` lists by hand")
    return prune_native(report.path, report.native, dry_run=dry_run)
