"""Warm-up before serving: compile every graph a serving plan needs, before the first request.

A serving plan is prompt-length ``buckets`` x ``batch_sizes`` at one ``max_new_tokens``.
:func:`warmup` runs ``nk.generate`` once per (batch size, bucket) on synthetic prompts, so each
decode graph (keyed on batch size, bucket and cache length) is compiled, and on Neuron the eager
prefill kernels of each bucket too. Afterwards ``nk.generate`` over prompts within the plan
compiles nothing. The :class:`WarmupManifest` says what was compiled and what it cost.
"""
from __future__ import annotations

import contextlib
import json
import platform
import time
from dataclasses import dataclass, field, fields
from pathlib import Path
from typing import Any, Callable, Sequence

from neuronkit.events.event import GRAPH_KINDS, CompileEvent
from neuronkit.events.facts import compile_seconds, graphs
from neuronkit.log.compile_log import CompileLog
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.setup.device import loaded_neuronx
from neuronkit.setup.models import pad_token_id
from neuronkit.workloads.generate_plan import (
    MIN_NEW_TOKEN_ROOM,
    PlannedBatch,
    cache_length,
    plan_generation,
    positive,
)
from neuronkit.workloads.generate_settings import max_positions
from neuronkit.workloads.generation import generate
from neuronkit.workloads.neff_builds import neff_counts
from neuronkit.workloads.padding_check import check_left_padding
from neuronkit.workloads.recompile_limit import fitted_limit
from neuronkit.workloads.shapes import Buckets

__all__ = ["WarmupManifest", "WarmupStep", "new_token_band", "warmup"]

FORMAT = "neuronkit-warmup"
FORMAT_VERSION = 1
FILLER_WORDS = (" the", " a", " hello", "the", "a", "x", ".")  # common single tokens to repeat

TRAVEL_NOTE = (
    "On native Neuron the warmed NEFFs travel to serving machines through the persistent NEFF "
    "cache, $TORCH_NEURONX_NEFF_CACHE_DIR (default /tmp/neff_cache; a shared or copied folder), "
    "or through torch.compiler.save_cache_artifacts() / load_cache_artifacts(), which "
    "torch-neuronx extends with its NEFFs. Dynamo's own graphs are rebuilt in each new process "
    "(seconds) even when the NEFFs load from the cache; a different torch, torch-neuronx, "
    "compiler flags (NEURON_CC_FLAGS, NEURON_COMPILER_OPT_LEVEL), logical core config, model "
    "config or dtype means new graphs.")


def new_token_band(max_new_tokens: int) -> tuple[int, int]:
    """The ``max_new_tokens`` values that share a cache length (one decode graph per bucket):
    the power-of-two room of ``cache_length`` (at least 32), e.g. 100 -> (65, 128)."""
    room = cache_length(0, max_new_tokens)  # the rounding generate() uses
    return (1 if room == MIN_NEW_TOKEN_ROOM else room // 2 + 1), room


@dataclass
class WarmupManifest:
    """What :func:`warmup` compiled, and what it cost; JSON-serialisable (``log`` aside).

    ``graphs``: one dict per (batch size, bucket): ``batch_size``, ``bucket``, ``cache_len``,
    ``graphs`` (compiles in the step: ``prefill_graphs`` + ``decode_graphs``, one each with
    ``nk.generate``'s compiled prefill), ``kernels`` (eager kernels, Neuron only),
    ``kernel_builds`` (of them, the NEFFs neuronx-cc built, the rest read from the NEFF cache;
    ``kernel_builds_at_most``: an upper bound, counted in sync mode; both absent from manifests
    written before they were kept), ``compile_s`` (Dynamo's), ``wall_s``, and on Neuron
    ``neff_compile_s``, ``neff_cache`` and ``cache_keys`` (None where unknown). The plan holds
    for prompts up to ``max(buckets)`` tokens, the ``batch_sizes`` planned and ``max_new_tokens``
    in ``new_token_band`` (decode graphs are keyed on the cache length, which depends on the
    power-of-two band of ``max_new_tokens``). ``travel`` says how the cache reaches servers.
    ``dtype``: the model's (``"bfloat16"``), which a serving process must load it in to meet
    the same graphs (None in manifests written before it was kept).
    """

    graphs: list[dict[str, Any]]
    device: str
    backend: str | None
    torch: str
    transformers: str
    max_new_tokens: int
    new_token_band: tuple[int, int]
    buckets: list[int]
    batch_sizes: list[int]
    total_s: float
    torch_neuronx: str | None = None
    dtype: str | None = None
    python: str = field(default_factory=platform.python_version)
    travel: str = TRAVEL_NOTE
    log: CompileLog | None = field(default=None, repr=False, compare=False)

    @property
    def compile_s(self) -> float:
        return sum(float(g["compile_s"]) for g in self.graphs)

    def to_dict(self) -> dict[str, Any]:
        data = {f.name: getattr(self, f.name) for f in fields(self) if f.name != "log"}
        data["new_token_band"] = list(self.new_token_band)
        return {"format": FORMAT, "version": FORMAT_VERSION, **data}

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), indent=2)

    def save(self, path: str | Path) -> Path:
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(self.to_json() + "\n", encoding="utf-8")
        return path

    @classmethod
    def load(cls, path: str | Path) -> WarmupManifest:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
        if not isinstance(data, dict) or data.get("format") != FORMAT:
            raise ValueError(f"{path} is not a neuronkit warm-up manifest")
        known = {f.name for f in fields(cls)} - {"log"}
        values = {k: v for k, v in data.items() if k in known}
        values["new_token_band"] = tuple(values.get("new_token_band", (1, MIN_NEW_TOKEN_ROOM)))
        return cls(**values)

    def __str__(self) -> str:
        lo, hi = self.new_token_band
        return (f"warm-up of {len(self.graphs)} graphs (batch sizes {self.batch_sizes} x buckets "
                f"{self.buckets}) on {self.device}, backend {self.backend}: "
                f"{sum(int(g['graphs']) for g in self.graphs)} compiles, {self.compile_s:.2f} s "
                f"compiling, {self.total_s:.2f} s in all; serves max_new_tokens {lo}..{hi}")


@dataclass(frozen=True)
class WarmupStep:
    """Progress after one (batch size, bucket) step."""

    done: int
    total: int
    graph: dict[str, Any]   # the step's entry of ``WarmupManifest.graphs``


def _filler_prompt(tokenizer: Any, bucket: int, shorter: int) -> str:
    """Text of exactly ``bucket`` tokens (else of a length in ``(shorter, bucket]``) made of one
    common vocabulary token repeated, never the pad token."""
    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=True)["input_ids"])

    pad = getattr(tokenizer, "pad_token_id", None)
    fallback: str | None = None
    for word in FILLER_WORDS:
        ids = tokenizer(word, add_special_tokens=False)["input_ids"]
        if len(ids) != 1 or ids[0] == pad or ids[0] == getattr(tokenizer, "unk_token_id", None):
            continue
        one, two = length(word), length(word * 2)
        step, extra = two - one, one - (two - one)
        if step <= 0:
            continue
        guess = max(1, (bucket - extra) // step)
        for count in (guess, guess - 1, guess + 1, guess - 2, guess + 2):
            if count < 1:
                continue
            n = length(word * count)
            if n == bucket:
                return word * count
            if fallback is None and shorter < n <= bucket:
                fallback = word * count
    if fallback is None:
        raise ValueError(f"cannot build a prompt that fits bucket {bucket} with this tokenizer")
    return fallback


def _fill_cache_keys(steps: list[tuple[dict[str, Any], list[CompileEvent]]]) -> None:
    """Set each step's ``cache_keys`` from ``torch_neuronx.get_dynamo_metrics()`` (one
    synchronize, after the warm-up's last safe point), where its events name their metric
    entries; nothing off Neuron. Entries of an older table (reset since) stay unknown."""
    getter = getattr(loaded_neuronx(), "get_dynamo_metrics", None)
    spans = [e.metrics["neuron_graphs"] for _, events in steps for e in events
             if isinstance(e.metrics.get("neuron_graphs"), list)]
    if getter is None or not spans:
        return
    table, epoch = list(getter()), max(span[0] for span in spans)
    for entry, events in steps:
        keys = [str(getattr(m, "graph_id", "")) for e in events
                for span in [e.metrics.get("neuron_graphs")]
                if isinstance(span, list) and span[0] == epoch and span[2] <= len(table)
                for m in table[span[1]:span[2]]]
        entry["cache_keys"] = [k for k in keys if k] or None


def _step_entry(batch_size: int, bucket: int, cache_len: int, events: list[CompileEvent],
                wall_s: float) -> dict[str, Any]:
    built = [e for e in events if e.kind in GRAPH_KINDS]
    neff = [e.neff_compile_s for e in built if e.neff_compile_s is not None]
    states = [e.neff_cache for e in built if e.neff_cache]
    phases = [e.metrics.get("phase") if isinstance(e.metrics, dict) else None for e in built]
    kernels = neff_counts([e for e in events if e.kind == "kernels"])
    return {"batch_size": batch_size, "bucket": bucket, "cache_len": cache_len,
            "graphs": graphs(events), "prefill_graphs": phases.count("prefill"),
            "decode_graphs": phases.count("decode"),
            "kernels": sum(e.kernels for e in events if e.kind == "kernels"),
            "kernel_builds": kernels.kernel_builds,
            "kernel_builds_at_most": kernels.kernels_sync_mode and kernels.kernel_builds > 0,
            "compile_s": round(compile_seconds(built), 6),
            "wall_s": round(wall_s, 6),
            "neff_compile_s": round(sum(neff), 6) if neff else None,
            "neff_cache": states[0] if len(set(states)) == 1 else (",".join(states) or None),
            "cache_keys": None}


def _positive_ints(values: Any, name: str) -> list[int]:
    items = [values] if isinstance(values, int) else list(values)
    if not items or any(isinstance(v, bool) or not isinstance(v, int) or v <= 0 for v in items):
        raise ValueError(f"{name} must be positive ints, e.g. [1, 4]; got {values!r}")
    return sorted(set(items))


def _planned_steps(buckets: Buckets, sizes: list[int], max_new_tokens: int,
                   max_pos: int | None) -> list[PlannedBatch]:
    """The batch of each warm-up step, one per (batch size, bucket), as ``nk.generate`` plans it
    for a prompt of the bucket's length."""
    return [batch for size in sizes
            for batch in plan_generation([[0] * b for b in buckets], max_new_tokens, buckets, size,
                                         max_positions=max_pos).batches]


def _versions() -> tuple[str, str, str | None]:
    import torch
    import transformers

    neuronx = loaded_neuronx()
    return (torch.__version__, transformers.__version__,
            None if neuronx is None else str(getattr(neuronx, "__version__", "?")))


def warmup(model: Any, tokenizer: Any, buckets: Buckets | list[int],
           batch_sizes: int | Sequence[int] = (1,), max_new_tokens: int = 32, *,
           recorder: CompileRecorder | None = None, backend: Any = None,
           on_step: Callable[[WarmupStep], Any] | None = None) -> WarmupManifest:
    """Compile every graph of the plan ``buckets`` x ``batch_sizes`` at ``max_new_tokens``.

    One ``nk.generate`` per (batch size, bucket) on a synthetic prompt of ``bucket`` tokens (a
    common token repeated; eos held off so every step decodes ``max_new_tokens`` tokens),
    ``compile=True``, into one ``CompileRecorder`` (``recorder``, or one made here;
    ``manifest.log`` is its log). Within the plan (prompts up to ``max(buckets)``
    tokens, ``batch_size`` one of ``batch_sizes``, the same ``buckets``, ``max_new_tokens`` in
    :func:`new_token_band`: the decode graphs are keyed on the cache length, which depends on
    its power-of-two band) a later ``nk.generate`` compiles nothing. torch's recompile limit is
    raised for the warm-up to fit the plan (see ``recompile_limit.fitted_limit``). ``on_step``
    gets a :class:`WarmupStep` after each graph.

    On Neuron: the NEFFs built here reach serving machines through the persistent NEFF cache,
    ``$TORCH_NEURONX_NEFF_CACHE_DIR`` (default ``/tmp/neff_cache``; share or copy the folder),
    or ``torch.compiler.save_cache_artifacts()`` / ``load_cache_artifacts()``, which
    torch-neuronx extends with its NEFFs. Not promised: Dynamo's own graphs are rebuilt in each
    new process even when the NEFFs load from the cache, and a different torch, torch-neuronx,
    compiler flags, model config or dtype means new graphs.
    """
    plan = Buckets(buckets)
    sizes = _positive_ints(batch_sizes, "batch_sizes")
    max_new_tokens = positive(max_new_tokens, "max_new_tokens")
    max_pos = max_positions(model)
    if max_pos is not None and plan.max + max_new_tokens > max_pos:  # before compiling any
        raise ValueError(f"bucket {plan.max} + max_new_tokens {max_new_tokens} exceeds the "
                         f"model's {max_pos} positions; use smaller buckets or fewer new tokens")
    bounds = [0, *plan.boundaries]
    prompts = {b: _filler_prompt(tokenizer, b, bounds[i]) for i, b in enumerate(plan.boundaries)}
    steps = _planned_steps(plan, sizes, max_new_tokens, max_pos)
    first = tokenizer(prompts[plan.boundaries[0]], add_special_tokens=True)["input_ids"]
    check_left_padding(model, list(first), pad_token_id(tokenizer),   # serving pads: refuse now
                       longest=plan.max + max_new_tokens)
    rec = recorder if recorder is not None else CompileRecorder(
        device=str(model.device), context="warmup")
    done: list[tuple[dict[str, Any], list[CompileEvent]]] = []
    backend_name: str | None = None
    t_start = time.perf_counter()
    with contextlib.ExitStack() as scope:
        if not rec.active:
            scope.enter_context(rec)
        scope.enter_context(fitted_limit(model, len({g for step in steps for g in step.graphs()})))
        for n, step in enumerate(steps, start=1):
            seen = len(rec.events)
            t0 = time.perf_counter()
            with rec.context(f"warmup {n}/{len(steps)}: batch {step.rows}, bucket {step.bucket}"):
                result = generate(model, tokenizer, [prompts[step.bucket]] * step.rows,
                                  max_new_tokens, buckets=plan, batch_size=step.rows, recorder=rec,
                                  compile=True, backend=backend, min_new_tokens=max_new_tokens)
            backend_name = result.backend
            events = rec.events[seen:]
            entry = _step_entry(step.rows, step.bucket, step.cache_len, events,
                                time.perf_counter() - t0)
            done.append((entry, [e for e in events if e.kind in GRAPH_KINDS]))
            if on_step is not None:
                on_step(WarmupStep(n, len(steps), entry))
    _fill_cache_keys(done)
    torch_version, transformers_version, neuronx_version = _versions()
    return WarmupManifest(graphs=[entry for entry, _ in done], device=str(model.device),
                          backend=backend_name, torch=torch_version,
                          transformers=transformers_version, max_new_tokens=max_new_tokens,
                          new_token_band=new_token_band(max_new_tokens),
                          buckets=list(plan.boundaries), batch_sizes=sizes,
                          total_s=round(time.perf_counter() - t_start, 6),
                          torch_neuronx=neuronx_version,
                          dtype=str(getattr(model, "dtype", "")).removeprefix("torch.") or None,
                          log=rec.log)
