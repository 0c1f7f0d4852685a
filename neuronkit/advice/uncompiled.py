"""The finding for a forward that ran eager because nothing compiled it: transformers chose not
to compile it inside ``model.generate`` (or torch's Dynamo was off), which ``nk.generate``
records as ``eager_fallback`` events with ``metrics["not_compiled"]`` (the cause and the reason,
``workloads/generate_eager.py``). One finding per reason, naming the functions it ran eager."""
from __future__ import annotations

from collections import defaultdict

from neuronkit.advice.excerpts import cut_long
from neuronkit.advice.finding import Advice
from neuronkit.advice.wording import count
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import function_labels
from neuronkit.workloads.generate_eager import NOT_COMPILED, is_uncompiled

__all__ = ["uncompiled_findings"]

_FIXES = {
    "model_type": "nothing passed to nk.generate changes this: transformers decides it for this "
                  "model type. Expect eager speed; keep the buckets few, so that each shape's "
                  "kernels are built once (nk.generate(..., forecast_kernels=True) counts them on "
                  "CPU), or serve a model type transformers compiles in generate()",
    "disable_compile": "set model.generation_config.disable_compile = False before calling "
                       "nk.generate",
    "device": "leave compile_config out of nk.generate's keywords (nk.generate passes "
              "nk.compile_config(), which compiles on any device), or pass nk.compile_config(backend)",
    "cache": "give the model a cache transformers compiles with (a static cache, which "
             "nk.generate passes unless the model replaces it)",
    "quantizer": "use a quantization method that allows torch.compile, or the unquantized model",
    "offload": "load the model on one device, without CPU or disk offload (nk.load_model does)",
    "dynamo_disabled": "unset TORCHDYNAMO_DISABLE, or set torch._dynamo.config.disable = False",
}
# On native Neuron each eager op is submitted as its own kernel, keyed by op name and tensor shapes
# and dtypes (core/NeuronBindings.cpp:1280-1327, tn/kernels/base.py:103-160): a new shape builds one
_PREFILL = (" An eager prefill runs every op of the forward at its prompt length, so each new "
            "length builds a kernel per op (nk.generate(..., forecast_kernels=True) counts them "
            "on CPU).")
_FIX = ("run model.generate under a CompileRecorder with TORCH_LOGS=dynamo to see what torch did, "
        "and check transformers' GenerationMixin._valid_auto_compile_criteria and "
        "PreTrainedModel.get_compiled_call for this version")


def _cause(e: CompileEvent) -> tuple[str, str]:
    """(cause, reason) of an uncompiled forward's event (text from a log: strings only)."""
    told = e.metrics[NOT_COMPILED]
    cause, reason = told.get("cause"), told.get("reason")
    return (cause if isinstance(cause, str) else "unknown",
            cut_long(reason) if isinstance(reason, str) and reason else "no reason recorded")


def uncompiled_findings(events: list[CompileEvent]) -> list[Advice]:
    """One critical finding per reason a forward ran eager, uncompiled: which functions, how
    many calls (on the rank with most), why, what it costs on Neuron and what to do."""
    ran = [e for e in events if is_uncompiled(e)]
    if not ran:
        return []
    labels = function_labels(events)
    by_reason: dict[tuple[str, str], list[CompileEvent]] = defaultdict(list)
    for e in ran:
        by_reason[_cause(e)].append(e)
    found = []
    for (cause, reason), evs in by_reason.items():
        names = list(dict.fromkeys(labels[e.function, e.location] for e in evs))
        calls: dict[int, int] = defaultdict(int)
        for e in evs:
            calls[e.rank] += e.calls
        n = max(calls.values())
        on = f" on each of {len(calls)} ranks" if len(calls) > 1 else ""
        prefill = any(isinstance(e.metrics, dict) and e.metrics.get("phase") == "prefill" for e in evs)
        found.append(Advice(
            f"{', '.join(names)}: ran eager, never compiled ({count(n, 'call')}{on})",
            f"The call was to compile, but {reason}. {count(n, 'forward call')} ran op by op, "
            "uncompiled, leaving no graph for torch to record. On Neuron that is the slow path "
            "that compiling avoids: every op builds a kernel for each new input shape and runs "
            "on its own, unfused." + (_PREFILL if prefill else ""),
            _FIXES.get(cause, _FIX), "critical",
            {"functions": names, "calls": n, "cause": cause, "reason": reason,
             "per_rank": dict(calls), "events": [e.seq for e in evs]}))
    return found
