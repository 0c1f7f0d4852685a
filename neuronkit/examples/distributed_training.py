"""Example distributed training run: one compile log per rank (``<log-dir>/compile.rank<N>.jsonl``).

    torchrun --standalone --nproc_per_node=2 -m neuronkit.examples.distributed_training --mode fsdp
    torchrun --standalone --nproc_per_node=4 -m neuronkit.examples.distributed_training \\
        --tp-size 2 --fsdp-size 2
    nk.launch("neuronkit.examples.distributed_training", 4, ["--tp-size", "2", "--fsdp-size", "2"],
              log_dir="logs")

The layout: ``--tp-size T --fsdp-size F`` is ``DistributedConfig(tp_size=T, fsdp_size=F)`` on
T*F processes (the guide's ``tp_size=2, fsdp_size=2`` needs ``--nproc_per_node=4``). ``--mode
fsdp`` (the default) puts every process on the FSDP axis, ``--mode tp`` on the TP axis.
Without TP: Trainer with ``fixed_shape_args`` and ``CompileEventsCallback``. With TP: a plain
training loop (optimizer created before the first forward, ``torch.compile(dynamic=False)``,
fixed-length batches, a ``CompileRecorder`` per rank); ``--trainer`` asks for Trainer instead
(the documented path on Neuron; on CPU it stops with the explanation instead of accelerate's
error). The ranks of one TP group share each batch; each FSDP shard takes its own.
At the end rank 0 merges the rank logs and prints the graphs compiled per rank group: TP groups
(``[0, 1]``, ``[2, 3]``) and FSDP groups (``[0, 2]``, ``[1, 3]``), read from the device mesh
transformers builds, and flags a group whose ranks compiled different counts.

On CPU (gloo) versus Trainium: the DistributedConfig, the device mesh and the sharding (DTensor
tensor parallel, FSDP2) are the same transformers code. What differs: a TP layout trains with the
plain loop, because accelerate refuses a tensor-parallel model on CPU ("ParallelismConfig is only
compatible DistributedType.FSDP ... but got MULTI_CPU", with or without fsdp_size); the process
group is gloo, not neuron; the compile backend is eager (Dynamo's graphs, no neuronx-cc, so the
compile seconds are not Neuron's), with ``dynamic=False`` set here as Trainer sets it for the
neuron backend; the weights are fp32, not bf16. Each run prints the device and backend it used.

Expert parallelism (``DistributedConfig(ep_size=N)``, for mixture-of-experts models; not run
here, the tiny model has no experts): each expert-parallel rank receives the tokens the router
sends to its experts, a number that changes every step and differs between ranks. Any shape that
follows that count is a new graph per step and per rank; a fixed expert capacity (tokens padded
or dropped to a static size per expert) keeps one graph.

transformers starts the process group itself: gloo on CPU, ``neuron`` on Trainium.
"""
from __future__ import annotations

import argparse
import logging
import os
import sys
import tempfile
import warnings
from pathlib import Path
from typing import Any

from neuronkit.examples.text import training_windows
from neuronkit.safe import terminal_safe
from neuronkit.setup.process import default_rank as rank
from neuronkit.setup.process import world_size

__all__ = ["main"]

# Two library messages that do not apply here, dropped by exact text (nothing else is filtered):
# FSDP2 warns that the model returned a view tensor, in case the caller changes it in place (the
# loop only reads ``.loss``); TrainingArguments(torch_compile=True) tells every rank off a CUDA
# GPU that "the speedups for torchdynamo mostly come with GPU Ampere or higher".
_FSDP_VIEW_WARNING = r"FSDP2-wrapped module .* returned a view tensor"
_NOT_AMPERE = "The speedups for torchdynamo mostly come with GPU Ampere"


class _Drop(logging.Filter):
    """Drop the log records whose message starts with ``prefix``."""

    def __init__(self, prefix: str) -> None:
        super().__init__()
        self.prefix = prefix

    def filter(self, record: logging.LogRecord) -> bool:
        return not record.getMessage().startswith(self.prefix)


def examples(count: int, tokenizer) -> list[dict]:
    """``count`` deterministic examples of varied lengths (identical on every rank)."""
    return [{"input_ids": tokenizer(text)["input_ids"]} for text in training_windows(count)]


def _say(line: str) -> None:
    """Print a whole line (or block) in one write, so the ranks' lines never interleave."""
    sys.stdout.write(terminal_safe(line) + "\n")
    sys.stdout.flush()


def layout(mode: str | None, tp_size: int | None, fsdp_size: int | None,
           world: int) -> tuple[int, int]:
    """(tp_size, fsdp_size) from the command line: ``--mode`` puts all ``world`` processes on one
    axis (default fsdp); explicit sizes must multiply to ``world``. Raises ValueError."""
    from neuronkit.workloads.rank_groups import rank_groups

    if mode is not None and (tp_size is not None or fsdp_size is not None):
        raise ValueError("pass --mode or --tp-size/--fsdp-size, not both")
    if tp_size is None and fsdp_size is None:
        return (world, 1) if mode == "tp" else (1, world)
    tp, fsdp = tp_size or 1, fsdp_size or 1
    rank_groups(tp, fsdp, world)   # checks the sizes and that tp * fsdp == world
    return tp, fsdp


def _load_sharded(model_path: str, tp: int, fsdp: int):
    """(tokenizer, model sharded by ``DistributedConfig(tp_size=tp, fsdp_size=fsdp)``)."""
    from transformers import DistributedConfig

    from neuronkit.setup.device import detect
    from neuronkit.setup.models import load_model, load_tokenizer

    device = detect().device
    config = DistributedConfig(tp_size=tp, fsdp_size=fsdp)
    model = load_model(model_path, device=device, dtype=_dtype(device), distributed_config=config)
    return load_tokenizer(model_path), model.train()


def _groups_of(model: Any, tp: int, fsdp: int) -> tuple[list, str]:
    """The model's rank groups and where they came from: transformers' device mesh when the
    model holds one (checked against the documented layout), else the documented layout."""
    from neuronkit.workloads.rank_groups import mesh_rank_groups, rank_groups

    documented = rank_groups(tp, fsdp)
    mesh = getattr(model, "_device_mesh", None)   # set by transformers' maybe_distribute_model
    if mesh is None:
        return documented, "the documented layout (rank = fsdp_shard * tp_size + tp_rank)"
    groups = mesh_rank_groups(mesh)
    same = ("same as the documented layout" if groups == documented
            else "NOT the documented layout rank = fsdp_shard * tp_size + tp_rank")
    return groups, f"transformers' device mesh {tuple(mesh.mesh_dim_names)}, {same}"


def _report(tp: int, fsdp: int, trainer: bool) -> None:
    """Rank 0 prints the device, process group and compile backend really used, and on CPU what
    differs from a Trainium run."""
    if rank() != 0:
        return
    import torch.distributed as dist

    from neuronkit.setup.device import detect

    report = detect()
    group = dist.get_backend() if dist.is_available() and dist.is_initialized() else "none"
    _say(f"[rank 0] device: {report.device} | process group: {group} | torch.compile backend: "
         f"{report.compile_backend}, dynamic=False | {world_size()} processes = tp_size {tp} x "
         f"fsdp_size {fsdp} | {'Trainer' if trainer else 'plain training loop'}")
    if report.device == "cpu":
        loop = ("" if trainer or tp == 1 else "a plain loop instead of Trainer (accelerate refuses "
                "a tensor-parallel model on CPU; on Neuron Trainer is the documented path); ")
        _say(f"[rank 0] on CPU, not Trainium: {loop}process group {group}, not neuron; compile "
             f"backend {report.compile_backend}: Dynamo's graphs without neuronx-cc, so compile "
             "seconds are not Neuron's; fp32 weights, not bf16. DistributedConfig, the device "
             "mesh and the sharding are the same transformers code.")


def train_fsdp(args, tok, model, log_path: Path, fsdp: int) -> None:
    """FSDP only: Trainer, as on Neuron."""
    from transformers import Trainer

    from neuronkit.workloads.collate import FixedLengthCollator
    from neuronkit.workloads.trainer_args import fixed_shape_args
    from neuronkit.workloads.training import CompileEventsCallback

    out = args.out or tempfile.mkdtemp(prefix="neuronkit-fsdp-")
    targs = fixed_shape_args(out, max_steps=args.steps, per_device_train_batch_size=args.batch_size,
                             logging_steps=1, save_strategy="no", disable_tqdm=True,
                             quiet=rank() != 0)
    callback = CompileEventsCallback(log_path=log_path, quiet=True)
    trainer = Trainer(model=model, args=targs,
                      train_dataset=examples(args.batch_size * fsdp * args.steps, tok),
                      data_collator=FixedLengthCollator(tok, max_length=args.max_length,
                                                        truncation=True),
                      callbacks=[callback])
    trainer.train()
    _say(f"[rank {rank()}] {callback.summary()}; log: {log_path.name}")


def train_tp(args, tok, model, log_path: Path, fsdp: int, shard: int) -> None:
    """Tensor parallel (with or without FSDP): a plain loop on CPU, Trainer with ``--trainer``.

    The ranks of one TP group see the same batches; FSDP shard ``shard`` of ``fsdp`` takes
    every ``fsdp``-th batch. The optimizer exists before the first forward (FSDP needs that).
    """
    import torch

    from neuronkit.recorder.recorder import CompileRecorder
    from neuronkit.setup.device import detect
    from neuronkit.workloads.collate import FixedLengthCollator
    from neuronkit.workloads.distributed import TrainerParallelismError, check_trainer_parallelism

    backend = detect().compile_backend
    try:
        check_trainer_parallelism(model)      # explains why Trainer cannot take this model here
    except TrainerParallelismError as exc:
        if args.trainer:
            raise
        if rank() == 0:
            _say(f"[rank 0] Trainer not used: {exc}")
    collate = FixedLengthCollator(tok, max_length=args.max_length, truncation=True)
    data = examples(args.batch_size * fsdp * args.steps, tok)
    if args.trainer:
        from transformers import Trainer

        from neuronkit.workloads.trainer_args import fixed_shape_args
        from neuronkit.workloads.training import CompileEventsCallback

        targs = fixed_shape_args(args.out or tempfile.mkdtemp(), max_steps=args.steps,
                                 per_device_train_batch_size=args.batch_size, save_strategy="no")
        Trainer(model=model, args=targs, train_dataset=data, data_collator=collate,
                callbacks=[CompileEventsCallback(log_path=log_path)]).train()
        return
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3)
    compiled = torch.compile(model, backend=backend, dynamic=False)
    device = next(model.parameters()).device
    with CompileRecorder(log_path=log_path, backend=backend) as rec:
        for step in range(1, args.steps + 1):
            rec.set_context(f"step {step}")
            first = ((step - 1) * fsdp + shard) * args.batch_size
            batch = {k: v.to(device) for k, v in
                     collate(data[first: first + args.batch_size]).items()}
            loss = compiled(**batch).loss
            loss.backward()
            optimizer.step()
            optimizer.zero_grad()
            where = f" (fsdp shard {shard})" if fsdp > 1 else ""
            _say(f"[rank {rank()}] step {step} loss {loss.item():.4f}{where}")
    graphs = sum(rec.log.graph_counts().values())
    _say(f"[rank {rank()}] {graphs} graph(s), {rec.log.total_compile_s:.2f} s compiling; "
         f"log: {log_path.name}")


def summarise(base: Path, world: int, groups: list, source: str) -> str:
    """Merge the ``world`` rank logs of this run and say per rank group what it compiled."""
    from neuronkit.log.rank_logs import merge_logs, rank_log_path
    from neuronkit.workloads.rank_groups import format_group_compiles, group_compiles

    paths = [rank_log_path(base, r) for r in range(world)]
    found = [p for p in paths if p.exists()]
    if not found:
        return f"no rank logs found beside {base.name}: nothing to merge"
    merged = merge_logs(found)
    lost = [p.name for p in paths if not p.exists()]
    text = (f"merged {len(found)} rank logs ({found[0].name} .. {found[-1].name})"
            + (f"; MISSING: {', '.join(lost)}" if lost else "") + "\n")
    return text + format_group_compiles(group_compiles(merged, groups), source)


def _dtype(device: str) -> str:
    return "float32" if device == "cpu" else "bfloat16"   # CPU: fp32 weights (Trainer: bf16 autocast)


def main(argv: list[str] | None = None) -> None:
    from neuronkit.log.rank_logs import rank_log_path
    from neuronkit.setup.tiny import tiny_model
    from neuronkit.workloads.distributed import LOG_DIR_ENV
    from neuronkit.workloads.rank_groups import fsdp_shard

    p = argparse.ArgumentParser(prog="python -m neuronkit.examples.distributed_training",
                                description=__doc__.split("\n\n")[0])
    p.add_argument("--mode", choices=("fsdp", "tp"), default=None,
                   help="all processes on one axis (default: fsdp)")
    p.add_argument("--tp-size", type=int, default=None,
                   help="tensor-parallel size (tp x fsdp = processes)")
    p.add_argument("--fsdp-size", type=int, default=None, help="FSDP size (tp x fsdp = processes)")
    p.add_argument("--trainer", action="store_true", help="tp: use Trainer (refused on CPU)")
    p.add_argument("--steps", type=int, default=3)
    p.add_argument("--batch-size", type=int, default=2)
    p.add_argument("--max-length", type=int, default=32)
    p.add_argument("--model", default=None, help="model folder (default: the embedded tiny model)")
    p.add_argument("--log-dir", default=os.environ.get(LOG_DIR_ENV, "compile-logs"))
    p.add_argument("--out", default=None, help="Trainer output_dir (default: a temp folder)")
    args = p.parse_args(argv)
    world = world_size()
    try:
        tp, fsdp = layout(args.mode, args.tp_size, args.fsdp_size, world)
    except ValueError as exc:
        p.error(str(exc))
    warnings.filterwarnings("ignore", message=_FSDP_VIEW_WARNING, category=UserWarning)
    logging.getLogger("transformers.training_args").addFilter(_Drop(_NOT_AMPERE))
    model_path = args.model or str(tiny_model())
    base = Path(args.log_dir) / "compile.jsonl"
    log_path = rank_log_path(base)
    tok, model = _load_sharded(model_path, tp, fsdp)
    groups, source = _groups_of(model, tp, fsdp)
    _report(tp, fsdp, trainer=tp == 1 or args.trainer)
    if tp == 1:
        train_fsdp(args, tok, model, log_path, fsdp)
    else:
        train_tp(args, tok, model, log_path, fsdp, fsdp_shard(groups, rank()))
    import torch.distributed as dist

    if dist.is_available() and dist.is_initialized():
        dist.barrier()                # every rank's log is complete before rank 0 reads them
        if rank() == 0:
            _say(f"[rank 0] {summarise(base, world, groups, source)}")
        dist.destroy_process_group()  # a rank left with a live process group may abort at exit


if __name__ == "__main__":
    main()
