"""The recompile dashboard's state and actions, with no widget in sight.

``DashboardState`` holds everything the dashboard shows in traitlets (so a test or a notebook can
drive it without a browser) and does the work behind its buttons by calling neuronkit's public
functions: ``load_model`` / ``check_placement`` to load, ``generate`` under a ``CompileRecorder``
to run, ``diagnose`` to explain. ``widget.RecompileDashboard`` only draws it.

    state = DashboardState()            # live: the embedded tiny model by default
    state.load(); state.generate("Hello"); state.event_count
    state.start("sweep"); state.stop()  # in a worker thread; Stop ends it between batches
    state.keep_run(); state.open_uploads([("rank0.jsonl", data)]); state.show_run(name)
    state = DashboardState.replay("compile-log.jsonl")   # a saved log, no model needed
"""
from __future__ import annotations

import os
import threading
import time
import traceback
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterator
from weakref import WeakKeyDictionary

from traitlets import Bool, Dict, Enum, HasTraits, Int, List, Unicode

from neuronkit.advice.finding import Advice
from neuronkit.advice.diagnose import FunctionMemo, diagnose
from neuronkit.setup.device import cpu_backend, detect
from neuronkit.events.event import CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.examples.text import text_of_tokens
from neuronkit.workloads.generation import GenerationResult, generate
from neuronkit.setup.models import check_placement, load_model, load_tokenizer, tiny_model
from neuronkit.workloads.progress import BatchProgress, eta_s
from neuronkit.recorder.recorder import CompileRecorder
from neuronkit.workloads.shapes import Buckets, plan_buckets
from neuronkit.apps.dashboard.inputs import (CPU_BACKENDS, DEFAULT_BOUNDARIES, DEFAULT_PROMPT, DTYPES,
                                             NO_COMPILE, PADDINGS, REPLAY_REASON, SWEEP_ORDERS,
                                             describe_error, parse_boundaries, sweep_lengths)
from neuronkit.apps.dashboard.runs import SessionRuns
from neuronkit.log.open import open_log

if TYPE_CHECKING:  # pragma: no cover
    from transformers import PreTrainedModel, PreTrainedTokenizerBase


__all__ = ["DashboardState", "parse_boundaries", "sweep_lengths", "DTYPES",
           "PADDINGS", "SWEEP_ORDERS"]  # the inputs' helpers live in dashboard_inputs.py

class DashboardState(HasTraits, SessionRuns):
    """Inputs, outputs and status of one dashboard session; actions are methods."""

    mode = Enum(("live", "replay"), default_value="live")
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
    busy = Bool(False)
    status = Unicode()
    status_kind = Enum(("info", "busy", "ok", "error"), default_value="info")
    error = Unicode(help="'Type: message' of the last failed action, '' after a success")
    error_detail = Unicode(help="traceback of the last failed action")
    progress = Int(0)
    progress_max = Int(0)
    event_count = Int(0)
    graph_counts = Dict()
    advice: List[Advice] = List()
    generated_text = Unicode()
    run_summary = Unicode()
    prompt_lengths: List[int] = List(
        help="token lengths of the prompts sent so far (the planner's input)")
    eta = Unicode(help="batches done / planned and the time left, while a run goes on")
    stopping = Bool(False, help="Stop was pressed: the run ends after the current batch")
    run_names: List[str] = List(help="runs kept or uploaded, to show or compare")
    shown_run = Unicode("", help="the run the views show; '' is this session's own log")
    compiling: List[dict] = List(help="compiles in progress: function, shapes, started_at, phase")
    tick = Int(0, help="counts seconds while a compile is in progress (redraws its clock)")

    def __init__(self, model_path: str | os.PathLike[str] | None = None, *,
                 device: str | None = None, dtype: str | None = None, backend: str | None = None,
                 log: CompileLog | None = None, **traits: Any) -> None:
        super().__init__(**traits)
        self.model: PreTrainedModel | None = None
        self.tokenizer: PreTrainedTokenizerBase | None = None
        self.recorder: CompileRecorder | None = None
        self._unsubscribe: Callable[[], None] | None = None
        self._runs = 0
        self._log = log
        self._saved: dict[str, CompileLog] = {}
        self._stop = threading.Event()
        self._worker: threading.Thread | None = None
        self._worker_lock = threading.Lock()
        self._loaded_on = ""  # the device the model was loaded on
        self._sweeping = False  # a sweep counts its own progress (see _on_batch)
        self._advice_key: tuple[Any, ...] | None = None  # the log diagnose() last saw
        # per log: each function's findings, kept while its events are unchanged
        self._advice_memo: WeakKeyDictionary[CompileLog, FunctionMemo] = WeakKeyDictionary()
        self._compiling: dict[int, Any] = {}  # CompileStart.id -> CompileStart
        self._ticker: threading.Thread | None = None
        self._counted_log: CompileLog | None = None  # graph counts so far (see _graph_counts)
        self._counted = 0
        self._pairs: dict[tuple[str, str], int] = {}
        if log is not None:  # replay: no torch, no model
            self.mode = "replay"
            head = log.header or {}
            self.device_options = [str(head.get("device") or "unknown")]
            self.device = self.device_options[0]
            self.backend_options = [str(head.get("backend") or "unknown")]
            self.backend = self.backend_options[0]
            self.device_note = (f"recorded on {self.device} with the {self.backend!r} backend; "
                                f"{REPLAY_REASON}")
            self.source = self.source or str(log.path or "")
            self.refresh()
            self._say(f"Replaying {len(log.events)} compile events from "
                      f"{Path(self.source).name or 'a saved log'}; {REPLAY_REASON}.", "info")
            return
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
        self.model_path = os.fspath(model_path) if model_path is not None else ""
        self._new_recorder()
        self._say("Press Load to load the model (empty path: the embedded tiny model).", "info")

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

    @classmethod
    def replay(cls, path: str | os.PathLike[str]) -> "DashboardState":
        """A read-only session over a saved log (``open_log``: a JSONL file, a folder of per-rank
        logs or of torch trace files; no model, no torch needed)."""
        return cls(log=open_log(path), source=os.fspath(path))

    # -- the log and its derived views -------------------------------------------------
    @property
    def session_log(self) -> CompileLog:
        """The session's own events: the recorder's log (live) or the loaded file (replay)."""
        if self.recorder is not None:
            return self.recorder.log
        assert self._log is not None
        return self._log

    @property
    def log(self) -> CompileLog:
        """What the views show: the run picked in ``shown_run``, else the session's log."""
        return self._saved.get(self.shown_run) or self.session_log

    def run_log(self, name: str) -> CompileLog:
        """A kept or uploaded run by name ('' : the session's own log)."""
        if not name:
            return self.session_log
        if name not in self._saved:
            raise KeyError(f"no run named {name!r}; runs: {', '.join(self.run_names) or 'none'}")
        return self._saved[name]

    def refresh(self, advice: bool = True) -> None:
        """Recompute the counters (and, if ``advice``, the ``diagnose()`` findings) from the log."""
        log = self.log
        self.graph_counts = self._graph_counts(log)
        key = (id(log), len(log.events), log.wall_time_s)
        if advice and key != self._advice_key:  # unchanged since the last diagnose: kept
            self.advice = list(diagnose(log, memo=self._advice_memo.setdefault(log, {})))
            self._advice_key = key
        self.event_count = len(log.events)

    def _on_event(self, event: CompileEvent) -> None:
        # runs in the thread that compiles: keep it cheap. The widget redraws on the event_count
        # change and refreshes the advice with the chart, at most every CHART_EVERY_S.
        try:
            self.refresh(advice=False)
        except Exception as exc:  # a view must never break the workload that feeds it
            self.fail(exc)

    def _new_recorder(self) -> None:
        if self._unsubscribe is not None:
            self._unsubscribe()
        if self.recorder is not None and self.recorder.active:
            self.recorder.stop()
        self.recorder = CompileRecorder(device=self.device, backend=self.backend,
                                        context="dashboard", quiet=True)
        unsubscribe_events = self.recorder.subscribe(self._on_event)
        unsubscribe_starts = self.recorder.subscribe_starts(self._on_start)

        def unsubscribe() -> None:
            unsubscribe_events()
            unsubscribe_starts()
        self._unsubscribe = unsubscribe
        self._compiling.clear()
        self.compiling = []

    def _match_recorder(self) -> None:
        """A new recorder (and log) when the device or backend chosen is not the one recorded:
        the log's header and every event name the device and backend actually used."""
        if self.recorder is None or (self.recorder.device, self.recorder.backend) != (
                self.device, self.backend):
            self._new_recorder()

    # -- status ------------------------------------------------------------------------
    def _say(self, text: str, kind: str = "info") -> None:
        self.status_kind = kind
        self.status = text

    def fail(self, exc: BaseException) -> None:
        """Show ``exc`` in the status area (type and message, traceback kept in error_detail)."""
        self.error = describe_error(exc)
        self.error_detail = "".join(traceback.format_exception(type(exc), exc, exc.__traceback__))
        self._say(self.error, "error")

    @contextmanager
    def _action(self, what: str, steps: int = 0) -> Iterator[None]:
        """Busy while running ``what``; any error lands in the status area and is re-raised."""
        if self.busy:
            raise RuntimeError(f"cannot start {what!r}: the dashboard is still busy")
        self.busy = True
        if threading.current_thread() is not self._worker:  # start() cleared it for its worker
            self._stop.clear()                               # (a Stop pressed since then holds)
            self.stopping = False
        self.error = self.error_detail = self.eta = ""
        self.progress, self.progress_max = 0, steps
        self._say(f"{what} …", "busy")
        try:
            yield
        except BaseException as exc:
            self.fail(exc)
            raise
        finally:
            self._advice_key = None  # events may have been updated in place (NEFF times)
            self.busy = self.stopping = False

    def _need(self, what: str) -> None:
        if self.mode == "replay":
            raise RuntimeError(f"{what} is not available in a {REPLAY_REASON}")
        if self.model is None:
            raise RuntimeError(f"{what} needs a model: press Load first")

    # -- actions -----------------------------------------------------------------------
    def load(self) -> None:
        """Load ``model_path`` (empty: the tiny model) on ``device``, then check placement."""
        with self._action("Loading the model"):
            if self.mode == "replay":
                raise RuntimeError(f"Load is not available in a {REPLAY_REASON}")
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
            self._say(f"Loaded {Path(self.source).name} ({params:,} parameters, {self.dtype}) on "
                      f"{self.device} in {time.perf_counter() - start:.1f} s", "ok")

    def buckets(self):
        """The Buckets the padding strategy asks for (None: each prompt keeps its length)."""
        if self.padding == "none":
            return None
        bounds = parse_boundaries(self.boundaries)
        return Buckets(bounds if self.padding == "buckets" else [bounds[-1]])

    def generate(self, prompt: str | None = None) -> Any:
        """Generate from ``prompt`` (default: the prompt trait); returns the GenerationResult."""
        prompt = self.prompt if prompt is None else prompt
        with self._action("Generating (a new shape compiles first)"):
            self._need("Generate")
            buckets = self.buckets()
            result = self._run(prompt, buckets, f"generate {self._runs + 1}")
            if result.stopped:  # nothing ran: the last text and summary still hold
                self._say("Stopped before generating: Stop was pressed", "info")
            else:
                self.generated_text = result.texts[0]
                self._say(f"Generated: {self.run_summary}", "ok")
        return result

    def sweep(self) -> list[Any]:
        """Send ``sweep_count`` prompts of growing (or random) lengths, one request at a time."""
        results: list[Any] = []
        before = sum(self.graph_counts.values())
        with self._action(f"Sweep of {self.sweep_count} prompts", steps=max(self.sweep_count, 0)):
            self._need("Sweep")
            buckets = self.buckets()
            longest = parse_boundaries(self.boundaries)[-1]
            lengths = sweep_lengths(self.sweep_count, longest, self.sweep_order, seed=self._runs)
            shapes = [self._batch_shape(n, buckets) for n in lengths]
            timings: list[Any] = []
            self._sweeping = True
            try:
                results = self._sweep_prompts(lengths, buckets, shapes, timings)
            finally:
                self._sweeping = False
            if self._stop.is_set() and len(results) < len(lengths):
                self._say(f"Stopped after {len(results)} of {len(lengths)} batches; what was "
                          "recorded stays in the log", "info")
                return results
            new = sum(self.graph_counts.values()) - before
            self._say(f"Sweep done: {len(lengths)} prompts ({self.sweep_order} lengths "
                      f"{min(lengths)}..{max(lengths)}), padding {self.padding}: {new} new "
                      f"graph(s)", "ok")
        return results

    def _sweep_prompts(self, lengths: list[int], buckets: Buckets | None,
                       shapes: list[tuple[int, int]], timings: list[Any]) -> list[Any]:
        """The sweep's prompts one by one, progress and ETA after each; Stop between them."""
        results: list[Any] = []
        for i, n in enumerate(lengths, 1):
            if self._stop.is_set():
                break
            self._say(f"Sweep {i}/{len(lengths)}: a prompt of about {n} tokens …", "busy")
            result = self._run(self.prompt_of_length(n), buckets, f"sweep {i}/{len(lengths)}")
            if result.stopped:  # Stop came before its batch: it did not run
                break
            results.append(result)
            self.generated_text = result.texts[0]
            timings += result.timings
            self.progress = i
            left = eta_s(timings, shapes[i:])
            self.eta = (f"{i} of {len(lengths)} batches"
                        + (f", about {left:.0f} s left" if left is not None and i < len(lengths)
                           else ""))
        return results

    def prompt_of_length(self, n: int) -> str:
        """A prompt of about ``n`` tokens for the loaded tokenizer."""
        self._need("A sweep prompt")
        assert self.tokenizer is not None  # loaded with the model, which _need checked
        return text_of_tokens(self.tokenizer, n)

    def _batch_shape(self, tokens: int, buckets: Buckets | None) -> tuple[int, int]:
        """(bucket, cache length) a prompt of ``tokens`` tokens runs with (for the ETA)."""
        from neuronkit.workloads.generation import cache_length

        bucket = buckets.fit(tokens) if buckets is not None else tokens
        return bucket, cache_length(bucket, self.max_new_tokens)

    def _on_batch(self, progress: BatchProgress) -> None:
        if self._sweeping:  # a sweep counts its prompts itself (one generate call each)
            return
        self.progress_max, self.progress = progress.total, progress.done
        self.eta = str(progress)

    def _run(self, prompt: str, buckets: Any, label: str) -> GenerationResult:
        assert self.tokenizer is not None  # callers checked _need() first
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
                                 else None, on_batch=self._on_batch, stop=self._stop)
        if not result.stopped:  # only a prompt that ran feeds the planner
            self.prompt_lengths = [*self.prompt_lengths, length]
        if self.recorder.active:  # (a recorder generate started, it stopped: a safe point too)
            self.recorder.safe_point()  # on Neuron: NEFF build times and eager kernels resolved
        self.refresh()
        compiles = len(result.events)
        if result.stopped and not result.batches_done:
            return result  # Stop came first: nothing ran, the last summary still holds
        self.run_summary = (f"{length} prompt tokens, {self.max_new_tokens} new, "
                            f"{result.wall_s:.2f} s, {result.tokens_per_s:.0f} tokens/s, "
                            f"padding waste {result.padding_waste:.0%}, {compiles} compile(s)")
        return result

    def plan(self) -> str:
        """Plan bucket boundaries from the prompt lengths seen so far (``plan_buckets``)."""
        with self._action("Planning buckets"):
            if not self.prompt_lengths:
                raise ValueError("no prompt lengths yet: Generate or Sweep first, then plan")
            planned = plan_buckets(self.prompt_lengths, max_buckets=4)
            self.boundaries = ",".join(str(b) for b in planned)
            self._say(f"Planned {planned!r} from {len(self.prompt_lengths)} prompt lengths "
                      "(compile cost vs padded tokens); padding set to buckets", "ok")
            self.padding = "buckets"
        return self.boundaries

    def reset(self) -> None:
        """Forget every compiled graph in this process (torch.compiler.reset); a new log."""
        with self._action("Resetting compiled graphs"):
            if self.mode == "replay":
                raise RuntimeError(f"Reset is not available in a {REPLAY_REASON}")
            import torch

            torch.compiler.reset()
            self._new_recorder()
            self.prompt_lengths = []
            self.refresh()
            self._say("Compiled graphs cleared (torch.compiler.reset()); a new log started", "ok")

    def close(self) -> None:
        """Stop listening to the recorder and drop the model."""
        if self._unsubscribe is not None:
            self._unsubscribe()
            self._unsubscribe = None
        if self.recorder is not None and self.recorder.active:
            self.recorder.stop()
        self.model = self.tokenizer = None
        self.loaded = False
