"""``neuronkit demo``: the same mixed-length workload generated naively, then with buckets.

Prints the device and compile backend actually used, then the compile report of each run (the
bucketed run pads to the buckets the naive run's advice suggested),
and a side-by-side comparison (:func:`side_by_side`, which notebook 03 prints too). On Neuron
every number in it is measured: Dynamo's seconds, the NEFF (neuronx-cc) build seconds resolved at
the recorder's safe points, and the run's wall time, never a projection. Off Neuron it adds a
labelled projection of what the compiles would cost there.
"""
from __future__ import annotations

import tempfile
import textwrap
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S as NEURON_COMPILE_COST_S  # 60 s a graph

if TYPE_CHECKING:
    from neuronkit.advice.finding import Advice
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.workloads.shapes import Buckets

__all__ = ["run_demo", "side_by_side", "suggested_buckets", "NEURON_COMPILE_COST_S"]


def _unwritable(out: Path, exc: BaseException) -> ValueError:
    why = getattr(exc, "strerror", None) or str(exc)
    return ValueError(f"--log-dir {out}: cannot write the compile logs there ({why}); name a "
                      "folder you can write")


def run_demo(model: str | None = None, requests: int = 12, max_new_tokens: int = 8,
             backend: str | None = None, log_dir: str | None = None) -> int:
    """Run the demo and print its report; returns a process exit code."""
    import torch

    from neuronkit.advice.diagnose import diagnose
    from neuronkit.examples.text import mixed_texts
    from neuronkit.recorder.recorder import CompileRecorder
    from neuronkit.setup.device import detect
    from neuronkit.setup.models import load_model, load_tokenizer
    from neuronkit.views.text import format_report
    from neuronkit.workloads.generation import generate

    if requests < 1:
        raise ValueError(f"--requests must be at least 1, got {requests}")
    report = detect(backend)
    print("neuronkit demo")
    print(f"device: {report.device}   compile backend: {report.compile_backend}")
    if report.device != "neuron":
        print(f"no Neuron device found: {report.reason}.")
        print("Recompiles below happen for the same reasons they would on Neuron "
              "(torch.compile with dynamic=False), only faster.")
    out = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="neuronkit-demo-"))
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as exc:  # a file there, or above it; a folder that refuses
        why = "it is a file" if out.is_file() else exc.strerror or str(exc)
        raise ValueError(f"--log-dir {out}: cannot make the folder for the compile logs ({why}); "
                         "name a folder you can write") from exc

    model_obj = load_model(model, device=report.device,
                           dtype="float32" if report.device == "cpu" else "bfloat16")
    tok = load_tokenizer(model)
    prompts = mixed_texts(requests)
    lengths = [len(tok(p)["input_ids"]) for p in prompts]
    print(f"\nworkload: {requests} prompts, lengths {min(lengths)}..{max(lengths)} tokens, "
          f"max_new_tokens={max_new_tokens}, one request at a time as they arrive")

    logs: dict[str, CompileLog] = {}
    walls: dict[str, float] = {}
    tokens: dict[str, int] = {}
    buckets: Buckets | None = None
    for name in ("naive", "bucketed"):
        torch.compiler.reset()  # each run starts with no compiled graphs
        title = "naive: pad each request to its own length" if buckets is None else \
            f"bucketed: pad to {list(buckets)} (the buckets the naive run's advice suggested)"
        try:
            rec = CompileRecorder(log_path=out / f"{name}.jsonl", backend=report.compile_backend)
        except OSError as exc:
            raise _unwritable(out, exc) from exc
        if rec.write_errors:  # the header: said before generating
            raise _unwritable(out, rec.write_errors[0])
        with rec:
            result = generate(model_obj, tok, prompts, max_new_tokens=max_new_tokens,
                              buckets=buckets, batch_size=1, recorder=rec,
                              backend=report.compile_backend)
        if rec.write_errors:
            raise _unwritable(out, rec.write_errors[0])
        logs[name], walls[name] = rec.log, result.wall_s
        if isinstance(getattr(result, "new_tokens", None), int):  # (a stand-in generate: none)
            tokens[name] = result.new_tokens
        advice = diagnose(rec.log)
        print(f"\n=== {title} ===")
        print(format_report(rec.log, advice=advice))
        print(f"sample output: {result.texts[0]!r}")
        if buckets is None:
            buckets = suggested_buckets(advice, lengths)

    print("\n=== side by side ===")
    print("\n".join(side_by_side({name: (log, walls[name]) for name, log in logs.items()},
                                 on_neuron=report.device == "neuron", new_tokens=tokens or None)))
    print(f"\ncompile logs: {out}  (view with: neuronkit report {out / 'naive.jsonl'})")
    return 0


def suggested_buckets(advice: list[Advice], lengths: list[int]) -> Buckets:
    """The buckets the advice suggested for the prompt length (``nk.plan_buckets`` at the price
    it states); where it suggested none (nothing recompiled), the longest prompt rounded to 16."""
    from neuronkit.workloads.shapes import Buckets

    for a in advice:
        if a.numbers.get("cause") == "the prompt length" and a.numbers.get("buckets"):
            return Buckets(a.numbers["buckets"])
    return Buckets([-(-max(lengths) // 16) * 16])


def _throughput(runs: Mapping[str, tuple[CompileLog, float]],
                new_tokens: Mapping[str, int] | None) -> list[str]:
    """Each run's tokens/s, and without its compile seconds (``GenerationResult.throughput``)."""
    from neuronkit.workloads.generation import GenerationResult

    lines = []
    for name, n in (new_tokens or {}).items():
        if name in runs:
            log, wall = runs[name]
            text = GenerationResult.throughput_text(n, wall, sum(e.total_s for e in log))
            lines.append(f"throughput of {name}: {text}")
    return lines


def side_by_side(runs: Mapping[str, tuple[CompileLog, float]], *, on_neuron: bool,
                 compile_cost_s: float = NEURON_COMPILE_COST_S,
                 new_tokens: Mapping[str, int] | None = None) -> list[str]:
    """The runs' compile costs, one row each (``runs``: name -> (log, measured wall seconds)),
    then, for the runs ``new_tokens`` counts (name -> new tokens generated), their tokens/s
    with and without the compile seconds: ``throughput of naive: 12.3 tokens/s (45.6 tokens/s
    without the 2.10 s of compiles)``.

    On Neuron: graphs, Dynamo s, NEFF s (the neuronx-cc builds), compile s (both, each second
    once: :attr:`CompileEvent.total_s`) and wall s, all measured; no projection. Elsewhere:
    graphs, compile s, wall s and a projection labelled as one: the execution measured here (wall
    minus compile) plus graphs x ``compile_cost_s``, an assumed Neuron compile.
    """
    if not on_neuron:
        rows = [f"{'run':<10} {'graphs':>6} {'compile s':>10} {'wall s':>8} "
                f"{'projected on Neuron s':>22}"]
        for name, (log, wall) in runs.items():
            graphs, compile_s = sum(log.graph_counts().values()), sum(e.total_s for e in log)
            projected = max(wall - compile_s, 0.0) + graphs * compile_cost_s
            rows.append(f"{name:<10} {graphs:>6} {compile_s:>10.2f} {wall:>8.2f} "
                        f"{projected:>22.1f}")
        return rows + _throughput(runs, new_tokens) + textwrap.wrap(
            f"(projection = execution measured here (wall s - compile s) + graphs x "
            f"{compile_cost_s:.0f} s, an assumed cost per Neuron compile, not a measurement; it was "
            "not run on Neuron)", 100)
    kernel_s = {name: sum(float(e.duration_s or 0.0) for e in log
                          if e.kind == "kernels" and not e.forecast) for name, (log, _) in runs.items()}
    kernels = any(kernel_s.values())  # eager-op kernels built: their own column, not Dynamo's
    rows = [f"{'run':<10} {'graphs':>6} {'dynamo s':>10} {'neff s':>10} "
            + (f"{'kernel s':>10} " if kernels else "") + f"{'compile s':>10} {'wall s':>8}"]
    inside = False
    for name, (log, wall) in runs.items():
        events = list(log)
        graphs = sum(log.graph_counts().values())
        dynamo = sum(float(e.duration_s or 0.0) for e in events) - kernel_s[name]
        neff = sum(float(e.neff_compile_s or 0.0) for e in events)
        inside = inside or any(e.neff_in_duration and e.neff_compile_s for e in events)
        rows.append(f"{name:<10} {graphs:>6} {dynamo:>10.2f} {neff:>10.2f} "
                    + (f"{kernel_s[name]:>10.2f} " if kernels else "")
                    + f"{sum(e.total_s for e in events):>10.2f} {wall:>8.2f}")
    kernel_note = "kernel s = the eager-op kernels built (`kernels` events); " if kernels else ""
    notes = ["(measured on Neuron, no projection: dynamo s = torch.compile's own time; neff s "
             "= the neuronx-cc builds, read with torch_neuronx.get_dynamo_metrics() at the "
             f"recorder's safe points; {kernel_note}compile s = "
             f"{'all three' if kernels else 'both'}, each second counted once; wall s = the run's "
             "wall time, which already holds the waits for the builds)"]
    if inside:
        notes.append("(NEURON_LAUNCH_BLOCKING=1: the builds ran inside Dynamo's time, so dynamo s "
                     "already holds neff s, and compile s counts them once)")
    return rows + _throughput(runs, new_tokens) + [line for note in notes
                                                    for line in textwrap.wrap(note, 100)]
