"""Training with dynamic padding vs fixed length vs buckets: graphs, compile time, step time, waste.

One run, same data, same steps, the tiny model under Trainer with torch.compile (default backend
eager) and dynamic=False (how Neuron compiles). Prints, side by side: graphs compiled (and what
audit_shapes predicted), compile seconds, step time without compiles, padding waste, and a
labelled projection for Neuron (steps x measured step time + graphs x per-graph compile cost).

    python bench/training.py [--steps 8] [--batch-size 4] [--compile-cost 60] [--backend eager]
"""
from __future__ import annotations

import argparse
import os
import tempfile
import time
import warnings


def texts(count: int, seed: int = 0) -> list[str]:
    from neuronkit.examples.text import mixed_texts

    return mixed_texts(count, seed, shortest=4)


def run(name, collator, data, model_path, steps, batch, backend):
    import torch
    from transformers import PrinterCallback, Trainer, TrainerCallback

    import neuronkit as nk
    from neuronkit.workloads.trainer_args import fixed_shape_args
    from neuronkit.workloads.training import CompileEventsCallback

    class StepClock(TrainerCallback):
        def __init__(self):
            self.walls: list[float] = []

        def on_step_begin(self, *a, **k):
            self._t = time.perf_counter()

        def on_step_end(self, *a, **k):
            self.walls.append(time.perf_counter() - self._t)

    torch.compiler.reset()
    model = nk.load_model(model_path, device="cpu", dtype="float32").train()
    args = fixed_shape_args(tempfile.mkdtemp(prefix="nk-bench-"), max_steps=steps,
                            per_device_train_batch_size=batch, torch_compile_backend=backend,
                            train_sampling_strategy="sequential", save_strategy="no",
                            logging_steps=steps, disable_tqdm=True, quiet=True, seed=0)
    events, clock = CompileEventsCallback(quiet=True), StepClock()
    trainer = Trainer(model=model, args=args, train_dataset=data, data_collator=collator,
                      callbacks=[events, clock])
    trainer.remove_callback(PrinterCallback)      # the table below says it all
    batches = list(trainer.get_train_dataloader())[:steps]
    audit = nk.audit_shapes(batches)
    real = sum(int(b["attention_mask"].sum()) for b in batches)
    total = sum(b["attention_mask"].numel() for b in batches)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")          # the late-compile warning is the point here
        out = trainer.train()
    compile_s = events.compile_s
    step_s = (sum(clock.walls) - compile_s) / len(clock.walls)
    return {"name": name, "graphs": events.graphs, "predicted": audit.predicted_graphs,
            "compile_s": compile_s, "step_s": step_s, "waste": 1 - real / total,
            "loss": out.training_loss, "steps": len(clock.walls),
            "functions": sorted({e.function for e in events.events})}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--steps", type=int, default=8)
    p.add_argument("--batch-size", type=int, default=4)
    p.add_argument("--compile-cost", type=float, default=60.0,
                   help="seconds one Neuron graph compile costs, for the projection")
    p.add_argument("--backend", default=os.environ.get("NEURONKIT_CPU_BACKEND", "eager"))
    p.add_argument("--threads", type=int, default=1,
                   help="torch CPU threads (1: steady timings for a tiny model on a busy machine)")
    a = p.parse_args()

    import torch

    torch.set_num_threads(a.threads)
    from transformers import DataCollatorForLanguageModeling

    import neuronkit as nk
    from neuronkit.workloads.collate import FixedLengthCollator

    path = nk.tiny_model()
    tok = nk.load_tokenizer(path)
    data = [{"input_ids": tok(t)["input_ids"]} for t in texts(a.steps * a.batch_size)]
    lengths = [len(d["input_ids"]) for d in data]
    # a batch is padded to the bucket of its longest example: plan on those, 3 buckets
    longest = [max(lengths[i:i + a.batch_size]) for i in range(0, len(lengths), a.batch_size)]
    buckets = nk.plan_buckets(longest, max_buckets=3, compile_cost_s=0.0)
    print(f"neuronkit training bench: tiny Qwen3, {a.steps} steps x batch {a.batch_size}, "
          f"lengths {min(lengths)}..{max(lengths)} tokens, backend {a.backend!r}, dynamic=False "
          f"(the way Neuron compiles), torch {torch.__version__}, {a.threads} thread(s)")

    # warm torch.compile's own start-up so the first strategy is not charged for it
    warm = torch.compile(torch.nn.Linear(4, 4), backend=a.backend, dynamic=False)
    warm(torch.ones(2, 4))

    strategies = [
        ("dynamic padding", DataCollatorForLanguageModeling(tok, mlm=False)),
        (f"fixed length {max(lengths)}", FixedLengthCollator(tok, max_length=max(lengths))),
        (f"buckets {list(buckets)}", FixedLengthCollator(tok, buckets=buckets)),
    ]
    rows = [run(name, coll, data, path, a.steps, a.batch_size, a.backend)
            for name, coll in strategies]

    head = (f"{'strategy':<26}{'graphs':>7}{'audit':>7}{'compile s':>11}{'step s':>9}"
            f"{'pad waste':>11}{'loss':>8}{'projected Neuron s':>20}")
    print("\n" + head + "\n" + "-" * len(head))
    for r in rows:
        r["projected"] = r["steps"] * r["step_s"] + r["graphs"] * a.compile_cost
        print(f"{r['name']:<26}{r['graphs']:>7}{r['predicted']:>7}{r['compile_s']:>11.2f}"
              f"{r['step_s']:>9.3f}{r['waste']:>10.0%}{r['loss']:>9.3f}{r['projected']:>20.0f}")
    print(f"(graphs: recorded by CompileEventsCallback; audit: predicted by audit_shapes before "
          f"training; step s: measured step time here without compiles; projected Neuron s = "
          f"steps x step s + graphs x {a.compile_cost:g} s per Neuron compile, an estimate: "
          f"nothing here ran on Neuron)")
    dyn, fixed = rows[0], rows[1]
    print(f"\nfixed vs dynamic: {dyn['graphs'] / fixed['graphs']:.1f}x fewer graphs, "
          f"{dyn['compile_s'] / max(fixed['compile_s'], 1e-9):.1f}x less compile time here, "
          f"{dyn['projected'] / fixed['projected']:.1f}x lower projected Neuron time")
    best = min(rows, key=lambda r: r["projected"])
    print(f"goal: fixed length compiles one graph per compiled function "
          f"({fixed['graphs']} graph(s): {', '.join(fixed['functions'])}) -> "
          f"{'met' if fixed['graphs'] == len(fixed['functions']) else 'NOT met'}; lowest "
          f"projected Neuron time: {best['name']} -> "
          f"{'met' if best is fixed else 'NOT met'}")
    print("audit == recorded for every strategy: "
          f"{'yes' if all(r['graphs'] == r['predicted'] for r in rows) else 'no'}")


if __name__ == "__main__":
    main()
