"""Which device and compile backend to use. The only module that touches ``torch.neuron``.

The native torch-neuronx ("TorchNeuron", Trn2/Trn3) registers a ``neuron`` device
(``torch.neuron.is_available()``, ``torch.neuron.device_count()``) and the ``neuron`` backend of
``torch.compile``. ``device_map="auto"`` does not see it, so neuronkit always resolves the device
itself and passes it explicitly. The older XLA-based torch-neuronx (trn1/inf2) registers no
``neuron`` device; ``detect()`` says so, and checks the instance type, the torch / torch-neuronx
pairing and a stray ``torch_xla`` (those checks are in ``neuron_stack``).
"""
from __future__ import annotations

import ast
import importlib
import importlib.util
import os
import sys
import warnings
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.safe import terminal_safe
from neuronkit.setup.neuron_stack import Finding, install_hint, instance_type, native_findings
from neuronkit.setup.packages import module_installed, package_version

CPU_BACKEND_ENV = "NEURONKIT_CPU_BACKEND"
DEFAULT_CPU_BACKEND = "eager"
BUILTIN_BACKENDS = ("eager", "aot_eager", "inductor")  # always registered by torch
DEVICE_TYPES = ("neuron", "cuda", "cpu")

__all__ = ["detect", "resolve_device", "DeviceReport", "NeuronNotFoundError",
           "DeviceFallbackWarning", "neuronx_installed", "neuronx_is_native", "loaded_neuronx",
           "import_neuronx",
           "cpu_backend", "CPU_BACKEND_ENV", "DEFAULT_CPU_BACKEND", "neuronx_build_defaults",
           "STACK_NAMES", "loaded_neuronx_attr", "neuronx_build_type", "neuronx_folders",
           "torch_neuronx_version"]
# Finding, the instance and version checks and their constants live in neuron_stack.py,
# package_version and module_installed in packages.py; they stay importable from here


def torch_neuronx_version() -> str | None:
    """The installed torch-neuronx's version; for a ``torch_neuronx`` module imported without a
    package behind it, what it is: ``fake (tests/neuron_fake) 0.1.0`` for neuronkit's test fake
    (its ``__file__`` says so), else the version with ``(no package metadata)``."""
    version = package_version("torch-neuronx")
    module = sys.modules.get("torch_neuronx")
    if version is not None or module is None:
        return version
    found = str(getattr(module, "__version__", "?"))
    if str(getattr(module, "__file__", "")).startswith("<neuron_fake"):
        return f"fake (tests/neuron_fake) {found}"
    return f"{found} (no package metadata)"


STACK_NAMES = {"native": "native torch-neuronx (device 'neuron', torch.compile backend 'neuron')",
               "xla": "XLA-based torch-neuronx (device 'xla'; no 'neuron' device)"}



def _install_advice() -> str:
    """What to do when Neuron was asked for and is missing (the command of the docs)."""
    return ("Install the native torch-neuronx on a Trn2/Trn3 instance: "
            f"{install_hint()}; or use an AWS Deep Learning AMI/Container for Neuron; then check "
            "`neuronkit doctor`. To run here anyway, pass device='cpu' (or None for automatic "
            "choice).")


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


def neuronx_installed() -> bool:
    """Whether torch-neuronx can be imported here (without importing it)."""
    return module_installed("torch_neuronx")


def neuronx_is_native() -> bool:
    """The installed torch-neuronx is the native one (TorchNeuron): it has
    ``neuron_dynamo_backend``, looked up in the loaded module, else in the installed package's
    folder (never imported here)."""
    module = loaded_neuronx()
    if module is not None and hasattr(module, "neuron_dynamo_backend"):
        return True
    folders: Any = getattr(module, "__path__", None) if module is not None else None
    if module is None:
        folders = neuronx_folders()
    return any(os.path.isdir(os.path.join(str(f), "neuron_dynamo_backend")) for f in folders or ())


def neuronx_folders() -> list[str] | None:
    """The installed torch_neuronx package's folders, found without importing it; None when it
    is not installed."""
    try:
        spec = importlib.util.find_spec("torch_neuronx")
    except (ImportError, ValueError):
        return None
    return None if spec is None else [str(f) for f in spec.submodule_search_locations or ()]


def loaded_neuronx() -> Any | None:
    """The ``torch_neuronx`` module if something already imported it, else None (never imports)."""
    return sys.modules.get("torch_neuronx")


def loaded_neuronx_attr(submodule: str, name: str) -> Any:
    """``torch_neuronx.<submodule>.<name>`` where the job already imported that submodule, else
    None (never imports: importing runs its side effects)."""
    module = sys.modules.get(f"torch_neuronx.{submodule}")
    return None if module is None else getattr(module, name, None)


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
        warnings.warn(terminal_safe(f"torch_neuronx is installed but failed to import: {exc}"),
                      stacklevel=3)
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
                         f"Fix: on a Trn2/Trn3 instance, {install_hint(torch.__version__)}")
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
                f"device {requested!r} asked for, but {found}. {_install_advice()}")
        if index and int(index) >= count:
            raise NeuronNotFoundError(f"device {requested!r} asked for, but only {count} Neuron "
                                      f"device(s) exist (neuron:0 .. neuron:{count - 1})")
    if kind == "cuda" and not torch.cuda.is_available():
        raise RuntimeError(f"device {requested!r} asked for, but torch sees no CUDA device; "
                           "use 'auto' or 'cpu'")
    return requested


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


def _build_type_in(text: str) -> str | None:
    """The string assigned to ``BUILD_TYPE`` at the top level of ``_build_config.py``'s text."""
    try:
        tree = ast.parse(text)
    except (SyntaxError, ValueError):
        return None
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "BUILD_TYPE"
                                                for t in node.targets):
            value = node.value
            return value.value if isinstance(value, ast.Constant) and isinstance(value.value, str) \
                else None
    return None


def neuronx_build_type() -> tuple[str | None, str]:
    """(``"RELEASE"`` | ``"DEV"`` | other | None, how it was found) of the installed
    torch_neuronx, read from the text of its ``_build_config.py`` (``tn/_build_config.py:4``, set
    by ``setup.py:22-32`` at build time). Never imports torch_neuronx: its import initialises the
    runtime's defaults (``tn/__init__.py:46``). No ``_build_config.py``: the package falls back
    to the DEV defaults (``tn/__init__.py:26-36``)."""
    found = neuronx_folders()
    folders = found or []
    if not folders:
        return None, ("torch_neuronx is not installed" if found is None
                      else "torch_neuronx has no package folder to read")
    for folder in folders:
        path = Path(folder) / "_build_config.py"
        try:
            with path.open(encoding="utf-8", errors="replace") as handle:
                text = handle.read(65536)
        except FileNotFoundError:
            continue
        except OSError as exc:
            return None, f"cannot read {path} ({exc.strerror})"
        build = _build_type_in(text)
        if build is None:
            return None, f"no BUILD_TYPE = '...' in {path}"
        return build, f"BUILD_TYPE read from {path}"
    return "DEV", (f"no _build_config.py in {folders[0]}: torch_neuronx then uses the DEV "
                   "defaults (tn/__init__.py:26-36)")
