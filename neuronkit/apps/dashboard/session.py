"""The dashboard's session: the choices (model, device, dtype, backend, prompt, padding, sweep),
the model and tokenizer loaded, the recorder whose log it shows, and load / generate / sweep.

A live session loads a model and records its compiles; a replay holds a saved log and no model
(no torch needed); a followed run (``mode`` "follow") holds the log a follower reads as a job
writes it, and no model either. The session says in the status line how its work goes, counts progress on
the worker, and stops between batches when the worker's Stop is pressed.
"""
from __future__ import annotations

import os
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable

from traitlets import Bool, Enum, HasTraits, Instance, Int, List, Unicode

from neuronkit.advice.excerpts import cut_long
from neuronkit.apps.dashboard.inputs import (
    CPU_BACKENDS,
    DEFAULT_BOUNDARIES,
    DEFAULT_PROMPT,
    DTYPES,
    FOLLOW_REASON,
    NO_COMPILE,
    PADDINGS,
    REPLAY_REASON,
    SWEEP_ORDERS,
    parse_boundaries,
    sweep_lengths,
)
from neuronkit.apps.dashboard.status import StatusLine
from neuronkit.apps.dashboard.worker import Worker
from neuronkit.events.event import GRAPH_KINDS
from neuronkit.examples.text import text_of_tokens
from neuronkit.log.compile_log import CompileLog
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.setup.device import cpu_backend, detect
from neuronkit.setup.models import load_model, load_tokenizer
from neuronkit.setup.placement import check_placement
from neuronkit.setup.tiny import tiny_model
from neuronkit.views.report_facts import header_field, readable_log
from neuronkit.workloads.generate_plan import cache_length
from neuronkit.workloads.generation import GenerationResult, generate
from neuronkit.workloads.progress import BatchProgress, eta_s
from neuronkit.workloads.shapes import Buckets, plan_buckets

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase

__all__ = ["Session"]


class Session(HasTraits):
    """Inputs and outputs of one session, and the model work behind Load, Generate and Sweep.

    ``worker``: its Stop and progress; ``status_line``: where it says how things go;
    ``on_run``: called after each generate() call (the log may have grown).
    """

    mode = Enum(("live", "replay", "follow"), default_value="live",
                help="live: a model here; replay: a saved log; follow: a run's logs as written")
    # inputs (the widget links its controls to these)
    model_path = Unicode("", help="folder or Hub name; empty: the embedded tiny model")
    device = Unicode("cpu")
    dtype = Enum(DTYPES, default_value="bfloat16")
    backend = Unicode("eager", help="compile backend, or 'none' for no compile")
    prompt = Unicode(DEFAULT_PROMPT)
    max_new_tokens = Int(16)
    padding = Enum(PADDINGS, default_value="none")
    boundaries = Unicode(DEFAULT_BOUNDARIES)
    sweep_count = Int(6)
    sweep_order = Enum(SWEEP_ORDERS, default_value="growing")
    export_path = Unicode("compile-log")
    # what the session knows
    device_options: List[str] = List()
    backend_options: List[str] = List()
    device_note = Unicode()
    source = Unicode(help="the model folder, or the replayed log file")
    loaded = Bool(False)
    placement = Unicode()
    placement_ok = Bool(False)
    generated_text = Unicode()
    run_summary = Unicode()
    prompt_lengths: List[int] = List(
        help="token lengths of the prompts sent so far (the planner's input)")
    recorder = Instance(CompileRecorder, allow_none=True,
                        help="records the live session's compiles (a new one: a new log)")

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 worker: Worker, status_line: StatusLine, on_run: Callable[[], None],
                 device: str | None = None, dtype: str | None = None, backend: str | None = None,
                 log: CompileLog | None = None, **traits: Any) -> None:
        super().__init__(**traits)
        self.model: PreTrainedModel | None = None
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self._worker, self._status, self._on_run = worker, status_line, on_run
        if log is not None and log.path is None:  # built in memory, not checked line by line
            log = readable_log(log, contents=True)  # what views can read of it; events unchanged
        self._log = log
        self._runs = 0          # generate() calls so far (labels, the sweep's seed)
        self._loaded_on = ""    # the device the model was loaded on
        self._cpu_backend = ""
        if log is not None:
            self._replay_choices(log)
        else:
            self._live_choices(device, dtype, backend)
            self.model_path = os.fspath(model_path) if model_path is not None else ""
            self.new_recorder()

    def _replay_choices(self, log: CompileLog) -> None:
        """A replay offers what the log was recorded with (no torch, no model)."""
        if self.mode == "live":
            self.mode = "replay"
        self.device_options = [cut_long(str(header_field(log, "device") or "unknown"))]  # else
        self.device = self.device_options[0]  # the events'; a 20 MB name by its start
        self.backend_options = [cut_long(str(header_field(log, "backend") or "unknown"))]
        self.backend = self.backend_options[0]
        self.device_note = (f"recorded on {self.device} with the {self.backend!r} backend; "
                            f"{self.no_model_reason}")
        self.source = self.source or str(log.path or "")

    def _live_choices(self, device: str | None, dtype: str | None, backend: str | None) -> None:
        """The devices found (Neuron first), the backends each offers, a dtype it supports."""
        report = detect()
        self._cpu_backend = cpu_backend()
        self.device_options = [report.device] + (["cpu"] if report.device != "cpu" else [])
        self.device = device or report.device
        if self.device not in self.device_options:
            self.device_options = [*self.device_options, self.device]
        if report.device == "neuron":
            self.device_note = f"{report.device_count} Neuron device(s); backend 'neuron'"
        else:
            self.device_note = f"no Neuron: {report.reason}"
        self.backend = report.compile_backend  # kept where the device offers it
        self._backends_for_device()
        if backend:
            self.backend = backend
            if backend not in self.backend_options:
                self.backend_options = [*self.backend_options, backend]
        self.observe(lambda _: self._backends_for_device(), "device")
        self.dtype = dtype or ("bfloat16" if report.bf16_supported else "float32")

    def _backends_for_device(self) -> None:
        """Backend choices for the selected device: 'neuron' on Neuron, the CPU/CUDA backends
        elsewhere (a Neuron host running on cpu compiles with eager, and says so)."""
        if self.device.split(":")[0] == "neuron":
            options = ["neuron", NO_COMPILE]
        else:
            options = [*CPU_BACKENDS, NO_COMPILE]
            if self._cpu_backend not in options:  # $NEURONKIT_CPU_BACKEND names another one
                options.insert(0, self._cpu_backend)
        keep = self.backend if self.backend in options else (
            "neuron" if options[0] == "neuron" else self._cpu_backend)
        self.backend_options = options
        self.backend = keep

    # -- the log ---------------------------------------------------------------------------
    @property
    def log(self) -> CompileLog:
        """The session's own events: the recorder's log (live) or the loaded file (replay)."""
        if self.recorder is not None:
            return self.recorder.log
        assert self._log is not None
        return self._log

    def new_recorder(self) -> None:
        """A new recorder, so a new log, for the device and backend chosen now."""
        old = self.recorder
        self.recorder = CompileRecorder(device=self.device, backend=self.backend,
                                        context="dashboard", quiet=True)
        if old is not None and old.active:
            old.stop()

    def _match_recorder(self) -> None:
        """A new recorder (and log) when the device or backend chosen is not the one recorded:
        the log's header and every event name the device and backend actually used."""
        if self.recorder is None or (self.recorder.device, self.recorder.backend) != (
                self.device, self.backend):
            self.new_recorder()

    @property
    def no_model_reason(self) -> str:
        """Why this session has no model ('' when live)."""
        return {"replay": REPLAY_REASON, "follow": FOLLOW_REASON}.get(self.mode, "")

    def need(self, what: str) -> None:
        if self.mode != "live":
            raise RuntimeError(f"{what} is not available in a {self.no_model_reason}")
        if self.model is None:
            raise RuntimeError(f"{what} needs a model: press Load first")

    # -- load, generate, sweep ---------------------------------------------------------------
    def load(self) -> None:
        """Load ``model_path`` (empty: the tiny model) on ``device``, then check placement."""
        if self.mode != "live":
            raise RuntimeError(f"Load is not available in a {self.no_model_reason}")
        path = self.model_path.strip() or None
        start = time.perf_counter()  # a failure below keeps the model already loaded
        model = load_model(path, device=self.device, dtype=self.dtype)
        tokenizer = load_tokenizer(path)
        report = check_placement(model, self.device)
        self.model, self.tokenizer, self._loaded_on = model, tokenizer, self.device
        self._match_recorder()
        self.source = path or str(tiny_model())
        self.placement, self.placement_ok = str(report), report.ok
        self.loaded = True
        params = sum(p.numel() for p in model.parameters())
        self._status.say(f"Loaded {Path(self.source).name} ({params:,} parameters, {self.dtype}) "
                         f"on {self.device} in {time.perf_counter() - start:.1f} s", "ok")

    def buckets(self) -> Buckets | None:
        """The Buckets the padding strategy asks for (None: each prompt keeps its length)."""
        if self.padding == "none":
            return None
        bounds = parse_boundaries(self.boundaries)
        return Buckets(bounds if self.padding == "buckets" else [bounds[-1]])

    def generate(self, prompt: str) -> GenerationResult:
        """Generate from ``prompt``; returns the GenerationResult."""
        self.need("Generate")
        result = self._run(prompt, self.buckets(), f"generate {self._runs + 1}",
                           on_batch=self._worker.on_batch)
        if result.stopped:  # nothing ran: the last text and summary still hold
            self._status.say("Stopped before generating: Stop was pressed", "info")
        else:
            self.generated_text = result.texts[0]
            self._status.say(f"Generated: {self.run_summary}", "ok")
        return result

    def plan_sweep(self) -> tuple[list[int], Buckets | None, list[tuple[int, int]]]:
        """The sweep's prompt lengths, its Buckets, and the (bucket, cache length) each prompt
        runs with (what the ETA goes by)."""
        buckets = self.buckets()
        longest = parse_boundaries(self.boundaries)[-1]
        lengths = sweep_lengths(self.sweep_count, longest, self.sweep_order, seed=self._runs)
        shapes = []
        for n in lengths:
            bucket = buckets.fit(n) if buckets is not None else n
            shapes.append((bucket, cache_length(bucket, self.max_new_tokens)))
        return lengths, buckets, shapes

    def sweep(self) -> list[GenerationResult]:
        """Send ``sweep_count`` prompts of growing (or random) lengths, one request at a time;
        progress and ETA after each, Stop between them."""
        self.need("Sweep")
        before = self._graphs()
        lengths, buckets, shapes = self.plan_sweep()
        results: list[GenerationResult] = []
        timings: list[Any] = []
        for i, n in enumerate(lengths, 1):
            if self._worker.stop_event.is_set():
                break
            self._status.say(f"Sweep {i}/{len(lengths)}: a prompt of about {n} tokens …", "busy")
            result = self._run(self.prompt_of_length(n), buckets, f"sweep {i}/{len(lengths)}")
            if result.stopped:  # Stop came before its batch: it did not run
                break
            results.append(result)
            self.generated_text = result.texts[0]
            timings += result.timings
            self._worker.count(i, len(lengths), eta_s(timings, shapes[i:]))
        if self._worker.stop_event.is_set() and len(results) < len(lengths):
            self._status.say(f"Stopped after {len(results)} of {len(lengths)} batches; what was "
                             "recorded stays in the log", "info")
        else:
            self._status.say(f"Sweep done: {len(lengths)} prompts ({self.sweep_order} lengths "
                             f"{min(lengths)}..{max(lengths)}), padding {self.padding}: "
                             f"{self._graphs() - before} new graph(s)", "ok")
        return results

    def _graphs(self) -> int:
        return sum(e.kind in GRAPH_KINDS for e in self.log.events)

    def prompt_of_length(self, n: int) -> str:
        """A prompt of about ``n`` tokens for the loaded tokenizer."""
        self.need("A sweep prompt")
        assert self.tokenizer is not None  # loaded with the model, which need() checked
        return text_of_tokens(self.tokenizer, n)

    def _run(self, prompt: str, buckets: Buckets | None, label: str,
             on_batch: Callable[[BatchProgress], Any] | None = None) -> GenerationResult:
        """One generate() call under the recorder; the prompt's length feeds the planner."""
        assert self.tokenizer is not None  # callers checked need() first
        if self._loaded_on and self.device != self._loaded_on:
            raise RuntimeError(f"the model is loaded on {self._loaded_on}, but the device chosen "
                               f"now is {self.device}: press Load to load it there, or choose "
                               f"{self._loaded_on} again")
        self._runs += 1
        length = len(self.tokenizer(prompt)["input_ids"])
        compile_ = self.backend != NO_COMPILE
        self._match_recorder()  # the backend may have been changed since Load
        assert self.recorder is not None  # _match_recorder made one
        with self.recorder.context(label):
            result = generate(self.model, self.tokenizer, [prompt],
                              max_new_tokens=self.max_new_tokens, buckets=buckets,
                              recorder=self.recorder, compile=compile_,
                              # on Neuron, transformers' own default (backend "neuron")
                              backend=self.backend if compile_ and not (
                                  self.backend == "neuron" and self.device.startswith("neuron"))
                              else None, on_batch=on_batch, stop=self._worker.stop_event)
        if not result.stopped:  # only a prompt that ran feeds the planner
            self.prompt_lengths = [*self.prompt_lengths, length]
        if self.recorder.active:  # (a recorder generate started, it stopped: a safe point too)
            self.recorder.safe_point()  # on Neuron: NEFF build times and eager kernels resolved
        self._on_run()
        if result.stopped and not result.batches_done:
            return result  # Stop came first: nothing ran, the last summary still holds
        self.run_summary = (f"{length} prompt tokens, {self.max_new_tokens} new, "
                            f"{result.wall_s:.2f} s, {result.throughput('.0f')}, "
                            f"padding waste {result.padding_waste:.0%}, "
                            f"{len(result.events)} compile(s)")
        return result

    # -- plan, reset, close ----------------------------------------------------------------
    def plan_buckets(self) -> list[int]:
        """Bucket boundaries planned from the prompt lengths seen so far (``plan_buckets``),
        set as the boundaries, with padding to buckets; returns them."""
        if not self.prompt_lengths:
            raise ValueError("no prompt lengths yet: Generate or Sweep first, then plan")
        planned = plan_buckets(self.prompt_lengths, max_buckets=4)
        self.boundaries = ",".join(str(b) for b in planned)
        self._status.say(f"Planned {planned!r} from {len(self.prompt_lengths)} prompt lengths "
                         "(compile cost vs padded tokens); padding set to buckets", "ok")
        self.padding = "buckets"
        return list(planned)

    def reset(self) -> None:
        """Forget every compiled graph in this process (torch.compiler.reset); a new log."""
        if self.mode != "live":
            raise RuntimeError(f"Reset is not available in a {self.no_model_reason}")
        import torch

        torch.compiler.reset()
        self.new_recorder()
        self.prompt_lengths = []

    def close(self) -> None:
        """Stop the recorder and drop the model."""
        if self.recorder is not None and self.recorder.active:
            self.recorder.stop()
        self.model = self.tokenizer = None
        self.loaded = False
