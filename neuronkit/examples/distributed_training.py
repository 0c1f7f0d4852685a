"""Example distributed training run: one compile log per rank (``<log-dir>/compile.rank<N>.jsonl``).

    torchrun --standalone --nproc_per_node=2 -m neuronkit.examples.distributed_training --mode fsdp
    nk.launch("neuronkit.examples.distributed_training", 2, ["--mode", "tp"], log_dir="logs")

``--mode fsdp``: ``DistributedConfig(fsdp_size=N)`` with Trainer, ``fixed_shape_args`` and
``CompileEventsCallback``. ``--mode tp``: ``DistributedConfig(tp_size=N)`` with a plain training
loop, saying why Trainer is not used on CPU; ``--trainer`` asks for Trainer (fine on Neuron; on
CPU it stops with that explanation instead of accelerate's error).
transformers starts the process group itself: gloo on CPU, ``neuron`` on Trainium.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from pathlib import Path
from typing import Any

from ..distributed import rank, world_size
from .text import training_windows

__all__ = ["main"]

def examples(count: int, tokenizer) -> list[dict]:
    """``count`` deterministic examples of varied lengths (identical on every rank)."""
    return [{"input_ids": tokenizer(text)["input_ids"]} for text in training_windows(count)]


def _say(line: str) -> None:
    """Print a whole line in one write, so the ranks' lines never interleave mid-line."""
    sys.stdout.write(line + "\n")
    sys.stdout.flush()


def _load_sharded(model_path, parallelism: str):
    """(world size, tokenizer, model sharded over all ranks: ``parallelism`` is
    ``"fsdp_size"`` or ``"tp_size"``)."""
    from transformers import DistributedConfig

    from ..device import detect
    from ..models import load_model, load_tokenizer

    device = detect().device
    world = world_size()
    sizes: dict[str, Any] = {parallelism: world}
    config = DistributedConfig(**sizes)
    model = load_model(model_path, device=device, dtype=_dtype(device), distributed_config=config)
    return world, load_tokenizer(model_path), model.train()


def train_fsdp(args, model_path, log_path) -> None:
    from transformers import Trainer

    from ..collate import FixedLengthCollator
    from ..training import CompileEventsCallback, fixed_shape_args

    world, tok, model = _load_sharded(model_path, "fsdp_size")
    out = args.out or tempfile.mkdtemp(prefix="neuronkit-fsdp-")
    targs = fixed_shape_args(out, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                             logging_steps=1, save_strategy="no", disable_tqdm=True,
                             quiet=rank() != 0)
    callback = CompileEventsCallback(log_path=log_path, quiet=True)
    trainer = Trainer(model=model, args=targs,
                      train_dataset=examples(args.batch_size * world * args.steps, tok),
                      data_collator=FixedLengthCollator(tok, max_length=args.max_length,
                                                        truncation=True),
                      callbacks=[callback])
    trainer.train()
    _say(f"[rank {rank()}] {callback.summary()}; log: {log_path}")


def train_tp(args, model_path, log_path) -> None:
    import torch

    from ..distributed import TrainerParallelismError, check_trainer_parallelism
    from ..recorder import CompileRecorder
    from ..collate import FixedLengthCollator

    from ..device import detect

    backend = detect().compile_backend
    world, tok, model = _load_sharded(model_path, "tp_size")
    try:
        check_trainer_parallelism(model)      # explains why Trainer cannot take this model here
    except TrainerParallelismError as exc:
        if args.trainer:
            raise
        if rank() == 0:
            _say(f"[rank 0] Trainer not used: {exc}")
    if args.trainer:
        from transformers import Trainer

        from ..training import CompileEventsCallback, fixed_shape_args

        targs = fixed_shape_args(args.out or tempfile.mkdtemp(), max_steps=args.steps,
                                 per_device_train_batch_size=args.batch_size, save_strategy="no")
        Trainer(model=model, args=targs, train_dataset=examples(args.batch_size * args.steps, tok),
                data_collator=FixedLengthCollator(tok, max_length=args.max_length, truncation=True),
                callbacks=[CompileEventsCallback(log_path=log_path)]).train()
        return
    # every TP rank sees the same batches; the optimizer exists before the first forward
    collate = FixedLengthCollator(tok, max_length=args.max_length, truncation=True)
    data = examples(args.batch_size * args.steps, tok)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    device = next(model.parameters()).device
    with CompileRecorder(log_path=log_path, backend=backend) as rec:
        for step in range(1, args.steps + 1):
            rec.set_context(f"step {step}")
            chunk = data[(step - 1) * args.batch_size: step * args.batch_size]
            batch = {k: v.to(device) for k, v in collate(chunk).items()}
            loss = compiled(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            _say(f"[rank {rank()}] step {step} loss {loss.item():.4f}")
    graphs = sum(rec.log.graph_counts().values())
    _say(f"[rank {rank()}] {graphs} graph(s), {rec.log.total_compile_s:.2f} s compiling; "
         f"log: {log_path}")


def _dtype(device: str) -> str:
    return "float32" if device == "cpu" else "bfloat16"   # CPU: fp32 weights, bf16 autocast


def main(argv: list[str] | None = None) -> None:
    from ..distributed import LOG_DIR_ENV, rank_log_path
    from ..models import tiny_model

    p = argparse.ArgumentParser(prog="python -m neuronkit.examples.distributed_training",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("fsdp", "tp"), default="fsdp")
    p.add_argument("--trainer", action="store_true", help="tp: use Trainer (refused on CPU)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--model", default=None, help="model folder (default: the embedded tiny model)")
    p.add_argument("--log-dir", default=os.environ.get(LOG_DIR_ENV, "compile-logs"))
    p.add_argument("--out", default=None, help="Trainer output_dir (default: a temp folder)")
    args = p.parse_args(argv)
    model_path = args.model or str(tiny_model())
    log_path = rank_log_path(Path(args.log_dir) / "compile.jsonl")
    (train_fsdp if args.mode == "fsdp" else train_tp)(args, model_path, log_path)
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()  # a rank left with a live process group may abort at exit


if __name__ == "__main__":
    main()
