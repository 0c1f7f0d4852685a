"""``generate()`` the Neuron way: CPU-resident tensors, bucketed static shapes, compile events.

transformers compiles the decode step of ``generate()`` when the cache is static, and that graph
is keyed on the batch size and the static cache length. Left to itself, transformers grows the
cache to the longest request seen so far, so each new longest request recompiles (minutes each
on Neuron) and every later short request pays for the long cache. Here each batch is:

1. left-padded to its prompt-length bucket (``buckets``), with a short batch filled up to
   ``batch_size`` by dummy rows that are dropped from the result;
2. given its own ``StaticCache`` of length ``cache_length(bucket, max_new_tokens)``;

so the decode graphs are at most ``len(buckets)`` per (batch size, new-token room), whatever the
arrival order. Sliding-window layers get full-length static layers (``static_cache.py``: their
own keep a Python int that recompiles every token), and torch's recompile limit, which every
model's decode step shares, is raised to what the call plans (``recompile_limit.py``). Inputs
stay on CPU (``generate()`` moves only what forward needs) and outputs come back on CPU.
"""
from __future__ import annotations

import contextlib
import inspect
import os
import threading
import time
from dataclasses import dataclass
from typing import Any, Callable

from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import compile_seconds, graphs
from neuronkit.workloads.progress import BatchProgress, BatchTiming, eta_s, new_shapes
from neuronkit.setup.models import (PadTokenWarning, pad_token_id)  # noqa: F401  (PadTokenWarning: re-exported)
from neuronkit.workloads.recompile_limit import (LEDGER, LimitFit, fitted_limit, record_eager_batch,
                                                 warn_if_no_room)
from neuronkit.workloads.shapes import Buckets, plan_buckets
from neuronkit.workloads.static_cache import bounded_static_cache

__all__ = ["GenerationResult", "cache_length", "generate"]

DEFAULT_BATCH_SIZE = 4
MIN_NEW_TOKEN_ROOM = 32
MANAGED_KWARGS = ("input_ids", "attention_mask", "cache", "past_key_values", "cache_implementation",
                  "max_length", "disable_compile", "num_return_sequences")


def cache_length(bucket: int, max_new_tokens: int) -> int:
    """Static cache length for a prompt bucket: ``bucket`` plus room for the new tokens, the room
    being ``max_new_tokens`` rounded up to a power of two (at least 32). Requests with different
    ``max_new_tokens`` in the same power-of-two band share one decode graph."""
    room = MIN_NEW_TOKEN_ROOM
    while room < max_new_tokens:
        room *= 2
    return bucket + room


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
    planned_graphs: int = 0          # the most decode graphs the call could compile
    recompile_limit: LimitFit | None = None   # what was done to torch's limit (None: nothing)
    eager_calls: int = 0             # decode calls torch ran uncompiled (after a limit hit)
    full_layers: int = 0             # sliding-window cache layers given full length
    forecast_kernels: int = 0        # eager kernels native Neuron would compile (a CPU forecast)
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
    def graphs(self) -> int:
        """Compiles during the call (first compiles and recompiles)."""
        return graphs(self.events)

    @property
    def compile_s(self) -> float:
        return compile_seconds(self.events)

    @property
    def cache_lengths(self) -> list[int]:
        return sorted({t.cache_len for t in self.timings})

    def __str__(self) -> str:
        shape = repr(self.buckets) if self.buckets is not None else "no buckets"
        return (f"{_plural(len(self.texts), 'prompt')} in {_plural(len(self.timings), 'batch')} "
                f"of {self.batch_size} ({shape}; cache lengths {self.cache_lengths}) on "
                f"{self.device}, backend {self.backend or 'none (compile=False)'}: "
                f"{_plural(self.graphs, 'compile')} "
                f"({self.compile_s:.2f} s), {self.new_tokens} new tokens in {self.wall_s:.2f} s "
                f"= {self.tokens_per_s:.1f} tokens/s, padding waste {self.padding_waste:.0%}"
                + (f"; {self.recompile_limit}" if self.recompile_limit is not None
                   and self.recompile_limit.limit > self.recompile_limit.limit_before else "")
                + (f"; {self.eager_calls} decode calls ran EAGER (recompile limit)"
                   if self.eager_calls else "")
                + (f"; forecast: {self.forecast_kernels} eager kernels on Neuron"
                   if self.forecast_kernels else ""))


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}" if count == 1 else f"{count} {noun}{'es' if noun.endswith('ch') else 's'}"


class _FirstTokenClock:
    """Logits processor that notes when the first new token's logits exist (end of prefill).

    On any device but CPU the logits may not be computed yet (CUDA is asynchronous, Neuron
    lazy), so it reads one value back first, which waits for them."""

    def __init__(self) -> None:
        self.at: float | None = None

    def __call__(self, input_ids, scores):
        if self.at is None:
            if scores.device.type != "cpu":
                float(scores[0, 0])  # forces the prefill to finish on an async or lazy device
            self.at = time.perf_counter()
        return scores


# --------------------------------------------------------------------------- input checks

def _check_prompts(prompts: Any) -> list[str]:
    if isinstance(prompts, str):
        prompts = [prompts]
    elif not isinstance(prompts, (list, tuple)):
        raise TypeError(f"prompts must be a str or a list of str, got {type(prompts).__name__}; "
                        "pass text, not token ids or tensors (generate tokenizes it)")
    if not prompts:
        raise ValueError("prompts is empty: pass at least one prompt")
    for i, p in enumerate(prompts):
        if not isinstance(p, str):
            raise TypeError(f"prompt {i} is a {type(p).__name__} ({p!r:.40}), not a str; "
                            "pass text, not token ids or tensors (generate tokenizes it)")
        if not p:
            raise ValueError(f"prompt {i} is an empty string: nothing to continue; drop it or "
                             "give it some text")
    return list(prompts)


def _positive(value: Any, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value <= 0:
        raise ValueError(f"{name} must be a positive int, got {value!r}")
    return value


def _check_recorder(recorder: Any) -> None:
    """None or a :class:`~neuronkit.CompileRecorder`, else a clear error."""
    from neuronkit.recorder.recorder import CompileRecorder

    if recorder is None or isinstance(recorder, CompileRecorder):
        return
    hint = (f"; to write the events to {recorder!r}, pass "
            f"recorder=nk.CompileRecorder(log_path={recorder!r})"
            if isinstance(recorder, (str, os.PathLike)) else "")
    raise TypeError(f"recorder must be a neuronkit CompileRecorder or None (one is made for the "
                    f"call), got a {type(recorder).__name__}: {recorder!r:.60}{hint}. E.g. "
                    "`with nk.CompileRecorder() as rec: nk.generate(..., recorder=rec)`")


def _resolve_buckets(buckets: Any, lengths: list[int]) -> Buckets | None:
    if buckets is None:
        return None
    if isinstance(buckets, str):
        if buckets != "auto":
            raise ValueError(f"buckets must be None, 'auto', a list of ints or a Buckets, "
                             f"got {buckets!r}")
        return plan_buckets(lengths)
    return Buckets(buckets)


def _eos_ids(model, tokenizer, kwargs: dict) -> set[int]:
    eos = kwargs.get("eos_token_id")
    if eos is None:
        eos = getattr(model.generation_config, "eos_token_id", None)
    if eos is None:
        eos = tokenizer.eos_token_id
    if eos is None:
        return set()
    return {int(e) for e in (eos if isinstance(eos, (list, tuple)) else [eos])}


# --------------------------------------------------------------------------- compile settings

def _compile_kwargs(model, compile: bool, backend: Any, kwargs: dict) -> tuple[dict, str | None]:
    """generate() keywords that switch compile on or off, and the backend name it will use."""
    if not compile:
        return {"disable_compile": True}, None
    if "compile_config" in kwargs:  # the caller's own config wins
        cc = kwargs.pop("compile_config")
        name = cc.backend if isinstance(cc.backend, str) else getattr(cc.backend, "__name__", "?")
        return {"compile_config": cc}, name
    from transformers import CompileConfig

    kind = model.device.type
    if kind == "neuron" and backend is None:
        return {}, "neuron"     # transformers' default there: backend="neuron", dynamic=False
    if backend is None:
        from neuronkit.setup.device import cpu_backend

        backend = cpu_backend() if kind == "cpu" else "inductor"
    elif isinstance(backend, str):
        from neuronkit.setup.device import cpu_backend

        backend = cpu_backend(backend)  # validates the name
    cc = CompileConfig(backend=backend, mode="default", dynamic=False)
    cc._compile_all_devices = True  # type: ignore[assignment]  # else only cuda/xpu/neuron/tpu
    name = backend if isinstance(backend, str) else getattr(backend, "__name__", "custom")
    return {"compile_config": cc}, name


# --------------------------------------------------------------------------- generate

def _cache_len(bucket: int, max_new_tokens: int, max_pos: int | None) -> int:
    """:func:`cache_length`, capped at the model's positions (an error if they cannot fit)."""
    cache_len = cache_length(bucket, max_new_tokens)
    if max_pos is not None and cache_len > max_pos:
        if bucket + max_new_tokens > max_pos:
            raise ValueError(f"bucket {bucket} + max_new_tokens {max_new_tokens} exceeds the "
                             f"model's {max_pos} positions; use smaller buckets, truncate, or "
                             "fewer new tokens")
        cache_len = max_pos
    return cache_len


def _plan_batches(lengths: list[int], buckets: Buckets | None, batch_size: int):
    """[(bucket, [prompt indices])]: grouped by bucket (ascending), in arrival order within."""
    if buckets is None:
        chunks = [list(range(i, min(i + batch_size, len(lengths))))
                  for i in range(0, len(lengths), batch_size)]
        return [(max(lengths[i] for i in chunk), chunk) for chunk in chunks]
    groups: dict[int, list[int]] = {}
    for i, n in enumerate(lengths):
        groups.setdefault(buckets.fit(n), []).append(i)
    return [(b, idx[i:i + batch_size]) for b, idx in sorted(groups.items())
            for i in range(0, len(idx), batch_size)]


def _left_padded(rows: list[list[int]], width: int, pad_id: int):
    """(input_ids, attention_mask) CPU tensors of shape (len(rows), width), padded on the left."""
    import torch

    input_ids = torch.full((len(rows), width), pad_id, dtype=torch.long)
    mask = torch.zeros((len(rows), width), dtype=torch.long)
    for r, row in enumerate(rows):
        input_ids[r, width - len(row):] = torch.tensor(row, dtype=torch.long)
        mask[r, width - len(row):] = 1
    return input_ids, mask


def generate(model, tokenizer, prompts: str | list[str], max_new_tokens: int = 32,
             buckets: Buckets | list[int] | str | None = None, batch_size: int | None = None,
             recorder=None, *, compile: bool = True, backend: Any = None,
             truncate: str | None = None, fit_recompile_limit: bool = True,
             forecast_kernels: bool = False, on_batch: Callable[[BatchProgress], Any] | None = None,
             stop: threading.Event | None = None, **generate_kwargs) -> GenerationResult:
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
    limit hit runs the rest eager and each such batch is recorded as an ``eager_fallback`` event.
    ``forecast_kernels=True`` counts the eager-op kernels native Neuron would compile (the ops of
    the model's uncompiled forward: the prefill) and records them per batch as a ``kernels`` event
    marked ``forecast`` (``result.forecast_kernels``): a forecast counted here, not a measurement.
    ``on_batch(progress)`` runs after every batch (:class:`~neuronkit.workloads.progress.BatchProgress`:
    done / total, an ETA); once ``stop`` (a ``threading.Event``) is set the call ends before the
    next batch: ``result.stopped``, prompts not reached keep ``""`` and ``None``. Other keywords
    go to ``model.generate`` (e.g. ``do_sample``, ``eos_token_id``).
    """
    import torch
    from transformers import LogitsProcessorList

    from neuronkit.sources.kernel_forecast import KernelForecast, checkpoint, counting

    prompts = _check_prompts(prompts)
    max_new_tokens = _positive(max_new_tokens, "max_new_tokens")
    _check_recorder(recorder)
    if truncate not in (None, "left"):
        raise ValueError(f"truncate must be None or 'left', got {truncate!r}")
    clash = sorted(k for k in MANAGED_KWARGS if k in generate_kwargs)
    if clash:
        raise ValueError(f"generate() sets {clash} itself (static cache per bucket, one output per "
                         "prompt); use buckets=, max_new_tokens= and compile=False instead")
    batch_size = _positive(batch_size if batch_size is not None
                           else min(len(prompts), DEFAULT_BATCH_SIZE), "batch_size")
    pad_id = generate_kwargs.pop("pad_token_id", None)
    if pad_id is None:
        pad_id = pad_token_id(tokenizer, warn=True)
    ids = [list(x) for x in tokenizer(prompts, add_special_tokens=True)["input_ids"]]
    for i, x in enumerate(ids):
        if not x:
            raise ValueError(f"prompt {i} ({prompts[i]!r:.40}) has no tokens; give it some text")
    buckets = _resolve_buckets(buckets, [len(x) for x in ids])
    if buckets is not None:
        for i, x in enumerate(ids):
            if len(x) > buckets.max:
                if truncate != "left":
                    raise ValueError(f"prompt {i} has {len(x)} tokens, longer than the largest "
                                     f"bucket of {buckets!r}; add a bucket >= {len(x)}, or pass "
                                     f"truncate='left' to keep its last {buckets.max} tokens")
                ids[i] = x[-buckets.max:]
    lengths = [len(x) for x in ids]
    max_pos = getattr(model.config.get_text_config(decoder=True), "max_position_embeddings", None)

    logits_processor = LogitsProcessorList(generate_kwargs.pop("logits_processor", None) or [])
    compile_kw, backend_name = _compile_kwargs(model, compile, backend, generate_kwargs)
    cache_kw = "cache" if "cache" in inspect.signature(model.forward).parameters \
        else "past_key_values"
    eos = _eos_ids(model, tokenizer, generate_kwargs)
    device = str(model.device)
    batches = [(bucket, chunk, _cache_len(bucket, max_new_tokens, max_pos))
               for bucket, chunk in _plan_batches(lengths, buckets, batch_size)]
    planned = len({(bucket, cache_len) for bucket, _, cache_len in batches}) if compile else 0
    if compile and not fit_recompile_limit:
        warn_if_no_room(model, planned)

    if recorder is None:
        from neuronkit.recorder.recorder import CompileRecorder

        recorder = CompileRecorder(device=device, backend=backend_name, context="generate")
    rec = recorder
    started_here = not rec.active
    if started_here:
        rec.start()
    first_event = len(rec.events)
    texts: list[str] = [""] * len(prompts)
    outputs: list[Any] = [None] * len(prompts)
    timings: list[BatchTiming] = []
    positions = real_positions = 0
    t_start = time.perf_counter()
    fit: LimitFit | None = None
    eager_calls = full_layers = 0
    forecast = KernelForecast(rec, within=model) if forecast_kernels else None  # forward's ops
    stopped = False
    try:
        with contextlib.ExitStack() as scope:
            if planned:
                LEDGER.begin(model)
            if planned and fit_recompile_limit:
                fit = scope.enter_context(fitted_limit(model, planned))
                scope.enter_context(rec.annotate(recompile_limit=fit.to_dict()))
            for n, (bucket, chunk, cache_len) in enumerate(batches):
                if stop is not None and stop.is_set():
                    stopped = True
                    break
                rows = chunk + [chunk[0]] * (batch_size - len(chunk))  # dummy rows: dropped
                input_ids, mask = _left_padded([ids[i] for i in rows], bucket, pad_id)
                cache, full_layers = bounded_static_cache(model, cache_len,
                                                         refuse_unbounded=compile)
                clock = _FirstTokenClock()
                seen = len(rec.events)
                processors = LogitsProcessorList([clock, *logits_processor])
                padded = "bucket" if buckets is not None else "length"  # no buckets: its own
                label = f"generate batch {n}: {padded} {bucket}, cache {cache_len}"
                outer = rec.current_context  # keep a caller's label (a sweep step, a training step)
                label = f"{outer} · {label}" if outer and outer != "generate" else label
                with rec.context(label), counting(forecast):
                    t0 = time.perf_counter()
                    out = model.generate(input_ids=input_ids, attention_mask=mask,
                                         max_new_tokens=max_new_tokens, pad_token_id=pad_id,
                                         logits_processor=processors, **{cache_kw: cache},
                                         **compile_kw, **generate_kwargs)
                    t1 = time.perf_counter()
                out = out.sequences if hasattr(out, "sequences") else out
                out = out.cpu()
                new_total = 0
                for r, i in enumerate(chunk):
                    new = out[r, bucket:].tolist()
                    cut = next((k + 1 for k, t in enumerate(new) if t in eos), len(new))
                    new = new[:cut]
                    new_total += len(new)
                    outputs[i] = torch.tensor(ids[i] + new, dtype=torch.long)
                    texts[i] = tokenizer.decode(new, skip_special_tokens=True)
                first = clock.at if clock.at is not None else t1
                timings.append(BatchTiming(bucket=bucket, cache_len=cache_len, rows=len(rows),
                                           real_rows=len(chunk), prefill_s=first - t0,
                                           decode_s=t1 - first, new_tokens=new_total,
                                           compiles=len(rec.events) - seen,
                                           compile_s=compile_seconds(rec.events[seen:])))
                if planned:
                    with rec.context(label):
                        eager_calls += record_eager_batch(
                            rec, model, seen, (len(rows), bucket, cache_len),
                            steps=out.shape[1] - bucket - 1, backend=backend_name,
                            started_at=time.time() - (time.perf_counter() - t0))
                with rec.context(label):
                    rec.safe_point()  # on Neuron: NEFF build times, this batch's eager kernels
                    checkpoint(forecast)  # forecast_kernels=True: this batch's, as one event
                positions += len(rows) * bucket
                real_positions += sum(lengths[i] for i in chunk)
                if on_batch is not None:
                    left = [(b, c) for b, _, c in batches[n + 1:]]
                    on_batch(BatchProgress(n + 1, len(batches), timings[-1],
                                           new_shapes(timings, left), eta_s(timings, left)))
    finally:
        if started_here:
            rec.stop()
    wall = time.perf_counter() - t_start
    new_tokens = sum(t.new_tokens for t in timings)
    return GenerationResult(texts=texts, output_ids=outputs, timings=timings,
                            tokens_per_s=new_tokens / wall if wall > 0 else 0.0,
                            padding_waste=1.0 - real_positions / positions if positions else 0.0,
                            events=list(rec.events[first_event:]), buckets=buckets, wall_s=wall,
                            device=device, backend=backend_name, batch_size=batch_size,
                            new_tokens=new_tokens, planned_graphs=planned, recompile_limit=fit,
                            eager_calls=eager_calls, full_layers=full_layers,
                            forecast_kernels=forecast.kernels if forecast else 0,
                            stopped=stopped, batches_done=len(timings), batches=len(batches))
