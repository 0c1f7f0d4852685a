"""``generate()`` the Neuron way: a :class:`GenerationPlan` run batch by batch on CPU-resident
tensors, each batch with its own bounded static cache, recording compile events.

What is planned and why: ``generate_plan.py``. Sliding-window layers get full-length static
layers (``static_cache.py``: their own keep a Python int that recompiles every token), and torch's
recompile limit, which every model's decode step shares, is raised to what the call plans
(``recompile_limit.py``). Inputs stay on CPU (``model.generate`` moves only what forward needs)
and outputs come back on CPU.
"""
from __future__ import annotations

import contextlib
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import compile_seconds, graphs, total_seconds
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.setup.models import pad_token_id
from neuronkit.workloads.generate_eager import (
    ForwardChoices,
    Uncompiled,
    eager_reason,
    nothing_compiled,
    record_uncompiled,
    warn_eager,
)
from neuronkit.workloads.generate_plan import (
    DEFAULT_BATCH_SIZE,
    GenerationPlan,
    PlannedBatch,
    check_prefill,
    check_truncate,
    plan_generation,
    positive,
)
from neuronkit.workloads.generate_rows import FirstTokenClock as _FirstTokenClock
from neuronkit.workloads.generate_rows import left_padded, until_eos
from neuronkit.workloads.generate_settings import (
    CallSettings,
    call_settings,
    check_managed,
    check_model_and_tokenizer,
    check_progress,
    check_prompts,
    check_recorder,
    max_positions,
    token_ids,
)
from neuronkit.workloads.graph_watch import GraphWatch, allowed_graphs
from neuronkit.workloads.padding_check import check_left_padding
from neuronkit.workloads.prefill_masks import attended_rows, prefill_masks
from neuronkit.workloads.progress import BatchProgress, BatchTiming, eta_s, new_shapes
from neuronkit.workloads.recompile_limit import EagerTally, LimitFit, call_limit, warn_if_no_room
from neuronkit.workloads.shapes import Buckets
from neuronkit.workloads.static_cache import UnboundedCacheError, bounded_static_cache

__all__ = ["GenerationResult", "StaticCacheError", "generate"]


@dataclass
class GenerationResult:
    """What :func:`generate` produced, and what it cost."""

    texts: list[str]                 # the new text of each prompt (prompt not repeated)
    output_ids: list[Any]            # per prompt, a 1-D CPU tensor: prompt + new tokens, no padding
    timings: list[BatchTiming]
    tokens_per_s: float              # new tokens of real rows / wall_s (compiles included)
    padding_waste: float             # padded fraction of all prompt positions, dummy rows included
    events: list[CompileEvent]       # compile events recorded during the call
    buckets: Buckets | None          # None: each batch padded to its own longest prompt
    wall_s: float
    device: str = "cpu"
    backend: str | None = None       # compile backend; None when compile=False
    batch_size: int = 1
    new_tokens: int = 0
    planned_graphs: int = 0          # the most graphs the call could compile (prefill + decode)
    recompile_limit: LimitFit | None = None   # what was done to torch's limit (None: nothing)
    eager_calls: int = 0             # forward calls torch ran uncompiled past the recompile limit
    eager_prefills: int = 0          # of eager_calls, the prefills (the rest: decode calls)
    eager_reason: str = ""           # why transformers (or torch) compiled no forward: '' if it did
    full_layers: int = 0             # sliding-window cache layers given full length
    forecast_kernels: int = 0        # eager kernels native Neuron would compile (a CPU forecast)
    eager_ops: int = 0               # op calls of the model run eagerly (forecast_kernels=True)
    stopped: bool = False            # ended early: `stop` was set (batches_done of batches ran)
    batches_done: int = 0
    batches: int = 0

    @property
    def text(self) -> str:
        """The only text, for a single prompt."""
        if len(self.texts) != 1:
            raise ValueError(f"{len(self.texts)} texts: use .texts")
        return self.texts[0]

    @property
    def ran_eager(self) -> bool:
        """A compiling call ran some forward uncompiled: :attr:`eager_reason`, or calls past the
        recompile limit (:attr:`eager_calls`)."""
        return bool(self.eager_reason) or self.eager_calls > 0

    @property
    def graphs(self) -> int:
        """Compiles during the call (first compiles and recompiles)."""
        return graphs(self.events)

    @property
    def compile_s(self) -> float:
        return compile_seconds(self.events)

    @property
    def cache_lengths(self) -> list[int]:
        return sorted({t.cache_len for t in self.timings})

    @property
    def steady_tokens_per_s(self) -> float | None:
        """New tokens per second without the call's compiles (NEFF builds in): None if no time is left."""
        return self.new_tokens / left if (left := self.wall_s - total_seconds(self.events)) > 0 else None

    def throughput(self, spec: str = ".1f") -> str:
        """:meth:`throughput_text` of the call: ``12.3 tokens/s (45.6 tokens/s without ...)``."""
        return self.throughput_text(self.new_tokens, self.wall_s, total_seconds(self.events), spec)

    @staticmethod
    def throughput_text(new_tokens: int, wall_s: float, compile_s: float, spec: str = ".1f") -> str:
        """``12.3 tokens/s (45.6 tokens/s without the 2.10 s of compiles)``, or the rate alone."""
        rate = f"{new_tokens / wall_s if wall_s > 0 else 0.0:{spec}} tokens/s"
        steady = f"{new_tokens / left:{spec}} tokens/s" if (left := wall_s - compile_s) > 0 else "no time"
        return rate + (f" ({steady} without the {compile_s:.2f} s of compiles)" if compile_s > 0 else "")

    def __str__(self) -> str:
        shape = repr(self.buckets) if self.buckets is not None else "no buckets"
        fit, kernels = self.recompile_limit, self.forecast_kernels
        notes = [str(fit) if fit is not None and fit.limit > fit.limit_before else "",
                 f"forward ran EAGER, not compiled: {self.eager_reason}" if self.eager_reason else "",
                 f"{self.eager_prefills} prefill and {self.eager_calls - self.eager_prefills} decode "
                 "calls ran EAGER (recompile limit)" if self.eager_calls else "",
                 f"forecast: {kernels} eager kernels on Neuron" if kernels else "",
                 f"{self.eager_ops} eager op calls of the model" if self.eager_ops else ""]
        return (f"{_plural(len(self.texts), 'prompt')} in {_plural(len(self.timings), 'batch')} "
                f"of {self.batch_size} ({shape}; cache lengths {self.cache_lengths}) on "
                f"{self.device}, backend {self.backend or 'none (compile=False)'}: "
                f"{_plural(self.graphs, 'compile')} ({self.compile_s:.2f} s), {self.new_tokens} new "
                f"tokens in {self.wall_s:.2f} s = {self.throughput()}, padding waste "
                f"{self.padding_waste:.0%}" + "".join(f"; {note}" for note in notes if note))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith('ch') else 's'}"


def _label(rec: CompileRecorder, n: int, batch: PlannedBatch, bucketed: bool) -> str:
    """The context of a batch's events, under a caller's own label (a sweep step, a training step)."""
    padded = "bucket" if bucketed else "length"  # no buckets: padded to its own longest prompt
    label = f"generate batch {n}: {padded} {batch.bucket}, cache {batch.cache_len}"
    outer = rec.current_context
    return f"{outer} · {label}" if outer and outer != "generate" else label


class _BatchRunner:
    """Runs the batches of a plan on one model, into one recorder, and keeps what they produced."""

    def __init__(self, model, tokenizer, plan: GenerationPlan, rec: CompileRecorder,
                 settings: CallSettings, forecast: Any) -> None:
        self.model, self.tokenizer, self.plan, self.rec = model, tokenizer, plan, rec
        self.settings, self.forecast = settings, forecast   # forecast: a KernelForecast or None
        self.first_event = len(rec.events)
        self.texts: list[str] = [""] * len(plan.token_ids)
        self.output_ids: list[Any] = [None] * len(plan.token_ids)
        self.timings: list[BatchTiming] = []
        self.eager, self.full_layers = EagerTally(), 0   # calls run eager past the limit
        self.choices, self.uncompiled = ForwardChoices(model), list[Uncompiled]()
        self.allowed = allowed_graphs(plan.batches) if plan.planned_graphs else None

    def run(self, on_batch: Callable[[BatchProgress], Any] | None,
            stop: threading.Event | None) -> bool:
        """Run the batches in order, reporting progress after each; True when ``stop`` ended
        the call before a batch."""
        batches = self.plan.batches
        for n, batch in enumerate(batches):
            if stop is not None and stop.is_set():
                return True
            self.run_batch(n, batch)
            if on_batch is not None:
                left = [b.shape for b in batches[n + 1:]]
                on_batch(BatchProgress(n + 1, len(batches), self.timings[-1],
                                       new_shapes(self.timings, left), eta_s(self.timings, left)))
        return False

    def run_batch(self, n: int, batch: PlannedBatch) -> None:
        """One ``model.generate`` call: its outputs kept, its time and compiles noted."""
        from neuronkit.sources.kernel_forecast import checkpoint, counting

        inputs, clock = self._inputs(batch)
        kwargs, watch = self._watched(n)
        seen = len(self.rec.events)
        label = _label(self.rec, n, batch, bucketed=self.plan.buckets is not None)
        with self.rec.context(label), counting(self.forecast):
            t0 = time.perf_counter()
            try:
                out = self.model.generate(**inputs, **kwargs)
            except (IndexError, RuntimeError, ValueError, TypeError, AttributeError) as exc:
                raise _static_cache_error(self.model, batch, exc) from exc
            t1 = time.perf_counter()
        out = out.sequences if hasattr(out, "sequences") else out
        out = out.cpu()
        new_tokens = self._keep(batch, out)
        first = clock.at if clock.at is not None else t1
        self.timings.append(BatchTiming(bucket=batch.bucket, cache_len=batch.cache_len,
                                        rows=batch.rows, real_rows=len(batch.prompts),
                                        prefill_s=first - t0, decode_s=t1 - first,
                                        new_tokens=new_tokens, compiles=len(self.rec.events) - seen,
                                        compile_s=compile_seconds(self.rec.events[seen:])))
        with self.rec.context(label):
            if self.plan.planned_graphs:
                key, steps = (batch.rows, batch.bucket, batch.cache_len), out.shape[1] - batch.bucket - 1
                started, backend = time.time() - (time.perf_counter() - t0), self.settings.backend
                self.eager.record(self.rec, self.model, seen, key, batch.prefill, steps, backend, started)
                found = self.choices.take() or [u for u in [nothing_compiled(
                    self.model, self.rec.events[seen:])] if u is not None]
                self.uncompiled += record_uncompiled(self.rec, self.model, found, key, batch.prefill,
                                                     steps, backend, started)
            self.rec.safe_point()  # on Neuron: NEFF build times, this batch's eager kernels
            checkpoint(self.forecast)  # forecast_kernels=True: this batch's, as one event
        if watch is not None:
            watch.raise_if_over(self.model)

    def _watched(self, n: int) -> tuple[dict[str, Any], GraphWatch | None]:
        """The call's keywords with a :class:`GraphWatch` first among the stopping criteria
        (compiling), so that a graph over the plan ends the batch."""
        if self.allowed is None:
            return self.settings.kwargs, None
        from transformers import StoppingCriteriaList

        kwargs = dict(self.settings.kwargs)
        watch = GraphWatch(self.rec, self.first_event, self.allowed[n])
        kwargs["stopping_criteria"] = StoppingCriteriaList(
            [watch, *(kwargs.pop("stopping_criteria", None) or [])])
        return kwargs, watch

    def _inputs(self, batch: PlannedBatch) -> tuple[dict[str, Any], _FirstTokenClock]:
        """A batch's own keywords: left-padded rows, a fresh static cache, the first-token clock."""
        from transformers import LogitsProcessorList

        input_ids, mask = left_padded([self.plan.token_ids[i] for i in batch.row_prompts],
                                      batch.bucket, self.settings.pad_id)
        cache, self.full_layers = bounded_static_cache(self.model, batch.cache_len,
                                                       refuse_unbounded=self.settings.compile)
        clock = _FirstTokenClock()
        processors = LogitsProcessorList([clock, *self.settings.logits_processor])
        inputs = {"input_ids": input_ids, "attention_mask": mask, "logits_processor": processors,
                  self.settings.cache_kw: cache}
        if batch.prefill:  # one chunk of the whole bucket: transformers runs it compiled
            inputs["prefill_chunk_size"] = batch.bucket
        return inputs, clock

    def _keep(self, batch: PlannedBatch, out) -> int:
        """Each real row's ids (prompt + new tokens) and new text; returns the new tokens kept."""
        import torch

        total = 0
        for r, i in enumerate(batch.prompts):
            new = until_eos(out[r, batch.bucket:].tolist(), self.settings.eos)
            total += len(new)
            self.output_ids[i] = torch.tensor([*self.plan.token_ids[i], *new], dtype=torch.long)
            self.texts[i] = self.tokenizer.decode(new, skip_special_tokens=True)
        return total

    def result(self, wall_s: float, fit: LimitFit | None, stopped: bool) -> GenerationResult:
        new_tokens = sum(t.new_tokens for t in self.timings)
        events = list(self.rec.events[self.first_event:])
        warn_eager(self.model, self.uncompiled, events)
        return GenerationResult(
            texts=self.texts, output_ids=self.output_ids, timings=self.timings,
            tokens_per_s=new_tokens / wall_s if wall_s > 0 else 0.0,
            padding_waste=self.plan.padding_waste(len(self.timings)),
            events=events, buckets=self.plan.buckets,
            wall_s=wall_s, device=str(self.model.device), backend=self.settings.backend,
            batch_size=self.plan.batch_size, new_tokens=new_tokens,
            planned_graphs=self.plan.planned_graphs, recompile_limit=fit,
            eager_calls=self.eager.total, eager_prefills=self.eager.prefill,
            eager_reason=eager_reason(self.uncompiled), full_layers=self.full_layers,
            forecast_kernels=self.forecast.kernels if self.forecast else 0,
            eager_ops=self.forecast.calls if self.forecast else 0, stopped=stopped,
            batches_done=len(self.timings), batches=len(self.plan.batches))


class StaticCacheError(UnboundedCacheError):
    """``model.generate`` failed on the static cache ``nk.generate`` gave it."""


def _static_cache_error(model, batch: PlannedBatch, exc: BaseException) -> StaticCacheError:
    """The error of a batch whose ``model.generate`` failed, with the cause and the cache."""
    cause = (str(exc).strip().splitlines() or [""])[0][:300]
    return StaticCacheError(
        f"{type(model).__name__}: model.generate failed on a {batch.rows}x{batch.bucket} batch "
        f"with a static cache of {batch.cache_len} positions ({type(exc).__name__}: {cause}). "
        f"A model that keeps a cache of its own, or writes more positions than its input holds, "
        f"cannot take the static cache nk.generate gives it; try nk.generate(..., "
        f"compile=False), and if that fails too, call model.generate")


def _pads(plan: GenerationPlan) -> bool:
    """Whether any row of the plan is padded (shorter than its batch's bucket)."""
    return any(len(plan.token_ids[i]) < b.bucket for b in plan.batches for i in b.row_prompts)


def _forecast(rec: CompileRecorder, model, on: bool) -> Any:
    """A KernelForecast of the model's forward (the eager prefill) when ``on``, else None."""
    if not on:
        return None
    from neuronkit.sources.kernel_forecast import KernelForecast

    return KernelForecast(rec, within=model)


def generate(model, tokenizer, prompts: str | list[str], max_new_tokens: int = 32,
             buckets: Buckets | list[int] | str | None = None, batch_size: int | None = None,
             recorder=None, *, compile: bool = True, backend: Any = None,
             truncate: str | None = None, fit_recompile_limit: bool = True,
             forecast_kernels: bool = False, on_batch: Callable[[BatchProgress], Any] | None = None,
             stop: threading.Event | None = None, prefill: str = "compiled",
             **generate_kwargs) -> GenerationResult:
    """Generate for one prompt or many with bounded static shapes, recording compile events.

    ``buckets``: a :class:`Buckets` or list of prompt lengths, ``"auto"`` (``plan_buckets`` on
    these prompts' lengths), or None (each batch padded to its own longest prompt: as many decode
    graphs as distinct lengths). ``batch_size``: rows per ``model.generate`` call, default
    ``min(len(prompts), 4)``; pass it explicitly to share graphs across calls. ``recorder``: a
    ``CompileRecorder`` (one is made for the call if None). ``compile=False`` runs eager;
    ``backend`` overrides the compile backend (default: transformers' ``neuron`` on Neuron,
    ``nk.detect()``'s CPU backend on CPU, inductor on CUDA). ``truncate="left"`` keeps the last
    ``buckets.max`` tokens of a longer prompt instead of raising. ``fit_recompile_limit``
    (default on) raises torch's recompile limit for the call to the graphs the decode function
    holds plus those the call plans (``result.recompile_limit`` says what was done); off, a
    limit hit runs the rest eager, each such phase of a batch an ``eager_fallback`` event.
    ``forecast_kernels=True`` counts the eager-op kernels native Neuron would compile (the ops of
    the model's uncompiled forward: the prefill) and records them per batch as a ``kernels`` event
    marked ``forecast`` (``result.forecast_kernels``): a forecast counted here, not a measurement.
    ``on_batch(progress)`` runs after every batch (:class:`~neuronkit.workloads.progress.BatchProgress`:
    done / total, an ETA); once ``stop`` (a ``threading.Event``) is set the call ends before the
    next batch: ``result.stopped``, prompts not reached keep ``""`` and ``None``.
    ``prefill="compiled"`` (the default with ``compile=True``) runs each batch's prefill as one
    compiled graph too (``...forward[prefill]``, keyed on batch size, bucket and cache length),
    from which decode continues on the same cache: at most two graphs per (batch size, bucket),
    nothing of the model's forward left eager. ``prefill="eager"``: transformers' own uncompiled
    prefill (the seed's recipe; on Neuron every op of it compiles a kernel per new shape). Other
    keywords go to ``model.generate`` (e.g. ``do_sample``, ``eos_token_id``). A compiling call
    whose forward transformers (or torch) did not compile says so (``generate_eager.py``):
    ``result.ran_eager`` and ``result.eager_reason``, an ``eager_fallback`` event per batch and
    phase with ``metrics["not_compiled"]`` (cause, reason), and one ``EagerForwardWarning``.

    Refused with the reason and the fix: a model whose output left padding changes, before
    anything is padded (:class:`~neuronkit.LeftPaddingError`, checked once per model), cache
    layers no bucket bounds and models without a KV cache (``UnboundedCacheError``), and, at the
    first graph over the plan, a model that recompiles per step (``UnboundedGraphsError``, a
    subclass; the call stops after that step).
    """
    check_model_and_tokenizer(model, tokenizer)
    check_progress(on_batch, stop)
    prompts = check_prompts(prompts)
    max_new_tokens = positive(max_new_tokens, "max_new_tokens")
    check_recorder(recorder)
    check_truncate(truncate)
    check_managed(generate_kwargs)
    check_prefill(prefill)
    batch_size = positive(batch_size if batch_size is not None
                          else min(len(prompts), DEFAULT_BATCH_SIZE), "batch_size")
    pad_id = generate_kwargs.pop("pad_token_id", None)
    if pad_id is None:
        pad_id = pad_token_id(tokenizer, warn=True)
    plan = plan_generation(token_ids(tokenizer, prompts), max_new_tokens, buckets, batch_size,
                           truncate=truncate, max_positions=max_positions(model), compile=compile,
                           prefill=prefill)
    settings = call_settings(model, tokenizer, pad_id, max_new_tokens, compile, backend,
                              generate_kwargs)   # refuses a model without a KV cache
    with attended_rows(model):     # the probe's masks are the call's (no pad row fully masked)
        check_left_padding(model, list(plan.token_ids[0]), pad_id, padded=_pads(plan),
                           longest=max(b.bucket for b in plan.batches) + max_new_tokens)
    if compile and not fit_recompile_limit:
        warn_if_no_room(model, plan.planned_graphs)
    rec = recorder if recorder is not None else CompileRecorder(
        device=str(model.device), backend=settings.backend, context="generate")
    with contextlib.ExitStack() as scope:
        if not rec.active:
            scope.enter_context(rec)        # stopped again at the end; a caller's keeps running
        t_start = time.perf_counter()
        runner = _BatchRunner(model, tokenizer, plan, rec, settings,
                              _forecast(rec, model, forecast_kernels))
        fit = scope.enter_context(call_limit(model, plan.planned_graphs, rec,
                                             fit=fit_recompile_limit))
        scope.enter_context(attended_rows(model))    # no fully masked row: NaN on Neuron
        scope.enter_context(prefill_masks(model, any(b.prefill for b in plan.batches)))
        scope.enter_context(runner.choices.watching(on=bool(plan.planned_graphs)))
        stopped = runner.run(on_batch, stop)
    return runner.result(time.perf_counter() - t_start, fit, stopped)

