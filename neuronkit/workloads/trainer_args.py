"""Trainer arguments for fixed shapes: ``fixed_shape_args``, the warnings of values that defeat
static shapes, and the ``dynamic`` switch accelerate reads (``$ACCELERATE_DYNAMO_USE_DYNAMIC``).

On Neuron, Trainer compiles with ``dynamic=False``: every distinct batch shape is its own graph.
Elsewhere torch's automatic dynamic shapes hide that, so these arguments compile the way Neuron
does on every device.
"""
from __future__ import annotations

import os
import warnings
from typing import Any

from transformers import TrainingArguments

from neuronkit.setup.device import detect
from neuronkit.setup.process import default_rank

__all__ = ["BATCH_SIZES", "DYNAMIC_ENV", "StaticShapeWarning", "compile_note", "compiles_dynamic",
           "fixed_shape_args", "fixed_shape_defaults", "run_dynamic", "static_shape_warnings"]

# accelerate's TorchDynamoPlugin reads this when Trainer builds its Accelerator; Trainer itself only
# passes dynamic=False for the "neuron" backend and leaves it to this variable everywhere else.
DYNAMIC_ENV = "ACCELERATE_DYNAMO_USE_DYNAMIC"
BATCH_SIZES = ("per_device_train_batch_size", "per_device_eval_batch_size")


class StaticShapeWarning(UserWarning):
    """A setting or a dataset that will make the run compile more graphs than it needs."""


def fixed_shape_defaults(device: str, backend: str, bf16: bool) -> dict[str, Any]:
    """The TrainingArguments values that keep every batch the same shape on ``device``."""
    defaults: dict[str, Any] = {"torch_compile": True, "torch_compile_backend": backend,
                                "dataloader_drop_last": True, "bf16": bf16}
    if device == "cpu":
        defaults["use_cpu"] = True
    return defaults


def static_shape_warnings(values: dict[str, Any], device: str,
                          dynamic: bool | None = False) -> list[str]:
    """Why the chosen values would compile more graphs than fixed shapes need (empty: none)."""
    found = []
    if not values.get("dataloader_drop_last", True):
        found.append(
            "dataloader_drop_last=False: when the dataset size is not a multiple of the batch "
            "size, the last batch is smaller and compiles one extra graph (batch dim 0 changes), "
            "on Neuron one more full compile. Keep dataloader_drop_last=True, or check the "
            "dataset with nk.check_static_shapes(args, train_dataset).")
    if not values.get("torch_compile", True):
        where = "on Neuron the model then runs without compiled graphs" if device == "neuron" \
            else "no graph is compiled here, so the recompiles a Neuron run would pay stay hidden"
        found.append(f"torch_compile=False: {where}; keep torch_compile=True.")
    if dynamic is not False and device != "neuron":
        found.append(
            f"dynamic={dynamic!r}: torch marks a changing dim symbolic after its second shape, so "
            "this run compiles fewer graphs than Neuron will (Neuron compiles with dynamic=False: "
            "one graph per distinct shape). Leave dynamic=False to see Neuron's count here.")
    return found


def fixed_shape_args(output_dir: str, *, dynamic: bool | None = False, quiet: bool = False,
                     **kwargs: Any) -> TrainingArguments:
    """``TrainingArguments`` for static-shape training: compile on, drop the partial last batch,
    bf16 where supported, the compile backend of :func:`neuronkit.detect`, ``dynamic=False``.

    Anything passed in ``kwargs`` wins; values that defeat static shapes warn, naming the graph
    they cost. ``dynamic=False`` is set through ``ACCELERATE_DYNAMO_USE_DYNAMIC``, the switch
    accelerate reads when a Trainer is built, so it holds for the Trainers this process builds
    from now on; ``dynamic=None`` restores torch's automatic dynamic shapes.
    """
    _check_dynamic(dynamic)
    for name in BATCH_SIZES:
        if name in kwargs:
            _check_positive(kwargs[name], name)
    report = detect()
    values = {**fixed_shape_defaults(report.device, report.compile_backend,
                                     report.bf16_supported), **kwargs}
    if not values["torch_compile"] and "torch_compile_backend" not in kwargs:
        del values["torch_compile_backend"]     # a backend alone would turn compiling back on
    for message in static_shape_warnings(values, report.device, dynamic):
        warnings.warn(message, StaticShapeWarning, stacklevel=2)
    _set_dynamic(dynamic)
    args = TrainingArguments(output_dir=output_dir, **values)
    if not quiet and args.torch_compile and default_rank() == 0:
        print(compile_note(report.device, args.torch_compile_backend, dynamic))
    return args


def _check_dynamic(dynamic: Any) -> None:
    if dynamic is not None and not isinstance(dynamic, bool):
        raise TypeError(f"dynamic must be True, False or None, got {dynamic!r} "
                        f"({type(dynamic).__name__}): False compiles one graph per shape, as "
                        "Neuron does; True marks changing dims symbolic; None leaves it to torch")


def _check_positive(value: Any, name: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{name} must be a positive int, got {value!r}: every batch needs at "
                         f"least one example, and its size is a dim of every graph. Pass e.g. "
                         f"{name}=8")


def compile_note(device: str, backend: str | None, dynamic: bool | None) -> str:
    """One line saying how this run compiles and what that means for Neuron."""
    if device == "neuron":
        return (f"neuronkit: torch.compile backend {backend!r} with dynamic=False: every distinct "
                "batch shape is one neuronx-cc compile.")
    if dynamic is False:
        return (f"neuronkit: torch.compile on {device} (backend {backend!r}) with dynamic=False, "
                "the way Neuron compiles: every distinct batch shape is its own graph, so the "
                "recompiles a Trainium run would pay show up here.")
    return (f"neuronkit: torch.compile on {device} (backend {backend!r}) with dynamic={dynamic!r}: "
            "graph counts here can be lower than on Neuron, which compiles with dynamic=False.")


def _set_dynamic(dynamic: bool | None) -> None:
    if dynamic is None:
        os.environ.pop(DYNAMIC_ENV, None)
        return
    previous = os.environ.get(DYNAMIC_ENV)
    wanted = "true" if dynamic else "false"
    if previous is not None and previous.lower() not in (wanted, str(int(dynamic))):
        warnings.warn(f"${DYNAMIC_ENV} was {previous!r}; fixed_shape_args(dynamic={dynamic}) sets "
                      f"it to {wanted!r}", StaticShapeWarning, stacklevel=3)
    os.environ[DYNAMIC_ENV] = wanted


def compiles_dynamic(args: TrainingArguments) -> bool | None:
    """The ``dynamic`` a Trainer built from ``args`` now passes to torch.compile."""
    if args.torch_compile_backend == "neuron":
        return False
    value = os.environ.get(DYNAMIC_ENV)
    if value is None:
        return None
    return value.strip().lower() in ("1", "true", "yes", "y", "on")


def run_dynamic(args: TrainingArguments) -> bool | None:
    """The ``dynamic`` the running Trainer's accelerator compiled with (else what args imply)."""
    try:
        from accelerate.state import AcceleratorState, is_initialized

        if is_initialized():
            plugin = getattr(AcceleratorState(), "dynamo_plugin", None)
            if plugin is not None:
                return plugin.dynamic
    except Exception:       # an accelerate without this state: fall back to the arguments
        pass
    return compiles_dynamic(args)
