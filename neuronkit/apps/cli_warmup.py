"""``neuronkit warmup MODEL``: compile every graph of a serving plan before serving, with a
progress bar, and write the manifest of what was compiled. ``neuronkit warmup --manifest M -j N``
(no MODEL): build the graphs of a run that ``neuronkit record`` recorded (its ``manifest.json``)
in N processes sharing one cache (``apps/precompile.py``)."""
from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from neuronkit.apps.cli_common import cannot_write, int_list, positive_int, write_output
from neuronkit.safe import terminal_safe

__all__ = ["add_warmup_command", "cmd_warmup"]


def cmd_precompile(args: argparse.Namespace) -> int:
    """``warmup --manifest M -j N [--cache DIR]``: a line per shard, then the totals; 1 if a
    shard failed (its stderr's tail shown)."""
    from neuronkit.apps.precompile import precompile
    from neuronkit.workloads.run_manifest import load_manifest

    if args.manifest is None:
        raise ValueError("name a MODEL (a serving warm-up), or --manifest RUN/manifest.json "
                         "(the graphs of a run neuronkit record recorded)")
    manifest = load_manifest(args.manifest)
    counts = manifest.counts
    print(terminal_safe(f"warm-up of {counts['graphs']} graph(s) ({counts['forward']} forward, "
                        f"{counts['backward']} backward) of `{' '.join(manifest.command)}` in "
                        f"{args.jobs} process(es); by the manifest, forward graphs per shard: "
                        f"{manifest.shards(args.jobs)} (a backward graph is built with its "
                        "forward graph)"), flush=True)
    result = precompile(manifest, args.jobs, cache=None if args.cache is None else Path(args.cache),
                        on_event=lambda line: print(terminal_safe(line), flush=True))
    for run in result.shards:
        if not run.ok:
            print(terminal_safe(f"shard {run.index + 1}/{run.shards} stderr (last lines):\n"
                                f"{run.stderr_tail}"), file=sys.stderr)
    print(terminal_safe(f"built {result.built} of the manifest's {counts['forward']} forward "
                        f"graph(s) in {result.seconds:.1f} s with "
                        f"{len(result.shards)} process(es)"
                        + ("" if result.ok else f"; {sum(not r.ok for r in result.shards)} "
                                               "shard(s) failed")))
    return 0 if result.ok else 1


def cmd_warmup(args: argparse.Namespace) -> int:
    from statistics import fmean

    from tqdm import tqdm

    from neuronkit.recorder.recorder import CompileRecorder
    from neuronkit.setup.models import load_model, load_tokenizer
    from neuronkit.workloads.warm_up import WarmupStep, warmup

    if args.model is None:
        return cmd_precompile(args)
    if args.jobs != 1 or args.cache is not None:
        raise ValueError("-j and --cache go with --manifest M and no MODEL")
    for option, path in (("--manifest", args.manifest), ("--log", args.log)):
        if path is not None and Path(path).is_dir():
            raise ValueError(f"{option} {path} is a folder: name a file in it")
        if path is not None and Path(path).exists() and not Path(path).is_file():
            raise ValueError(f"{option} {path} is not a file (a device or a pipe): name a file")
    model = load_model(args.model, device=args.device, dtype=args.dtype)
    tokenizer = load_tokenizer(args.model)
    try:
        rec = CompileRecorder(log_path=args.log, device=str(model.device), context="warmup")
    except OSError as exc:
        raise cannot_write("compile log", args.log, exc) from exc
    if rec.write_errors:  # the header: said before compiling anything
        raise cannot_write("compile log", args.log, rec.write_errors[0])
    total = len(set(args.buckets)) * len(set(args.batch_sizes))
    bar = tqdm(total=total, unit="graph", desc="warm-up", file=sys.stderr)
    costs: list[float] = []

    def step(progress: WarmupStep) -> None:
        graph = progress.graph
        costs.append(float(graph["wall_s"]))
        left = fmean(costs) * (progress.total - progress.done)
        bar.set_postfix_str(f"batch {graph['batch_size']}, bucket {graph['bucket']}: "
                            f"{graph['compile_s']:.1f} s compile, ETA {left:.0f} s")
        bar.update(1)

    with rec:
        try:
            manifest = warmup(model, tokenizer, args.buckets, batch_sizes=args.batch_sizes,
                              max_new_tokens=args.max_new_tokens, recorder=rec,
                              backend=args.backend, on_step=step)
        finally:
            bar.close()
    print(terminal_safe(str(manifest)))
    for graph in manifest.graphs:
        neff = "" if graph["neff_compile_s"] is None else (
            f", NEFF {graph['neff_compile_s']:.1f} s ({graph['neff_cache']})")
        print(f"  batch {graph['batch_size']:>3}, bucket {graph['bucket']:>5}, cache "
              f"{graph['cache_len']:>5}: {graph['graphs']} compile(s), {graph['compile_s']:.2f} s"
              f"{neff}")
    if args.manifest is not None:
        write_output("manifest", Path(args.manifest), lambda: manifest.save(args.manifest), sys.stdout)
    if rec.write_errors:  # after the manifest: what can be kept is kept
        raise cannot_write("compile log", args.log, rec.write_errors[0])
    if args.log is not None:
        print(terminal_safe(f"compile log written to {args.log}"))
    return 0


def add_warmup_command(sub: Any) -> None:
    p = sub.add_parser("warmup", help="compile every graph of a serving plan before serving",
                       description="Compile the decode graphs (and on Neuron the prefill kernels) "
                                   "of buckets x batch sizes at one max_new_tokens, then write a "
                                   "manifest of what was compiled. With no MODEL, --manifest M -j N "
                                   "builds the graphs of a recorded run (the manifest.json of "
                                   "neuronkit record) in N processes sharing one cache.")
    p.add_argument("model", metavar="MODEL", nargs="?", default=None,
                   help="model name or folder (leave out with --manifest RUN_MANIFEST -j N)")
    p.add_argument("--buckets", type=int_list, default=[64, 128, 256], metavar="N,N,...",
                   help="prompt-length buckets (default 64,128,256)")
    p.add_argument("--batch-sizes", type=int_list, default=[1, 4], metavar="N,N,...",
                   help="batch sizes to serve (default 1,4)")
    p.add_argument("--max-new-tokens", type=positive_int, default=128, metavar="N",
                   help="new tokens per request (default 128; requests in its power-of-two "
                        "band share the graphs)")
    p.add_argument("--device", default=None, help="neuron, cuda or cpu (default: detected)")
    p.add_argument("--dtype", default="bfloat16", help="model dtype (default bfloat16)")
    p.add_argument("--backend", default=None,
                   help="compile backend off Neuron (default: $NEURONKIT_CPU_BACKEND or eager)")
    p.add_argument("--manifest", default=None, metavar="PATH",
                   help="with MODEL: write the warm-up manifest (JSON) here; without: the run "
                        "manifest to warm up (a run folder's manifest.json)")
    p.add_argument("-j", "--jobs", type=positive_int, default=1, metavar="N",
                   help="without MODEL: processes building the run's graphs at once (default 1)")
    p.add_argument("--cache", default=None, metavar="DIR",
                   help="without MODEL: the cache they share (inductor's off Neuron, the NEFF "
                        "cache on Neuron; default: what the environment names)")
    p.add_argument("--log", default=None, metavar="PATH", help="write the compile log (JSONL) here")
    p.set_defaults(func=cmd_warmup)
