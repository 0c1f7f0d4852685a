"""Which device and compile backend to use. The only module that touches ``torch.neuron``.

torch-neuronx registers a ``neuron`` device (``torch.neuron.is_available()``,
``torch.neuron.device_count()``). ``device_map="auto"`` does not see it, so neuronkit
always resolves the device itself and passes it explicitly.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from importlib import metadata
from typing import Any

CPU_BACKEND_ENV = "NEURONKIT_CPU_BACKEND"
DEFAULT_CPU_BACKEND = "eager"
BUILTIN_BACKENDS = ("eager", "aot_eager", "inductor")  # always registered by torch
DEVICE_TYPES = ("neuron", "cuda", "cpu")

__all__ = ["detect", "resolve_device", "DeviceReport", "NeuronNotFoundError",
           "DeviceFallbackWarning", "package_version", "import_neuronx", "neuron_dynamo_metrics",
           "cpu_backend", "CPU_BACKEND_ENV", "DEFAULT_CPU_BACKEND"]

INSTALL_HINT = (
    "Install torch-neuronx from the AWS Neuron repository on a Trainium (trn1/trn2) or "
    "Inferentia2 instance "
    "(pip install torch-neuronx --extra-index-url=https://pip.repos.neuron.amazonaws.com), "
    "or use an AWS Deep Learning AMI/Container for Neuron; then check `neuronkit doctor`. "
    "To run here anyway, pass device='cpu' (or None for automatic choice)."
)


class NeuronNotFoundError(RuntimeError):
    """A Neuron device was asked for, but torch-neuronx or the Neuron devices are missing."""


class DeviceFallbackWarning(UserWarning):
    """The automatic device choice fell back from Neuron to another device."""


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


def neuron_dynamo_metrics() -> list:
    """``torch_neuronx.get_dynamo_metrics()`` as a list (one entry per graph), or [] without it.

    Looks only at an already imported torch_neuronx (cheap after every compile); errors from
    torch_neuronx propagate, so the caller decides how to report them.
    """
    getter = getattr(sys.modules.get("torch_neuronx"), "get_dynamo_metrics", None)
    if getter is None:
        return []
    entries = getter()
    return list(entries.values()) if isinstance(entries, dict) else list(entries or [])


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
    module = sys.modules.get("torch_neuronx")
    if (module is not None and getattr(module, "__version__", None)
            and not versions["torch-neuronx"]):
        versions["torch-neuronx"] = str(module.__version__)
    notes: list[str] = []
    if count:
        device, backend, reason = "neuron", "neuron", ""
        bf16 = bool(getattr(neuron, "is_bf16_supported", lambda: True)())
    else:
        if neuron is None:
            why = "torch-neuronx is not installed (torch has no 'neuron' device)"
        else:
            why = "torch-neuronx is installed but torch.neuron.is_available() is False"
            notes.append("torch-neuronx found no Neuron devices: is this a Trainium/Inferentia "
                         "instance, and is the Neuron driver loaded (neuron-ls)?")
        if cuda:
            device, backend = "cuda", "inductor"
            bf16 = torch.cuda.is_bf16_supported()
        else:
            device, backend = "cpu", cpu_backend(cpu_backend_name)
            bf16 = True
        reason = f"{why}; using {device} with the {backend!r} compile backend"
    return DeviceReport(neuron_available=bool(count), device_count=count, device=device,
                        compile_backend=backend, cuda_available=cuda, bf16_supported=bf16,
                        versions=versions, reason=reason, warnings=notes)


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
