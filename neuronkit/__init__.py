"""neuronkit: see, explain and stop the recompiles of Hugging Face models on AWS Trainium.

    import neuronkit as nk
    report = nk.detect()
    model = nk.load_model(nk.tiny_model())

Names are imported on first use, so ``import neuronkit`` stays fast.
"""
from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from ._version import __version__

_EXPORTS: dict[str, str] = {
    "detect": "device", "resolve_device": "device", "DeviceReport": "device",
    "NeuronNotFoundError": "device", "DeviceFallbackWarning": "device",
    "DeviceMapWarning": "models", "PlacementWarning": "models", "ModelNotFoundError": "models",
    "load_model": "models", "load_tokenizer": "models", "check_placement": "models",
    "tiny_model": "models", "PlacementReport": "models",
    "Buckets": "shapes", "plan_buckets": "shapes", "audit_shapes": "shape_audit",
    "ShapeAudit": "shape_audit",
    "generate": "generation", "GenerationResult": "generation", "pipeline": "pipelines",
    "BatchProgress": "progress",
    "RecompileLimitWarning": "recompile_limit", "UnboundedCacheError": "static_cache",
    "fixed_shape_args": "training", "FixedLengthCollator": "collate",
    "CompileEventsCallback": "training", "StaticShapeWarning": "training",
    "RecompileWarning": "training",
    "merge_logs": "distributed", "rank_log_path": "distributed", "launch": "distributed",
    "CompileEvent": "events", "CompileLog": "events", "LogFormatError": "events",
    "CompileRecorder": "recorder", "forecast_kernels": "sources.kernel_forecast",
    "diagnose": "advice", "Advice": "advice",
    "inspect_cache": "cache", "CacheReport": "cache",
    "compile_budget": "budget", "CompileBudgetExceeded": "budget",
    "warmup": "warm_up", "WarmupManifest": "warm_up",
    "model_or_tiny": "hub", "ModelChoice": "hub",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from .advice import Advice, diagnose
    from .budget import CompileBudgetExceeded, compile_budget
    from .cache import CacheReport, inspect_cache
    from .device import (DeviceFallbackWarning, DeviceReport, NeuronNotFoundError, detect,
                         resolve_device)
    from .distributed import launch, merge_logs, rank_log_path
    from .events import CompileEvent, CompileLog, LogFormatError
    from .generation import GenerationResult, generate
    from .hub import ModelChoice, model_or_tiny
    from .models import (DeviceMapWarning, ModelNotFoundError, PlacementReport, PlacementWarning,
                         check_placement, load_model, load_tokenizer, tiny_model)
    from .pipelines import pipeline
    from .progress import BatchProgress
    from .recompile_limit import RecompileLimitWarning
    from .recorder import CompileRecorder
    from .shape_audit import ShapeAudit, audit_shapes
    from .shapes import Buckets, plan_buckets
    from .sources.kernel_forecast import forecast_kernels
    from .static_cache import UnboundedCacheError
    from .collate import FixedLengthCollator
    from .training import (CompileEventsCallback, RecompileWarning, StaticShapeWarning,
                           fixed_shape_args)
    from .warm_up import WarmupManifest, warmup


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neuronkit``: the ``%%compile_budget`` cell magic (``neuronkit/magic.py``)."""
    from .magic import load_ipython_extension as load

    load(ipython)


def __dir__() -> list[str]:
    return sorted(__all__)
