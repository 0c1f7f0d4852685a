"""Training with fixed shapes: the compile callback, and the names of its companions.

On Neuron, Trainer compiles with ``dynamic=False``: every distinct batch shape is its own graph and
each one is a neuronx-cc compile of minutes. Elsewhere torch's automatic dynamic shapes hide that
(a changing dim turns symbolic after the second shape), so these helpers compile the way Neuron
does on every device and the recompiles a Trainium run would pay show up on a laptop.

    args = nk.fixed_shape_args("out", max_steps=20, per_device_train_batch_size=8)  # trainer_args.py
    collator = nk.FixedLengthCollator(tokenizer, max_length=128)                    # collate.py
    trainer = Trainer(model, args, train_dataset=data, data_collator=collator,
                      callbacks=[nk.CompileEventsCallback()])

The dataset checks the callback runs at the start of training: ``dataset_shapes.py``.
"""
from __future__ import annotations

import os
import time
import warnings
from collections.abc import Mapping
from typing import Any

import torch
from transformers import TrainerCallback

from neuronkit.events.event import GRAPH_KINDS
from neuronkit.events.facts import graphs, total_seconds
from neuronkit.log.compile_log import CompileLog
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.safe import terminal_safe
from neuronkit.setup.process import default_rank
from neuronkit.sources.torch_text import changed_dim, is_mode_change
from neuronkit.workloads.dataset_shapes import check_static_shapes
from neuronkit.workloads.trainer_args import StaticShapeWarning, compile_note, run_dynamic

__all__ = ["CompileEventsCallback", "RecompileWarning", "late_compile_message"]


class RecompileWarning(UserWarning):
    """A graph was compiled after the first training steps: the run keeps changing shapes."""


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
        self._context_before: str | None = None  # the recorder's label before training

    # the numbers added to each log line
    @property
    def graphs(self) -> int:
        return graphs(self.events)

    @property
    def compile_s(self) -> float:
        """Compile seconds so far: Dynamo's, plus on Neuron the NEFF builds resolved so far."""
        return total_seconds(self.events)

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
        self._context_before = self.recorder.current_context  # restored when training ends
        self.recorder.set_context(f"step {state.global_step + 1}")
        self._unsubscribe = self.recorder.subscribe(self._seen)
        collate = getattr(getattr(train_dataloader, "base_dataloader", train_dataloader),
                          "collate_fn", None)          # the Trainer's collator, before wrapping
        if args.torch_compile:
            self._watch_batches(train_dataloader)
        check_static_shapes(args, getattr(train_dataloader, "dataset", None),
                            getattr(eval_dataloader, "dataset", None), data_collator=collate)
        dynamic = run_dynamic(args)
        if args.torch_compile and dynamic is not False:
            warnings.warn(compile_note(args.device.type, args.torch_compile_backend, dynamic),
                          StaticShapeWarning, stacklevel=2)

    def on_step_begin(self, args, state, control, **kwargs):
        self._step = state.global_step + 1
        if self.recorder is not None:
            self.recorder.set_context(f"step {self._step}")

    def on_step_end(self, args, state, control, **kwargs):
        self._record_eager(args.gradient_accumulation_steps)
        self._safe_point(wait=False)  # on Neuron: a synchronize only if this step compiled

    def on_epoch_end(self, args, state, control, **kwargs):
        self._safe_point()

    def on_evaluate(self, args, state, control, **kwargs):
        self._safe_point()

    def _safe_point(self, wait: bool = True) -> None:
        """NEFF build times and eager kernels (on Neuron), resolved where the Trainer waits for
        the device anyway (``wait``: a logging step read the loss, an epoch or evaluation
        ended); at a step end only when a build is pending: steady steps never synchronize."""
        if self.recorder is not None and self.recorder.active:
            self.recorder.safe_point(wait=wait)

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
        self._safe_point()  # the Trainer has just read the loss: the device is idle
        numbers = {"compile_graphs": self.graphs, "compile_s": round(self.compile_s, 3)}
        if logs is not None:
            logs.update(numbers)
        if state.log_history and state.log_history[-1].get("step") == state.global_step:
            state.log_history[-1].update(numbers)

    def on_train_end(self, args, state, control, **kwargs):
        self.close()
        if not self.quiet and state.is_world_process_zero:
            print(terminal_safe(self.summary()))

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
        if self._context_before is not None and self.recorder is not None:
            self.recorder.set_context(self._context_before)  # later compiles are not "step N"
            self._context_before = None
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
