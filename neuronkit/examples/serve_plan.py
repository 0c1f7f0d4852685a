"""Serve a warmed-up plan in a new process: warm up -> ship the NEFF cache -> serve.

    neuronkit warmup MODEL --buckets 64,128 --batch-sizes 1,4 --manifest warmup.json
    # ship $TORCH_NEURONX_NEFF_CACHE_DIR (default /tmp/neff_cache) with warmup.json, then:
    python -m neuronkit.examples.serve_plan --manifest warmup.json --model MODEL [--log serve.jsonl]

Loads the model (the manifest does not name it: ``--model``, default the embedded tiny model) in
the manifest's dtype on ``nk.detect()``'s device, and runs ``nk.generate`` on synthetic prompts of
every planned (batch size, bucket) at the planned ``max_new_tokens``. Dynamo traces every graph
again in a new process, so a graph budget would fail; what costs minutes on Neuron is a NEFF that
neuronx-cc builds, of a graph or of an eager op's kernel (a new eager shape). The block is held to
``max_neff_builds=0``, counted by the rule of ``nk.compile_budget(max_neff_builds=0)``
(``workloads/neff_builds.py``; the budget itself lives in ``apps``, above this layer): a NEFF
loaded from the shipped cache is free, one built (or of unknown state after the recorder's last
safe point) breaks it, graph or kernel. Off Neuron there are no NEFFs.

Exit codes: 0 the budget held, 1 exceeded, 2 bad input (manifest, model, device, log path).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any, Sequence

from neuronkit.safe import terminal_safe

__all__ = ["EXIT_BAD_INPUT", "EXIT_EXCEEDED", "EXIT_HELD", "main", "serve_plan"]

EXIT_HELD, EXIT_EXCEEDED, EXIT_BAD_INPUT = 0, 1, 2
PROG = "python -m neuronkit.examples.serve_plan"


class _BadInput(ValueError):
    """Input the serving process cannot use; exit code 2."""


def _say(text: str) -> None:
    print(terminal_safe(text), flush=True)


def _manifest(path: str) -> Any:
    """The warm-up manifest at ``path``, its plan checked; ``_BadInput`` with the reason."""
    from neuronkit.workloads.shapes import Buckets
    from neuronkit.workloads.warm_up import WarmupManifest

    if not Path(path).is_file():
        raise _BadInput(f"--manifest {path}: no such file (write one with `neuronkit warmup MODEL "
                        "--manifest PATH` or nk.warmup(...).save(PATH))")
    try:
        manifest = WarmupManifest.load(path)
        Buckets(manifest.buckets)
    except (ValueError, TypeError, UnicodeDecodeError) as exc:  # JSON errors are ValueErrors
        why = f"not valid JSON ({exc})" if isinstance(exc, json.JSONDecodeError) else str(exc)
        raise _BadInput(f"--manifest {path}: {why}") from None
    counts = [*manifest.batch_sizes, manifest.max_new_tokens]
    if not manifest.batch_sizes or any(isinstance(n, bool) or not isinstance(n, int) or n <= 0
                                       for n in counts):
        raise _BadInput(f"--manifest {path}: batch sizes {manifest.batch_sizes!r} and "
                        f"max_new_tokens {manifest.max_new_tokens!r} must be positive ints")
    return manifest


def _prompt(tokenizer: Any, shorter: int, bucket: int) -> str:
    """A synthetic prompt of ``shorter < n <= bucket`` tokens (special tokens counted)."""
    from neuronkit.examples.text import text_of_tokens

    def length(text: str) -> int:
        return len(tokenizer(text, add_special_tokens=True)["input_ids"])

    start = bucket - length("")
    for n in range(start, max(start - 8, 0), -1):  # re-tokenizing may merge a token or two
        text = text_of_tokens(tokenizer, n)
        if shorter < length(text) <= bucket:
            return text
    raise _BadInput(f"cannot build a prompt of {shorter + 1}..{bucket} tokens with this tokenizer")


def _neuronx_line() -> str:
    from neuronkit.setup.device import loaded_neuronx

    module = loaded_neuronx()
    if module is None:
        return "torch-neuronx: not loaded"
    return (f"torch-neuronx: {getattr(module, '__version__', '?')} "
            f"({getattr(module, '__file__', '?')})")


def _neff_line(events: list[Any], device: str) -> str:
    from neuronkit.workloads.neff_builds import neff_counts

    n = neff_counts(events)
    if not n.with_neff:
        where = "CPU" if device.startswith("cpu") else device
        return f"NEFF builds: none (not on Neuron: no NEFFs on {where})"
    unknown = f" ({n.unknown} of unknown state, counted as builds)" if n.unknown else ""
    if not n.kernel_events:
        return (f"NEFF builds: {n.builds}{unknown}, loaded from the NEFF cache: {n.loaded} "
                f"({n.disk_hits} from disk, {n.memory_hits} already in memory)")
    most = " (sync mode: at most)" if n.kernels_sync_mode and n.kernel_builds else ""
    return (f"NEFF builds: {n.builds}: {n.graph_builds} graph(s){unknown}, {n.kernel_builds} "
            f"eager-op kernel(s){most}; loaded from the NEFF cache: {n.loaded} graph(s) "
            f"({n.disk_hits} from disk, {n.memory_hits} already in memory), "
            f"{n.kernels_loaded} eager-op kernel(s)")


def _load(model: str | None, device: str, dtype: str) -> tuple[Any, Any]:
    from neuronkit.setup.models import load_model, load_tokenizer

    try:
        return load_model(model, device=device, dtype=dtype), load_tokenizer(model)
    except (OSError, ValueError, RuntimeError) as exc:  # not found, bad device / dtype, no Neuron
        raise _BadInput(f"cannot load the model: {exc}") from None


def _recorder(log: str | None, device: str, backend: str | None) -> Any:
    from neuronkit.log.file_lock import LogPathInUseError
    from neuronkit.recorder.recorder import CompileRecorder

    if log is not None and Path(log).is_dir():
        raise _BadInput(f"--log {log} is a folder: name a file in it")
    try:
        rec = CompileRecorder(log, device=device, backend=backend, context="serve")
    except (OSError, LogPathInUseError) as exc:
        raise _BadInput(f"--log {log}: cannot write the compile log there ({exc})") from None
    if rec.write_errors:
        raise _BadInput(f"--log {log}: cannot write the compile log there "
                        f"({rec.write_errors[0]})")
    return rec


def _serve(manifest: Any, model: Any, tokenizer: Any, rec: Any, backend: str | None) -> None:
    """Every planned (batch size, bucket) once, recorded by ``rec``."""
    from neuronkit.workloads.generate_settings import max_positions
    from neuronkit.workloads.generation import generate
    from neuronkit.workloads.shapes import Buckets

    plan = Buckets(manifest.buckets)
    most = max_positions(model)
    if most is not None and plan.max + manifest.max_new_tokens > most:
        raise _BadInput(f"bucket {plan.max} + max_new_tokens {manifest.max_new_tokens} exceeds the "
                        f"model's {most} positions: is --model the model warmed up?")
    bounds = [0, *plan.boundaries]
    prompts = {b: _prompt(tokenizer, bounds[i], b) for i, b in enumerate(plan.boundaries)}
    with rec:  # its stop() is a safe point: every NEFF state resolved before it is counted
        for size in manifest.batch_sizes:
            for bucket in plan.boundaries:
                with rec.context(f"serve: batch {size}, bucket {bucket}"):
                    result = generate(model, tokenizer, [prompts[bucket]] * size,
                                      manifest.max_new_tokens, buckets=plan, batch_size=size,
                                      recorder=rec, backend=backend)
                _say(f"  batch {size:>3}, bucket {bucket:>5}: {result.graphs} graph(s) traced")


def serve_plan(manifest_path: str, model: str | None = None, log: str | None = None,
               device: str | None = None, backend: str | None = None,
               dtype: str | None = None) -> int:
    """Serve the plan of ``manifest_path`` once, print what it cost; returns the exit code."""
    from neuronkit.setup.device import detect
    from neuronkit.workloads.generate_settings import compile_kwargs

    manifest = _manifest(manifest_path)
    report = detect()
    device = device or report.device
    same_kind = str(manifest.device).split(":")[0] == device.split(":")[0]
    backend = backend or (manifest.backend if same_kind else None)
    dtype = dtype or manifest.dtype or "bfloat16"
    _say(f"serve_plan: the plan of {manifest_path}: batch sizes {manifest.batch_sizes} x buckets "
         f"{manifest.buckets}, max_new_tokens {manifest.max_new_tokens}")
    _say(f"model: {model or 'the embedded tiny model (--model names yours)'}, dtype {dtype}")
    if report.device != "neuron":
        _say(f"no Neuron device: {report.reason}")
    if not same_kind:
        _say(f"the plan was warmed up on {manifest.device}, this process serves on {device}: "
             "expect new graphs")
    model_obj, tokenizer = _load(model, device, dtype)
    try:  # the backend nk.generate will use; an unknown name is refused here
        _, name = compile_kwargs(model_obj, True, backend, {})
    except ValueError as exc:
        raise _BadInput(f"--backend: {exc}") from None
    _say(f"device: {model_obj.device}   compile backend: {name}   {_neuronx_line()}")
    rec = _recorder(log, str(model_obj.device), name)
    _serve(manifest, model_obj, tokenizer, rec, backend)
    return _verdict(rec.events, str(model_obj.device), log)


def _verdict(events: list[Any], device: str, log: str | None = None) -> int:
    """Print what serving cost and the ``max_neff_builds=0`` verdict; returns the exit code.
    NEFFs built of graphs and of eager-op kernels both break it."""
    from neuronkit.events.event import GRAPH_KINDS
    from neuronkit.workloads.neff_builds import neff_counts, neff_lines

    graphs = sum(1 for e in events if e.kind in GRAPH_KINDS)
    _say(f"graphs traced by Dynamo in this process: {graphs} (a new process traces every graph "
         "again)")
    _say(_neff_line(events, device))
    counted = neff_counts(events)
    builds = counted.builds
    would = f"; max_graphs=0 would have failed: {graphs} graphs traced" if graphs else ""
    if log is not None:
        _say(f"compile log written to {log}")
    if builds:
        kinds = (f" ({counted.graph_builds} graph(s), {counted.kernel_builds} eager-op kernel(s))"
                 if counted.kernel_events else "")
        _say(f"budget max_neff_builds=0: EXCEEDED, {builds} NEFF build(s) in serving{kinds}:\n"
             + neff_lines(events))
        return EXIT_EXCEEDED
    _say(f"budget max_neff_builds=0: held{would}")
    return EXIT_HELD


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n\n")[0])
    parser.add_argument("--manifest", required=True, metavar="PATH",
                        help="the warm-up manifest (nk.warmup(...).save(PATH), neuronkit warmup)")
    parser.add_argument("--model", default=None, metavar="PATH",
                        help="the model warmed up (default: the embedded tiny model)")
    parser.add_argument("--log", default=None, metavar="PATH",
                        help="write the serving process's compile log (JSONL) here")
    parser.add_argument("--device", default=None, help="neuron, cuda or cpu (default: detected)")
    parser.add_argument("--backend", default=None,
                        help="compile backend (default: the manifest's on its device kind)")
    parser.add_argument("--dtype", default=None, help="model dtype (default: the manifest's)")
    args = parser.parse_args(argv)
    try:
        return serve_plan(args.manifest, model=args.model, log=args.log, device=args.device,
                          backend=args.backend, dtype=args.dtype)
    except _BadInput as exc:
        print(terminal_safe(f"{PROG}: error: {exc}"), file=sys.stderr)
        return EXIT_BAD_INPUT


if __name__ == "__main__":
    sys.exit(main())
