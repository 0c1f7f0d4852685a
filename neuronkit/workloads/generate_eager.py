"""A compiling ``nk.generate`` call whose forward ran eager anyway, said so.

``nk.generate`` asks ``model.generate`` to compile, but transformers decides per call, and may
run the forward uncompiled without a word: ``GenerationMixin._valid_auto_compile_criteria``
says no (``disable_compile`` in the generation config, a device it does not compile on without a
``compile_config`` for every device, a cache it cannot compile, a quantizer or an offload that
does not allow it), or ``PreTrainedModel.get_compiled_call`` hands back the plain forward
(transformers 5.24 does for every ``llama4`` model type: "TODO try to enable for FULL COMPILE
HYBRID CACHE SUPPORT"). Nothing compiles, so torch records nothing. :class:`ForwardChoices`
wraps both methods on the instance for the call and notes each refusal, with the reason;
:func:`nothing_compiled` catches a batch that compiled nothing while torch holds no graph of the
forward (Dynamo disabled). Each such phase of a batch is recorded as an ``eager_fallback`` event
whose ``metrics["not_compiled"]`` holds the cause and the reason.
"""
from __future__ import annotations

import contextlib
import inspect
import sys
import warnings
from dataclasses import dataclass
from types import FrameType
from typing import Any, Callable, Iterator

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.setup.decode_graphs import decode_code, held_graphs, location_of
from neuronkit.workloads.prefill_masks import wrapped_method

__all__ = ["NOT_COMPILED", "EagerForwardWarning", "ForwardChoices", "Uncompiled", "eager_reason",
           "is_uncompiled", "nothing_compiled", "record_uncompiled", "warn_eager"]

NOT_COMPILED = "not_compiled"   # the metrics key of an eager_fallback event of a forward never compiled
_HARDWARE = ("cuda", "xpu", "neuron", "tpu")   # where transformers compiles without being told to


class EagerForwardWarning(UserWarning):
    """A compiling ``nk.generate`` call ran the model's forward eager: nothing was compiled."""


@dataclass(frozen=True)
class Uncompiled:
    """One forward phase that ran uncompiled, and why."""

    phase: str    # "prefill" | "decode" | "" (every phase the batch planned)
    cause: str    # a short code: model_type, disable_compile, device, cache, quantizer, ...
    reason: str   # in words


def _version() -> str:
    import transformers

    return str(getattr(transformers, "__version__", "?"))


def _phase() -> str:
    """``prefill`` when the caller of the wrapped method is transformers' ``_prefill``."""
    frame: FrameType | None = sys._getframe(2)
    for _ in range(4):
        if frame is None:
            break
        if frame.f_code.co_name == "_prefill":
            return "prefill"
        frame = frame.f_back
    return "decode"


def _criteria_refusal(model: Any, model_kwargs: Any, config: Any) -> tuple[str, str]:
    """(cause, reason) of a no from ``_valid_auto_compile_criteria``, checked in its order."""
    if getattr(config, "disable_compile", False):
        return "disable_compile", ("the generation config sets disable_compile=True (model."
                                   "generation_config, from the model's files or code)")
    cc = getattr(config, "compile_config", None)
    device = getattr(getattr(model, "device", None), "type", "?")
    if device not in _HARDWARE and not getattr(cc, "_compile_all_devices", False):
        given = "no compile_config" if cc is None else "a compile_config not marked for every device"
        return "device", (f"transformers compiles generate()'s forward only on "
                          f"{'/'.join(_HARDWARE)} unless its compile_config allows every device; "
                          f"the model is on {device} with {given}")
    kwargs = model_kwargs if isinstance(model_kwargs, dict) else {}
    cache = kwargs.get("cache", kwargs.get("past_key_values"))
    if cache is None or not getattr(cache, "is_compileable", False) \
            or type(cache).__name__ == "DynamicCache":
        return "cache", f"the cache ({type(cache).__name__}) is not one transformers compiles with"
    quantizer = getattr(model, "hf_quantizer", None)
    if quantizer is not None and not getattr(quantizer, "is_compileable", True):
        return "quantizer", (f"the model's quantization ({type(quantizer).__name__}) does not "
                             "allow compiling")
    devices = {str(d) for d in (getattr(model, "hf_device_map", None) or {}).values()}
    if "disk" in devices or ("cpu" in devices and len(devices) > 1):
        return "offload", (f"the model is offloaded (device map on {', '.join(sorted(devices))}), "
                           "which transformers does not compile")
    if getattr(type(model), "_can_compile_fullgraph", None) is False:
        return "model_class", ("transformers' _valid_auto_compile_criteria said no, and the model "
                               "class sets _can_compile_fullgraph = False")
    return "unknown", (f"transformers {_version()}'s GenerationMixin._valid_auto_compile_criteria "
                       "said no, for a reason neuronkit does not know")


def _call_refusal(model: Any) -> tuple[str, str]:
    """(cause, reason) of ``get_compiled_call`` handing back the uncompiled forward."""
    model_type = str(getattr(getattr(model, "config", None), "model_type", "") or "?")
    if "llama4" in model_type:
        return "model_type", (f"transformers {_version()} compiles no 'llama4' type's forward "
                              f"(model type {model_type!r}: PreTrainedModel.get_compiled_call "
                              "returns it uncompiled, marked there as a TODO)")
    return "uncompiled_call", (f"transformers {_version()}'s PreTrainedModel.get_compiled_call "
                               f"returned the uncompiled forward (model type {model_type!r})")


class ForwardChoices:
    """What transformers chose for each forward of the ``model.generate`` calls made while
    :meth:`watching`: each refusal to compile, with its phase and reason."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.seen: list[Uncompiled] = []

    def take(self) -> list[Uncompiled]:
        """The refusals noted since the last take."""
        seen, self.seen = self.seen, []
        return seen

    def _criteria(self, original: Callable, *args: Any, **kwargs: Any) -> Any:
        ok = original(*args, **kwargs)
        if not ok:
            model_kwargs = args[0] if args else kwargs.get("model_kwargs")
            config = args[1] if len(args) > 1 else kwargs.get("generation_config")
            self.seen.append(Uncompiled(_phase(), *_criteria_refusal(self.model, model_kwargs,
                                                                     config)))
        return ok

    def _compiled_call(self, original: Callable, *args: Any, **kwargs: Any) -> Any:
        call = original(*args, **kwargs)
        if getattr(call, "_torchdynamo_orig_callable", None) is None:  # not torch.compile's
            self.seen.append(Uncompiled(_phase(), *_call_refusal(self.model)))
        return call

    @contextlib.contextmanager
    def watching(self, on: bool) -> Iterator[ForwardChoices]:
        """While open (and ``on``): transformers' two compile decisions wrapped on the instance."""
        with contextlib.ExitStack() as stack:
            if on:
                stack.enter_context(wrapped_method(self.model, "_valid_auto_compile_criteria",
                                             self._criteria))
                stack.enter_context(wrapped_method(self.model, "get_compiled_call", self._compiled_call))
            yield self


def nothing_compiled(model: Any, batch_events: list[CompileEvent]) -> Uncompiled | None:
    """Why a batch that recorded no graph ran eager, where torch says so: Dynamo is disabled, or
    it holds no graph of the forward at all (so none was reused); None otherwise."""
    if any(e.kind in GRAPH_KINDS for e in batch_events):
        return None
    import torch._dynamo

    if getattr(torch._dynamo.config, "disable", False):
        return Uncompiled("", "dynamo_disabled", "torch._dynamo is disabled (torch._dynamo.config."
                                                 "disable, or TORCHDYNAMO_DISABLE=1)")
    code = decode_code(model)
    if code is None or held_graphs(code) > 0:
        return None
    return Uncompiled("", "no_graph", "transformers passed the forward to torch.compile, but torch "
                                      "compiled no graph of it and holds none")


def _forward_location(model: Any) -> str:
    """The model's own ``forward`` (unwrapped) as compile events place it: ``file:line``."""
    forward = getattr(type(model), "forward", None)
    return location_of(getattr(inspect.unwrap(forward), "__code__", None)) if forward else ""


def record_uncompiled(rec: Any, model: Any, found: list[Uncompiled], key: tuple[int, int, int],
                      prefill: bool, steps: int, backend: str | None,
                      started_at: float) -> list[Uncompiled]:
    """Record each phase of a batch that ran uncompiled (``found``) as an ``eager_fallback``
    event; returns what was recorded. ``key``: (rows, bucket, cache length); ``prefill``: the
    batch's prefill was to compile; ``steps``: its decode calls."""
    rows, bucket, cache_len = key
    planned = (["prefill"] if prefill else []) + (["decode"] if steps > 0 else [])
    by_phase: dict[str, Uncompiled] = {}
    for u in found:
        for phase in [u.phase] if u.phase else planned:
            if phase in planned:
                by_phase.setdefault(phase, Uncompiled(phase, u.cause, u.reason))
    code = decode_code(model)
    for phase, u in sorted(by_phase.items(), key=lambda item: item[0] != "prefill"):
        calls = 1 if phase == "prefill" else steps
        shapes: dict[str, list[int | str]] = {"input_ids": [rows, bucket]} if phase == "prefill" \
            else {"input_ids": [rows, 1], "cache": [rows, cache_len]}
        rec.record(kind="eager_fallback", function=f"{type(model).__name__}.forward[{phase}]",
                   location=_forward_location(model), backend=backend or "",
                   started_at=started_at, calls=calls, input_shapes=shapes,
                   metrics={"phase": phase, NOT_COMPILED: {"cause": u.cause, "reason": u.reason},
                            "frame": {"name": code.co_name if code else "?",
                                      "location": location_of(code)}},
                   changed=f"bucket {bucket}, cache {cache_len}: not compiled",
                   reasons=[f"{calls} {phase} call{'' if calls == 1 else 's'} ran eager: "
                            f"{u.reason}"])
    return list(by_phase.values())


def is_uncompiled(event: CompileEvent) -> bool:
    """Whether ``event`` is a forward that was never compiled (:func:`record_uncompiled`), not
    calls past the recompile limit."""
    metrics = event.metrics if isinstance(event.metrics, dict) else {}
    return event.kind == "eager_fallback" and isinstance(metrics.get(NOT_COMPILED), dict)


def eager_reason(found: list[Uncompiled]) -> str:
    """The reasons of ``found``, each once, in order ('' for none)."""
    return "; ".join(dict.fromkeys(u.reason for u in found))


def warn_eager(model: Any, found: list[Uncompiled], events: list[CompileEvent]) -> None:
    """One :class:`EagerForwardWarning` for a call whose forward ran eager (``found``; nothing if
    not), counting the calls of its ``events``."""
    if not found:
        return
    calls = sum(e.calls for e in events if is_uncompiled(e))
    phases = " and ".join(sorted({u.phase for u in found}, key=lambda p: p != "prefill"))
    warnings.warn(f"{type(model).__name__}: nk.generate was to compile, but its {phases} ran "
                  f"eager, uncompiled ({calls} forward calls): {eager_reason(found)}. On "
                  "Neuron every op then builds a kernel per new shape and runs on its own, the "
                  "slow path; result.eager_reason, the eager_fallback events and nk.diagnose say "
                  "what to do", EagerForwardWarning, stacklevel=4)
