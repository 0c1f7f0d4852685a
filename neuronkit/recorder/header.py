"""A compile log's header line (format, versions, device, backend), and the device a recorder
defaults to."""
from __future__ import annotations

from typing import Any

from neuronkit._version import __version__
from neuronkit.events.facts import NEURONX_FIELD
from neuronkit.events.schema import FORMAT, FORMAT_VERSION
from neuronkit.setup import device as setup_device
from neuronkit.setup.packages import package_version

__all__ = ["default_header", "detected"]


def default_header(device: str = "", backend: str = "", **extra: Any) -> dict[str, Any]:
    """The header line: format, versions, device and backend."""
    versions: dict[str, Any] = {"neuronkit": __version__}
    for name in ("torch", "transformers"):
        versions[name] = setup_device.package_version(name)
    versions[NEURONX_FIELD] = setup_device.torch_neuronx_version()
    if versions[NEURONX_FIELD] is not None:  # the compiler: not part of a NEFF's key (diff says so)
        versions["neuronx_cc"] = package_version("neuronx-cc")
    return {"format": FORMAT, "version": FORMAT_VERSION, **versions,
            "device": device, "backend": backend, **extra}


def detected() -> tuple[str, str]:
    """This machine's device and compile backend (``nk.detect()``)."""
    report = setup_device.detect()
    return report.device, report.compile_backend
