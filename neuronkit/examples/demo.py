"""``neuronkit demo``: the same mixed-length workload generated naively, then with buckets.

Prints the device and compile backend actually used, then the compile report of each run,
and a side-by-side comparison; off Neuron it adds a labelled projection of what the compiles
would cost there (on Neuron the compile times are measured).
"""
from __future__ import annotations

import tempfile
from pathlib import Path

from neuronkit.workloads.shapes import DEFAULT_COMPILE_COST_S as NEURON_COMPILE_COST_S  # 60 s a graph

__all__ = ["run_demo", "NEURON_COMPILE_COST_S"]


def _unwritable(out: Path, exc: BaseException) -> ValueError:
    why = getattr(exc, "strerror", None) or str(exc)
    return ValueError(f"--log-dir {out}: cannot write the compile logs there ({why}); name a "
                      "folder you can write")


def run_demo(model: str | None = None, requests: int = 12, max_new_tokens: int = 8,
             backend: str | None = None, log_dir: str | None = None) -> int:
    """Run the demo and print its report; returns a process exit code."""
    import torch

    from neuronkit.examples.text import mixed_texts
    from neuronkit.log.compile_log import CompileLog
    from neuronkit.recorder.recorder import CompileRecorder
    from neuronkit.setup.device import detect
    from neuronkit.setup.models import load_model, load_tokenizer
    from neuronkit.views.text import format_report
    from neuronkit.workloads.generation import generate
    from neuronkit.workloads.shapes import plan_buckets

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
    runs = {"naive": None, "bucketed": plan_buckets(lengths, max_buckets=3)}
    walls: dict[str, float] = {}
    for name, buckets in runs.items():
        torch.compiler.reset()  # each run starts with no compiled graphs
        title = "naive: pad each request to its own length" if buckets is None else \
            f"bucketed: pad to {list(buckets)} (chosen by plan_buckets)"
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
        print(f"\n=== {title} ===")
        print(format_report(rec.log))
        print(f"sample output: {result.texts[0]!r}")

    on_neuron = report.device == "neuron"
    print("\n=== side by side ===")
    print(f"{'run':<10} {'graphs':>6} {'compile s':>10} {'wall s':>8}" +
          ("" if on_neuron else f" {'projected on Neuron s':>22}"))
    for name, log in logs.items():
        graphs = sum(log.graph_counts().values())
        row = f"{name:<10} {graphs:>6} {log.total_compile_s:>10.2f} {walls[name]:>8.2f}"
        if not on_neuron:
            projected = walls[name] - log.total_compile_s + graphs * NEURON_COMPILE_COST_S
            row += f" {projected:>22.0f}"
        print(row)
    if on_neuron:
        print("(compile s and wall s were measured on Neuron: these are neuronx-cc's own times)")
    else:
        print(f"(projection = measured execution time + graphs x {NEURON_COMPILE_COST_S:.0f} s "
              f"per Neuron compile; it was not run on Neuron)")
    print(f"\ncompile logs: {out}  (view with: neuronkit report {out / 'naive.jsonl'})")
    return 0
