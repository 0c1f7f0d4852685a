"""Facts about the installed Neuron stack, each a :class:`Finding` with its fix: the instance
type, the torch / torch-neuronx version pairing, and a torch_xla beside the native torch-neuronx."""
from __future__ import annotations

import importlib.util
import os
import re
import sys
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from neuronkit.setup.packages import package_version

INSTANCE_ENV = "NEURONKIT_INSTANCE_TYPE"  # e.g. trn2.48xlarge, where nothing else can tell
DMI_PRODUCT_NAME = "/sys/devices/virtual/dmi/id/product_name"  # the instance type on EC2 (no IMDS)
NATIVE_FAMILIES = ("trn2", "trn3")  # the native torch-neuronx (TorchNeuron) runs here only
XLA_FAMILIES = ("trn1", "inf2")     # the XLA-based torch-neuronx (device 'xla') is for these
NEURON_PIP_REPO = "https://pip.repos.neuron.amazonaws.com"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"  # torch's CPU wheels, as the docs pin
# Neuron 2.33 (setup/pytorch/index.html, update-manual.html, release notes): torch-neuronx
# 2.13.3.0.* pairs with torch 2.13.0 and 2.14.3.0.* with 2.14.0, on Python 3.12, 3.13 or 3.14
NATIVE_TORCH_FAMILIES = ("2.13", "2.14")
NATIVE_PYTHONS = ((3, 12), (3, 13), (3, 14))

__all__ = ["DMI_PRODUCT_NAME", "INSTANCE_ENV", "NATIVE_FAMILIES", "NATIVE_PYTHONS",
           "NATIVE_TORCH_FAMILIES", "NEURON_PIP_REPO", "PYTORCH_CPU_INDEX", "XLA_FAMILIES",
           "Finding", "install_command", "install_hint", "instance_family", "instance_type",
           "native_findings", "torch_xla_version", "version_pairing"]


@dataclass
class Finding:
    """One checked fact about the Neuron stack: ``status`` "ok" or "warn", ``text`` with the fix."""

    status: str
    name: str
    text: str


_RELEASE_VERSION = re.compile(r"(\d+)\.(\d+)\.\d+\.\d+(?:\.\d+)*")  # 2.14.3.0.1234


def instance_family(name: str) -> str | None:
    """``"trn2"`` from ``"trn2.48xlarge"``, ``"trn2u"`` or a name mentioning it; None if no
    Trainium/Inferentia family is named."""
    match = re.search(r"(?<![a-z])(trn|inf)(\d)", name.lower())
    return f"{match.group(1)}{match.group(2)}" if match else None


def instance_type() -> tuple[str | None, str]:
    """The instance type and where it came from, or ``(None, "")``: ``$NEURONKIT_INSTANCE_TYPE``,
    else the EC2 DMI product name. It never asks the EC2 metadata service nor the Neuron runtime
    (a query could initialise the runtime, which a later torch.distributed setup refuses)."""
    hint = os.environ.get(INSTANCE_ENV, "").strip()
    if hint:
        return hint, f"${INSTANCE_ENV}"
    try:
        product = Path(DMI_PRODUCT_NAME).read_text(errors="replace").strip()
    except OSError:
        product = ""
    if re.fullmatch(r"[a-z][a-z0-9-]*\.[a-z0-9-]+", product):  # e.g. trn2.48xlarge, m5.large
        return product, "the EC2 DMI product name"
    return None, ""


def _instance_finding(instance: str | None, source: str) -> Finding:
    if instance is None:
        return Finding("ok", "instance", "type not known here (set $NEURONKIT_INSTANCE_TYPE, e.g. "
                       "trn2.48xlarge, to have it checked): native torch-neuronx runs on Trn2 and "
                       "Trn3 only")
    family = instance_family(instance)
    where = f"{instance} (from {source})"
    if family in NATIVE_FAMILIES:
        return Finding("ok", "instance", f"{where}: native torch-neuronx supports Trn2/Trn3")
    if family in XLA_FAMILIES:
        return Finding("warn", "instance", f"{where}: native torch-neuronx supports Trn2 and Trn3 "
                       f"only, not {family}. Fix: on trn1/inf2 use the XLA-based torch-neuronx "
                       "(device 'xla'; last shipped in Neuron SDK 2.31), or run on a trn2/trn3 "
                       "instance")
    what = f"{family} is not supported" if family else "not a Trainium instance"
    return Finding("warn", "instance", f"{where}: {what}; native torch-neuronx runs on Trn2 and "
                   "Trn3 only. Fix: run on a trn2/trn3 instance")


def version_pairing(neuronx: str | None, torch_version: str | None) -> Finding | None:
    """torch-neuronx ``X.Y.*`` pairs with torch ``X.Y`` (2.13.3.0.* with torch 2.13, 2.14.3.0.*
    with 2.14). None without torch-neuronx; a dev or unknown version cannot be checked."""
    if not neuronx:
        return None
    release = _RELEASE_VERSION.fullmatch(neuronx.split("+", 1)[0])
    built = re.match(r"(\d+)\.(\d+)", torch_version or "")
    if release is None or built is None:
        return Finding("ok", "version pairing", f"cannot check the pairing: torch-neuronx "
                       f"{neuronx!r} is not a release version (release X.Y.Z.W.* pairs with "
                       "torch X.Y)")
    want, have = f"{release[1]}.{release[2]}", f"{built[1]}.{built[2]}"
    if want == have:
        return Finding("ok", "version pairing", f"torch-neuronx {neuronx} pairs with torch "
                       f"{torch_version}")
    return Finding("warn", "version pairing", f"torch-neuronx {neuronx} is built for torch {want}, "
                   f"but torch {torch_version} is installed (the pair must share major.minor). "
                   f"Fix: pip install 'torch-neuronx=={have}.*' --extra-index-url={NEURON_PIP_REPO} "
                   f"for this torch, or pip install 'torch=={want}.*' "
                   f"--extra-index-url={PYTORCH_CPU_INDEX} for this torch-neuronx")


def install_command(torch_version: str | None = None) -> str:
    """The pip command of the Neuron 2.33 docs for native torch-neuronx: the torch-neuronx family
    of this torch where one exists (else the newest), neuronx-cc 2.x, nki, and the Neuron and
    PyTorch CPU indexes."""
    if torch_version is None:
        import torch

        torch_version = torch.__version__
    family = ".".join(torch_version.split("+", 1)[0].split(".")[:2])
    family = family if family in NATIVE_TORCH_FAMILIES else NATIVE_TORCH_FAMILIES[-1]
    return (f"pip install 'torch-neuronx=={family}.*' 'neuronx-cc==2.*' nki "
            f"--extra-index-url={NEURON_PIP_REPO} --extra-index-url={PYTORCH_CPU_INDEX}")


def install_hint(torch_version: str | None = None,
                 python: Sequence[int] | None = None) -> str:
    """How to install native torch-neuronx: the command, the version pairing, and the Python it
    needs (said plainly when this Python is not one of them)."""
    python = tuple(sys.version_info[:3] if python is None else python)
    supported = ", ".join(f"{a}.{b}" for a, b in NATIVE_PYTHONS[:-1])
    needs = f"Python {supported} or {'.'.join(map(str, NATIVE_PYTHONS[-1]))}"
    if tuple(python[:2]) not in NATIVE_PYTHONS:
        needs += (f"; this Python is {'.'.join(map(str, python))}: make the environment with one "
                  "of those first")
    return (f"{install_command(torch_version)} (Neuron 2.33: torch-neuronx 2.13.3.0.* pairs "
            f"with torch 2.13.0, 2.14.3.0.* with torch 2.14.0; {needs})")


def torch_xla_version() -> str | None:
    """The installed torch-xla version ("unknown version" without metadata), or None."""
    version = package_version("torch-xla") or package_version("torch_xla")
    if version:
        return version
    try:
        return "unknown version" if importlib.util.find_spec("torch_xla") is not None else None
    except (ImportError, ValueError):
        return None


def _torch_xla_finding(stack: str) -> Finding | None:
    if stack != "native":
        return None
    version = torch_xla_version()
    if version is None:
        return Finding("ok", "torch_xla", "not installed: transformers uses the native 'neuron' "
                       "device")
    return Finding("warn", "torch_xla", f"torch-xla {version} is installed beside the native "
                   "torch-neuronx: transformers then takes its XLA path (TrainingArguments picks "
                   "the XLA device, is_torch_neuroncore_available() is True) instead of the native "
                   "'neuron' device. Fix: pip uninstall torch-xla in this environment")


def native_findings(stack: str, versions: dict[str, str | None], instance: str | None,
                    source: str) -> list[Finding]:
    """Instance type, version pairing and a stray torch_xla, for an installed torch-neuronx."""
    if not stack:
        return []
    found = [_instance_finding(instance, source)] if stack == "native" else []
    found += [f for f in (version_pairing(versions.get("torch-neuronx"), versions.get("torch")),
                          _torch_xla_finding(stack)) if f is not None]
    return found

