"""neuronkit: see, explain and stop the recompiles of Hugging Face models on AWS Trainium.

    import neuronkit as nk
    report = nk.detect()
    model = nk.load_model(nk.tiny_model())

Names are imported on first use, so ``import neuronkit`` stays fast. They come from the layers, in
the order data flows: setup, workloads, sources, recorder, log, advice, apps (docs/layout.md).
"""
from __future__ import annotations

import importlib

from ._version import __version__

TYPE_CHECKING = False  # typing is not imported: ``import neuronkit`` runs in every recorded process

_EXPORTS: dict[str, str] = {
    # setup: the machine and the model
    "detect": "setup.device", "resolve_device": "setup.device", "DeviceReport": "setup.device",
    "NeuronNotFoundError": "setup.device", "DeviceFallbackWarning": "setup.device",
    "load_model": "setup.models", "load_tokenizer": "setup.models", "tiny_model": "setup.tiny",
    "check_placement": "setup.placement", "PlacementReport": "setup.placement",
    "DeviceMapWarning": "setup.models", "PlacementWarning": "setup.placement",
    "ModelNotFoundError": "setup.load_errors", "RecompileLimitWarning": "setup.decode_graphs",
    "model_or_tiny": "setup.hub", "ModelChoice": "setup.hub", "pipeline": "setup.pipelines",
    "inspect_cache": "setup.cache", "CacheReport": "setup.cache_report",
    # workloads: generation, training, distributed runs
    "Buckets": "workloads.shapes", "plan_buckets": "workloads.shapes",
    "audit_shapes": "workloads.shape_audit", "ShapeAudit": "workloads.shape_audit",
    "generate": "workloads.generation", "GenerationResult": "workloads.generation",
    "BatchProgress": "workloads.progress", "UnboundedCacheError": "workloads.static_cache",
    "LeftPaddingError": "workloads.padding_check",
    "EagerForwardWarning": "workloads.generate_eager",
    "warmup": "workloads.warm_up", "WarmupManifest": "workloads.warm_up",
    "compile_config": "workloads.generate_settings",
    "fixed_shape_args": "workloads.trainer_args", "CompileEventsCallback": "workloads.training",
    "StaticShapeWarning": "workloads.trainer_args", "RecompileWarning": "workloads.training",
    "check_static_shapes": "workloads.dataset_shapes",
    "FixedLengthCollator": "workloads.collate", "launch": "workloads.distributed",
    # sources, recorder, events and the log
    "forecast_kernels": "sources.kernel_forecast", "CompileRecorder": "recorder.recorder",
    "CompileEvent": "events.event", "LogFormatError": "events.schema",
    "CompileLog": "log.compile_log", "open_log": "log.open",
    "merge_logs": "log.rank_logs", "rank_log_path": "log.rank_logs",
    "follow": "log.follow", "Follower": "log.follow",
    # advice and apps
    "diagnose": "advice.diagnose", "Advice": "advice.finding",
    "diff_logs": "advice.run_diff", "RunDiff": "advice.run_diff",
    "check_cache": "advice.cache_check", "CacheCheck": "advice.cache_check",
    "compile_budget": "apps.budget", "CompileBudgetExceeded": "apps.budget",
}

__all__ = ["__version__", *_EXPORTS]

if TYPE_CHECKING:  # pragma: no cover - for type checkers and editors only
    from typing import Any

    from .advice.cache_check import CacheCheck, check_cache
    from .advice.diagnose import diagnose
    from .advice.finding import Advice
    from .advice.run_diff import RunDiff, diff_logs
    from .apps.budget import CompileBudgetExceeded, compile_budget
    from .events.event import CompileEvent
    from .events.schema import LogFormatError
    from .log.compile_log import CompileLog
    from .log.follow import Follower, follow
    from .log.open import open_log
    from .log.rank_logs import merge_logs, rank_log_path
    from .recorder.recorder import CompileRecorder
    from .setup.cache import inspect_cache
    from .setup.cache_report import CacheReport
    from .setup.decode_graphs import RecompileLimitWarning
    from .setup.device import DeviceFallbackWarning, DeviceReport, NeuronNotFoundError, detect, resolve_device
    from .setup.hub import ModelChoice, model_or_tiny
    from .setup.load_errors import ModelNotFoundError
    from .setup.models import DeviceMapWarning, load_model, load_tokenizer
    from .setup.pipelines import pipeline
    from .setup.placement import PlacementReport, PlacementWarning, check_placement
    from .setup.tiny import tiny_model
    from .sources.kernel_forecast import forecast_kernels
    from .workloads.collate import FixedLengthCollator
    from .workloads.dataset_shapes import check_static_shapes
    from .workloads.distributed import launch
    from .workloads.generate_eager import EagerForwardWarning
    from .workloads.generate_settings import compile_config
    from .workloads.generation import GenerationResult, generate
    from .workloads.padding_check import LeftPaddingError
    from .workloads.progress import BatchProgress
    from .workloads.shape_audit import ShapeAudit, audit_shapes
    from .workloads.shapes import Buckets, plan_buckets
    from .workloads.static_cache import UnboundedCacheError
    from .workloads.trainer_args import StaticShapeWarning, fixed_shape_args
    from .workloads.training import CompileEventsCallback, RecompileWarning
    from .workloads.warm_up import WarmupManifest, warmup


def __getattr__(name: str) -> Any:
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'neuronkit' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


def load_ipython_extension(ipython: Any) -> None:
    """``%load_ext neuronkit``: the ``%%compile_budget`` cell magic (``neuronkit/apps/magic.py``)."""
    from .apps.magic import load_ipython_extension as load

    load(ipython)


def __dir__() -> list[str]:
    return sorted(__all__)
