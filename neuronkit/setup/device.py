"""Which device and compile backend to use. The only module that touches ``torch.neuron``.

The native torch-neuronx ("TorchNeuron", Trn2/Trn3) registers a ``neuron`` device
(``torch.neuron.is_available()``, ``torch.neuron.device_count()``) and the ``neuron`` backend of
``torch.compile``. ``device_map="auto"`` does not see it, so neuronkit always resolves the device
itself and passes it explicitly. The older XLA-based torch-neuronx (trn1/inf2) registers no
``neuron`` device; ``detect()`` says so, and checks the instance type, the torch / torch-neuronx
pairing and a stray ``torch_xla``.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from pathlib import Path
from typing import Any

CPU_BACKEND_ENV = "NEURONKIT_CPU_BACKEND"
DEFAULT_CPU_BACKEND = "eager"
BUILTIN_BACKENDS = ("eager", "aot_eager", "inductor")  # always registered by torch
DEVICE_TYPES = ("neuron", "cuda", "cpu")

__all__ = ["detect", "resolve_device", "DeviceReport", "NeuronNotFoundError",
           "DeviceFallbackWarning", "package_version", "module_installed", "neuronx_installed",
           "loaded_neuronx", "import_neuronx", "cpu_backend", "CPU_BACKEND_ENV",
           "DEFAULT_CPU_BACKEND", "Finding", "instance_type", "instance_family", "version_pairing",
           "torch_xla_version", "neuronx_build_defaults", "native_findings", "INSTANCE_ENV",
           "NATIVE_FAMILIES", "XLA_FAMILIES", "NEURON_PIP_REPO", "STACK_NAMES"]

INSTANCE_ENV = "NEURONKIT_INSTANCE_TYPE"  # e.g. trn2.48xlarge, where nothing else can tell
DMI_PRODUCT_NAME = "/sys/devices/virtual/dmi/id/product_name"  # the instance type on EC2 (no IMDS)
NATIVE_FAMILIES = ("trn2", "trn3")  # the native torch-neuronx (TorchNeuron) runs here only
XLA_FAMILIES = ("trn1", "inf2")     # the XLA-based torch-neuronx (device 'xla') is for these
NEURON_PIP_REPO = "https://pip.repos.neuron.amazonaws.com"
STACK_NAMES = {"native": "native torch-neuronx (device 'neuron', torch.compile backend 'neuron')",
               "xla": "XLA-based torch-neuronx (device 'xla'; no 'neuron' device)"}

INSTALL_HINT = (
    "Install the native torch-neuronx from the AWS Neuron repository on a Trn2/Trn3 instance "
    f"(pip install torch-neuronx --extra-index-url={NEURON_PIP_REPO}, taking the torch-neuronx "
    "2.X.* family that matches torch 2.X), or use an AWS Deep Learning AMI/Container for Neuron; "
    "then check `neuronkit doctor`. "
    "To run here anyway, pass device='cpu' (or None for automatic choice)."
)


class NeuronNotFoundError(RuntimeError):
    """A Neuron device was asked for, but torch-neuronx or the Neuron devices are missing."""


class DeviceFallbackWarning(UserWarning):
    """The automatic device choice fell back from Neuron to another device."""


@dataclass
class Finding:
    """One checked fact about the Neuron stack: ``status`` "ok" or "warn", ``text`` with the fix."""

    status: str
    name: str
    text: str


@dataclass
class DeviceReport:
    """What neuronkit found and what it will use."""

    neuron_available: bool
    device_count: int
    device: str
    compile_backend: str
    cuda_available: bool = False
    bf16_supported: bool = True
    versions: dict[str, str | None] = field(default_factory=dict)
    reason: str = ""
    warnings: list[str] = field(default_factory=list)
    stack: str = ""  # "native" (device 'neuron'), "xla" (XLA-based torch-neuronx) or "" (none)
    instance: str | None = None  # e.g. "trn2" or "trn2.48xlarge", when something tells
    instance_source: str = ""
    findings: list[Finding] = field(default_factory=list)  # instance, pairing, torch_xla

    def rows(self) -> list[tuple[str, str]]:
        """(label, value) pairs, in the order ``neuronkit doctor`` prints them."""
        rows = [(name, version or "not installed") for name, version in self.versions.items()]
        rows += [
            ("neuron available", "yes" if self.neuron_available else "no"),
            ("neuron devices", str(self.device_count)),
            ("cuda available", "yes" if self.cuda_available else "no"),
            ("device used", self.device),
            ("compile backend", self.compile_backend),
            ("bf16", "yes" if self.bf16_supported else "no"),
        ]
        if self.stack:
            rows.append(("neuron stack", STACK_NAMES.get(self.stack, self.stack)))
        if self.instance:
            rows.append(("instance", f"{self.instance} (from {self.instance_source})"))
        if self.reason:
            rows.append(("why", self.reason))
        return rows

    def __str__(self) -> str:
        rows = self.rows()
        width = max(len(label) for label, _ in rows)
        lines = [f"{label:<{width}}  {value}" for label, value in rows]
        lines += [f"warning: {w}" for w in self.warnings]
        return "\n".join(lines)


def package_version(dist: str) -> str | None:
    """Installed version of the distribution ``dist`` (e.g. ``"torch-neuronx"``), or None."""
    try:
        return metadata.version(dist)
    except metadata.PackageNotFoundError:
        return None


def module_installed(name: str) -> bool:
    """Whether ``import name`` would find a module (an entry of None in sys.modules: no)."""
    if name in sys.modules:
        return sys.modules[name] is not None
    try:
        return importlib.util.find_spec(name) is not None
    except (ImportError, ValueError):
        return False


def neuronx_installed() -> bool:
    """Whether torch-neuronx can be imported here (without importing it)."""
    return module_installed("torch_neuronx")


def loaded_neuronx() -> Any | None:
    """The ``torch_neuronx`` module if something already imported it, else None (never imports)."""
    return sys.modules.get("torch_neuronx")


def import_neuronx() -> Any | None:
    """The ``torch_neuronx`` module (imported once, which registers ``torch.neuron``), or None.

    None when it is not installed; a broken install warns instead of raising.
    """
    module = sys.modules.get("torch_neuronx")
    if module is not None:
        return module
    try:
        if importlib.util.find_spec("torch_neuronx") is None:
            return None
    except (ImportError, ValueError):  # e.g. a sys.modules entry of None or without a spec
        return None
    try:
        return importlib.import_module("torch_neuronx")
    except Exception as exc:  # a broken install must not hide the rest of the report
        warnings.warn(f"torch_neuronx is installed but failed to import: {exc}", stacklevel=3)
        return None


def _neuron_namespace() -> Any | None:
    """``torch.neuron`` once torch-neuronx has registered it, else None."""
    import torch

    import_neuronx()
    return getattr(torch, "neuron", None)


def neuron_device_count() -> int:
    """Number of Neuron devices torch sees (0 without torch-neuronx)."""
    neuron = _neuron_namespace()
    if neuron is None:
        return 0
    try:
        return int(neuron.device_count()) if neuron.is_available() else 0
    except Exception:
        return 0


def cpu_backend(requested: str | None = None) -> str:
    """The compile backend for CPU: argument, else $NEURONKIT_CPU_BACKEND, else ``eager``."""
    import torch

    backend = requested or os.environ.get(CPU_BACKEND_ENV) or DEFAULT_CPU_BACKEND
    if backend in BUILTIN_BACKENDS:  # listing backends imports torch._dynamo: seconds
        return backend
    if backend not in torch.compiler.list_backends(exclude_tags=()):
        common = ", ".join(b for b in sorted(torch.compiler.list_backends(exclude_tags=()))
                           if "TESTING" not in b and "minifier" not in b)
        raise ValueError(f"unknown compile backend {backend!r}; choose one of {common} "
                         "(see torch.compiler.list_backends())")
    return backend


def detect(cpu_backend_name: str | None = None) -> DeviceReport:
    """Look for Neuron, then CUDA, then CPU; say which device and compile backend to use."""
    import torch

    neuron = _neuron_namespace()
    count = neuron_device_count()
    cuda = torch.cuda.is_available()
    versions = {"python": _python_version(), "torch": torch.__version__,
                "transformers": package_version("transformers"),
                "torch-neuronx": package_version("torch-neuronx")}
    module = loaded_neuronx()
    if (module is not None and getattr(module, "__version__", None)
            and not versions["torch-neuronx"]):
        versions["torch-neuronx"] = str(module.__version__)
    stack = "native" if neuron is not None else "xla" if module is not None else ""
    instance, source = instance_type() if stack else (None, "")
    findings = native_findings(stack, versions, instance, source)
    notes = [f.text for f in findings if f.status == "warn"]
    if count:
        device, backend, reason = "neuron", "neuron", ""
        try:
            bf16 = bool(getattr(neuron, "is_bf16_supported", lambda: True)())
        except Exception:  # every Trainium generation has bf16
            bf16 = True
    else:
        if stack == "xla":
            why = ("torch-neuronx is installed but registers no 'neuron' device: it is the "
                   "XLA-based torch-neuronx (device 'xla', for trn1/inf2)")
            notes.append("neuronkit needs the native torch-neuronx (device 'neuron', Trn2/Trn3). "
                         f"Fix: on a Trn2/Trn3 instance, pip install torch-neuronx "
                         f"--extra-index-url={NEURON_PIP_REPO} (the family matching your torch)")
        elif neuron is None:
            why = "torch-neuronx is not installed (torch has no 'neuron' device)"
        else:
            why = "torch-neuronx is installed but torch.neuron.is_available() is False"
            notes.append("torch-neuronx found no Neuron devices: is this a Trn2/Trn3 instance, "
                         "and is the Neuron driver loaded (neuron-ls)?")
        if cuda:
            device, backend = "cuda", "inductor"
            bf16 = torch.cuda.is_bf16_supported()
        else:
            device, backend = "cpu", cpu_backend(cpu_backend_name)
            bf16 = True
        reason = f"{why}; using {device} with the {backend!r} compile backend"
    return DeviceReport(neuron_available=bool(count), device_count=count, device=device,
                        compile_backend=backend, cuda_available=cuda, bf16_supported=bf16,
                        versions=versions, reason=reason, warnings=notes, stack=stack,
                        instance=instance, instance_source=source, findings=findings)


def _python_version() -> str:
    import platform

    return platform.python_version()


def resolve_device(requested: str | None = None) -> str:
    """``None``/``"auto"``/``"neuron"``/``"cuda"``/``"cpu"`` (with ``:N``) -> a device string.

    ``None`` and ``"auto"`` pick neuron, else cuda, else cpu, and warn when Neuron was not found.
    Asking for a device that is not there raises, with what to do about it.
    """
    import torch

    if requested is None or requested == "auto":
        report = detect()
        if report.device != "neuron":
            warnings.warn(f"no Neuron device: {report.reason}", DeviceFallbackWarning, stacklevel=2)
        return report.device
    if not isinstance(requested, str):
        raise TypeError(f"device must be a string such as 'neuron' or 'cpu', got {requested!r}")
    kind, _, index = requested.partition(":")
    if kind not in DEVICE_TYPES or (index and not index.isdigit()):
        raise ValueError(f"unknown device {requested!r}; use one of 'auto', 'neuron', 'neuron:N', "
                         "'cuda', 'cuda:N', 'cpu'")
    if kind == "neuron":
        count = neuron_device_count()
        if count == 0:
            found = "torch-neuronx is not installed" if _neuron_namespace() is None else \
                "torch-neuronx is installed but reports no Neuron devices"
            raise NeuronNotFoundError(
                f"device {requested!r} asked for, but {found}. {INSTALL_HINT}")
        if index and int(index) >= count:
            raise NeuronNotFoundError(f"device {requested!r} asked for, but only {count} Neuron "
                                      f"device(s) exist (neuron:0 .. neuron:{count - 1})")
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {requested!r} asked for, but torch sees no CUDA device; "
                           "use 'auto' or 'cpu'")
    return requested


# --------------------------------------------------------------------------- the native stack

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
                   f"for this torch, or pip install 'torch=={want}.*' for this torch-neuronx")


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


def neuronx_build_defaults() -> tuple[str | None, str | None]:
    """(build type "RELEASE"/"DEV", its default ``NEURON_LAUNCH_BLOCKING``) of an imported
    torch-neuronx; None where it does not say (the XLA one, an older build, not imported)."""
    module = loaded_neuronx()
    if module is None:
        return None, None
    build_type = getattr(getattr(module, "_build_config", None), "BUILD_TYPE", None)
    sync = getattr(module, "DEFAULT_SYNC_MODE", None)
    return (str(build_type) if build_type is not None else None,
            str(sync) if sync is not None else None)
