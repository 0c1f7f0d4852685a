"""Training with fixed shapes: Trainer arguments, static-shape checks, a compile callback.

On Neuron, Trainer compiles with ``dynamic=False``: every distinct batch shape is its own graph and
each one is a neuronx-cc compile of minutes. Elsewhere torch's automatic dynamic shapes hide that
(a changing dim turns symbolic after the second shape), so these helpers compile the way Neuron
does on every device and the recompiles a Trainium run would pay show up on a laptop.

    args = nk.fixed_shape_args("out", max_steps=20, per_device_train_batch_size=8)
    collator = nk.FixedLengthCollator(tokenizer, max_length=128)     # collate.py
    trainer = Trainer(model, args, train_dataset=data, data_collator=collator,
                      callbacks=[nk.CompileEventsCallback()])
"""
from __future__ import annotations

import copy
import os
import random
import time
import warnings
from collections.abc import Mapping
from typing import Any

import numpy as np
import torch
from transformers import TrainerCallback, TrainingArguments

from neuronkit.sources.torch_text import changed_dim, is_mode_change
from neuronkit.setup.device import detect
from neuronkit.events.event import GRAPH_KINDS
from neuronkit.log.compile_log import CompileLog
from neuronkit.events.facts import compile_seconds, graphs
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.setup.process import default_rank
from neuronkit.workloads.shape_audit import (batch_signature, describe_lengths, example_lengths,
                                             padding_fix, pads_to_buckets, unpadded_examples_message)

__all__ = ["CompileEventsCallback", "RecompileWarning",
           "StaticShapeWarning", "check_static_shapes", "compiles_dynamic", "fixed_shape_args",
           "late_compile_message"]

# accelerate's TorchDynamoPlugin reads this when Trainer builds its Accelerator; Trainer itself only
# passes dynamic=False for the "neuron" backend and leaves it to this variable everywhere else.
DYNAMIC_ENV = "ACCELERATE_DYNAMO_USE_DYNAMIC"


class StaticShapeWarning(UserWarning):
    """A setting or a dataset that will make the run compile more graphs than it needs."""


class RecompileWarning(UserWarning):
    """A graph was compiled after the first training steps: the run keeps changing shapes."""


# -- TrainingArguments -------------------------------------------------------------------------
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


BATCH_SIZES = ("per_device_train_batch_size", "per_device_eval_batch_size")


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


def _run_dynamic(args: TrainingArguments) -> bool | None:
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


def check_static_shapes(args: TrainingArguments, train_dataset: Any = None,
                        eval_dataset: Any = None, *, warn: bool = True,
                        data_collator: Any = None) -> list[str]:
    """What in the datasets would compile more graphs than one, each with its fix (warned too):
    a partial last batch, and tokenized examples of varying lengths that ``data_collator`` (or,
    when None, Trainer's default) does not pad to one length."""
    found = _partial_batch_findings(args, train_dataset, eval_dataset)
    for name, dataset, batch in (("train", train_dataset, args.per_device_train_batch_size),
                                 ("eval", eval_dataset, args.per_device_eval_batch_size)):
        message = padding_finding(dataset, data_collator, batch)
        if message:
            found.append(f"{name}: {message}")
    if warn:
        for message in found:
            warnings.warn(message, StaticShapeWarning, stacklevel=2)
    return found


def _partial_batch_findings(args: TrainingArguments, train_dataset: Any,
                            eval_dataset: Any) -> list[str]:
    """A partial last batch has its own shape, so one more graph (both datasets)."""
    found: list[str] = []
    if args.dataloader_drop_last:
        return found
    world = max(1, int(getattr(args, "world_size", 1) or 1))
    even = getattr(args.accelerator_config, "even_batches", True)
    if world > 1 and even:
        return found      # accelerate loops back to the first examples to fill the last batch
    for name, dataset, batch in (("train", train_dataset, args.per_device_train_batch_size),
                                 ("eval", eval_dataset, args.per_device_eval_batch_size)):
        if dataset is None or not hasattr(dataset, "__len__"):
            continue
        n = len(dataset)
        per_rank = -(-n // world)
        rest = per_rank % batch
        if rest and per_rank > batch:
            found.append(
                f"{name}: {n} examples / batch {batch} leaves a last batch of {rest} -> one extra "
                f"graph (batch dim 0: {batch} -> {rest}), on Neuron one more compile. Set "
                f"dataloader_drop_last=True (drops {rest} examples per epoch) or use "
                f"{per_rank - rest} or {per_rank - rest + batch} examples.")
    return found


def padding_finding(dataset: Any, collator: Any, batch_size: int) -> str | None:
    """None when every batch of ``dataset`` will have one sequence length: its examples are of
    one length, or ``collator`` pads the shortest and the longest alike; else what and the fix."""
    lengths = example_lengths(dataset)
    if not lengths or len(set(lengths)) == 1:
        return None                                    # not tokenized, or padded already
    if collator is None:
        return unpadded_examples_message(lengths, note=(
            " No data_collator was given to check: Trainer's default pads each batch to its "
            "longest, or fails on mixed lengths."))
    shortest, longest = lengths.index(min(lengths)), lengths.index(max(lengths))
    inner = getattr(collator, "data_collator", collator)    # inside Trainer's column remover
    tokenizer = getattr(inner, "tokenizer", None)
    name = getattr(inner, "__name__", type(inner).__name__)
    try:
        shapes = _probe(collator, [dataset[shortest], dataset[longest]], batch_size)
    except Exception as exc:   # the collator's own error, to quote
        error = (str(exc).splitlines() or [""])[0][:160].rstrip(".")
        return (f"input_ids: the examples have {describe_lengths(lengths)}, and the data "
                f"collator ({name}) fails on a batch of the shortest and the longest: "
                f"{type(exc).__name__}: {error}. {padding_fix(lengths, tokenizer)}")
    if len({tuple(sorted(s.items(), key=str)) for s in shapes}) == 1 or pads_to_buckets(collator):
        return None                                    # one length (or buckets, on purpose)
    seen = sorted({s["input_ids"][-1] for s in shapes if s.get("input_ids")})
    return (f"input_ids: the examples have {describe_lengths(lengths)}: tokenized without "
            f'padding="max_length", and the data collator ({name}) pads each batch to its own '
            f"longest (batches of {' or '.join(map(str, seen))} tokens from the shortest and the "
            f"longest example): one graph per batch length, on Neuron one compile each. "
            f"{padding_fix(lengths, tokenizer)}")


def _probe(collator: Any, pair: list[Any], batch_size: int) -> list[dict[Any, tuple[int, ...]]]:
    """Shape signatures of the batches ``collator`` builds from the shortest example alone, the
    longest alone, and the two mixed; global RNGs and the collator's own generator untouched."""
    short, long = pair
    groups = [[short] * batch_size, [long] * batch_size]
    if batch_size > 1:
        groups.append([short] + [long] * (batch_size - 1))
    probe = _probe_copy(collator)
    state = random.getstate(), np.random.get_state()
    try:
        with torch.random.fork_rng(devices=[]):
            batches = [probe([copy.deepcopy(x) for x in group]) for group in groups]
    finally:
        random.setstate(state[0])
        np.random.set_state(state[1])
    return [batch_signature(b) for b in batches]


def _probe_copy(collator: Any) -> Any:
    """A shallow copy of ``collator`` (and of the collator Trainer wraps) without its seeded
    generator, so probing it leaves the masks of the training batches as they were."""
    probe = copy.copy(collator)                       # a function comes back as it is
    inner = getattr(collator, "data_collator", None)
    if inner is not None:
        probe.data_collator = _probe_copy(inner)
    if getattr(probe, "generator", None) is not None:
        probe.generator = None
    return probe


# -- callback ----------------------------------------------------------------------------------
class CompileEventsCallback(TrainerCallback):
    """Records the run's compile events (context "step N"), adds ``compile_graphs`` and
    ``compile_s`` to the Trainer's logs, and warns the first time a graph is compiled after
    ``warn_after_step`` (a changing shape: the partial last batch, dynamic padding, evaluation).

    Pass a started :class:`neuronkit.CompileRecorder` to share it, or none and one is made (and
    started and stopped with training), writing to ``log_path`` when given. If ``train()``
    raises, ``on_train_end`` never runs: call :meth:`close` (the next ``train()`` also stops
    it), or pass the recorder of a ``with nk.CompileRecorder() as rec:`` block for full control.
    """

    def __init__(self, recorder: Any = None, *, log_path: str | os.PathLike[str] | None = None,
                 warn_after_step: int = 1, quiet: bool = False):
        if recorder is not None and log_path is not None:
            raise ValueError("pass either a recorder or a log_path, not both")
        if recorder is not None and not isinstance(recorder, CompileRecorder):
            hint = (f"; to write the events to {recorder!r}, pass log_path={recorder!r} instead"
                    if isinstance(recorder, (str, os.PathLike)) else "")
            raise TypeError(f"recorder must be a neuronkit CompileRecorder or None (one is made "
                            f"and started with training), got a {type(recorder).__name__}: "
                            f"{recorder!r:.60}{hint}")
        self.recorder = recorder
        self.log_path = log_path
        self.warn_after_step = warn_after_step
        self.quiet = quiet
        self.events: list[Any] = []
        self.late_warning: str | None = None
        self._owns = False
        self._unsubscribe = None
        self._step = 0
        self._hit: Any = None            # the last limit_hit event: later calls may run eager
        self._fed: list[tuple[int, ...]] = []   # input shapes of the batches built, not yet run
        self._collate: Any = None                # (loader, its own collate_fn) while watched

    # the numbers added to each log line
    @property
    def graphs(self) -> int:
        return graphs(self.events)

    @property
    def compile_s(self) -> float:
        return compile_seconds(self.events)

    def on_train_begin(self, args, state, control, train_dataloader=None, eval_dataloader=None,
                       **kwargs):
        self.close()                  # a previous train() that raised left its recorder running
        self._fed, self._hit = [], None
        if self.recorder is None:
            self.recorder = CompileRecorder(log_path=self.log_path, rank=default_rank(),
                                            backend=args.torch_compile_backend,
                                            device=str(args.device))
        if not self.recorder.active:
            self.recorder.start()
            self._owns = True
        self._step = state.global_step
        self.recorder.set_context(f"step {state.global_step + 1}")
        self._unsubscribe = self.recorder.subscribe(self._seen)
        collate = getattr(getattr(train_dataloader, "base_dataloader", train_dataloader),
                          "collate_fn", None)          # the Trainer's collator, before wrapping
        if args.torch_compile:
            self._watch_batches(train_dataloader)
        check_static_shapes(args, getattr(train_dataloader, "dataset", None),
                            getattr(eval_dataloader, "dataset", None), data_collator=collate)
        dynamic = _run_dynamic(args)
        if args.torch_compile and dynamic is not False:
            warnings.warn(compile_note(args.device.type, args.torch_compile_backend, dynamic),
                          StaticShapeWarning, stacklevel=2)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step = state.global_step + 1
        if self.recorder is not None:
            self.recorder.set_context(f"step {self._step}")

    def on_step_end(self, args, state, control, **kwargs):
        self._record_eager(args.gradient_accumulation_steps)
        if self.recorder is not None and self.recorder.active:
            self.recorder.safe_point()  # on Neuron: NEFF build times, this step's eager kernels

    def _watch_batches(self, loader: Any) -> None:
        """Note the input shape of every batch the Trainer's loader builds (its ``collate_fn``
        wrapped; restored by :meth:`close`): the shapes this run fed, without touching the model
        (a hook on it would change what torch compiles)."""
        loader = getattr(loader, "base_dataloader", loader)  # accelerate's wrapper iterates it
        collate = getattr(loader, "collate_fn", None)
        workers: int = getattr(loader, "num_workers", 0)
        if collate is None or self._collate is not None or workers:
            return  # worker processes build batches elsewhere (and may not pickle a closure)

        def noting(features: Any) -> Any:
            batch = collate(features)
            ids = batch.get("input_ids") if isinstance(batch, Mapping) else None
            if isinstance(ids, torch.Tensor):
                self._fed.append(tuple(ids.shape))
            return batch
        self._collate = (loader, collate)
        loader.collate_fn = noting

    def _record_eager(self, batches: int | None = None) -> None:
        """After a limit hit, each batch whose shape the hit function never compiled ran eager
        (torch records nothing for it): one ``eager_fallback`` event per such shape and step.
        ``batches``: how many of the noted batches the step used (the loader builds one ahead)."""
        take = len(self._fed) if batches is None else min(batches, len(self._fed))
        fed, self._fed = self._fed[:take], self._fed[take:]
        hit = self._hit
        if hit is None or self.recorder is None:
            return
        compiled = {tuple(e.input_shapes.get("input_ids") or ()) for e in self.events
                    if e.kind in GRAPH_KINDS and (e.function, e.location) == (hit.function,
                                                                             hit.location)}
        eager: dict[tuple[int, ...], int] = {}
        for shape in fed:
            if shape not in compiled:
                eager[shape] = eager.get(shape, 0) + 1
        for shape, calls in eager.items():
            self.recorder.record(
                kind="eager_fallback", function=hit.function, location=hit.location,
                backend=hit.backend, started_at=time.time(), calls=calls,
                input_shapes={"input_ids": list(shape)},
                changed=f"input_ids {list(shape)}: no graph",
                reasons=[f"{calls} forward calls ran eager after {hit.function} hit "
                         "torch._dynamo.config.recompile_limit"])

    def on_log(self, args, state, control, logs=None, **kwargs):
        numbers = {"compile_graphs": self.graphs, "compile_s": round(self.compile_s, 3)}
        if logs is not None:
            logs.update(numbers)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(numbers)

    def on_train_end(self, args, state, control, **kwargs):
        self.close()
        if not self.quiet and state.is_world_process_zero:
            print(self.summary())

    def close(self) -> None:
        """Stop listening, and stop the recorder if this callback started it (safe to repeat)."""
        self._record_eager()
        if self._collate is not None:
            loader, collate = self._collate
            loader.collate_fn = collate
            self._collate = None
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self._owns and self.recorder is not None:
            self.recorder.stop()
        self._owns = False

    def summary(self) -> str:
        per_fn = CompileLog(self.events).graph_counts()  # "forward (file.py:12)" where names repeat
        detail = ", ".join(f"{fn} {n}" for fn, n in per_fn.items()) or "none"
        return (f"neuronkit: {self.graphs} graph(s) compiled during training ({detail}), "
                f"{self.compile_s:.2f} s compiling" +
                (f"; {self.late_warning}" if self.late_warning else ""))

    def _seen(self, event: Any) -> None:
        self.events.append(event)
        if event.kind == "limit_hit":
            self._hit = event
        if (self.late_warning is None and self._step > self.warn_after_step
                and event.kind in ("recompile", "limit_hit")):
            self.late_warning = late_compile_message(event, self._step)
            warnings.warn(self.late_warning, RecompileWarning, stacklevel=1)


def late_compile_message(event: Any, step: int) -> str:
    """What a compile at ``step`` means and how to stop it, from the event's changed shape."""
    what = event.changed or (event.reasons[0] if event.reasons else "no reason recorded")
    dim = changed_dim(what)
    if dim == 0:
        fix = ("the batch size changed: a partial last batch (keep dataloader_drop_last=True) "
               "or an eval batch size unlike the training one")
    elif dim is not None:
        fix = ("the sequence length changed: pad every batch to one length "
               "(neuronkit.FixedLengthCollator(tokenizer, max_length=N)) or to a few buckets")
    elif is_mode_change(event.reasons):
        fix = "training and evaluation run different graphs; that costs one graph each, once"
    else:
        fix = "see the event's reasons (neuronkit report LOG)"
    verb = "hit the recompile limit" if event.kind == "limit_hit" else "compiled a new graph"
    return (f"step {step}: {event.function} {verb} after the first steps had compiled theirs "
            f"({what}); {fix}. On Neuron every new graph is a full compile.")
