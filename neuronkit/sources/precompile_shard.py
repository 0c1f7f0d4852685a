"""One shard of ``neuronkit warmup --manifest M -j N``: with ``NEURONKIT_PRECOMPILE=i/N`` this
process runs its job unchanged, but builds only the graphs shard ``i`` owns with the job's own
backend; Dynamo gets ``gm.forward`` for the others, which then run eagerly. N processes together
build every graph once, on the job's own code path, so each cache key is the real run's.

Which shard owns a graph: :func:`shard_key` of its frame (code name, file name and first line,
as torch saw them: an event's ``metrics["frame"]``) and its inputs (name, shape, dtype; module
parameters and buffers left out, as the recorder leaves them out of ``input_shapes``), mod N
(:func:`shard_of`). The run manifest shows the same rule per graph.

The hook wraps ``torch._dynamo.output_graph.OutputGraph.call_user_compiler``: every backend
(a string looked up in ``torch._dynamo.backends.registry``, torch.compile's inductor wrapper,
which calls ``torch._inductor.compile_fx.compile_fx`` from there, a callable, torch-neuronx's
``neuron``) is called at that one point, with the graph's frame at hand (``self.root_tx.f_code``).
On Neuron the backend is AOTAutograd-based (torch-neuronx snapshot
``neuron_dynamo_backend/backend.py:300-305``), so the backward graph of an owned graph is built in
the owning shard too, at its first ``.backward()``; an unowned graph's backward runs eagerly.
"""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import time
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from neuronkit.sources.torch_text import input_name

__all__ = ["ENV", "REPORT_GLOB", "ShardState", "install_shard", "install_shard_from_env",
           "parse_shard", "remove_shard", "shard_key", "shard_of"]

ENV = "NEURONKIT_PRECOMPILE"
REPORT_GLOB = "precompile-shard.*.json"  # what each shard process writes into $NEURONKIT_RECORD
_state: ShardState | None = None


def parse_shard(text: str) -> tuple[int, int]:
    """``"i/N"`` -> ``(i, N)``, with ``0 <= i < N``; ValueError saying what is wrong otherwise."""
    index, sep, total = text.strip().partition("/")
    if not sep or not index.isdigit() or not total.isdigit():
        raise ValueError(f"{ENV}={text!r}: expected i/N, e.g. 0/4")
    i, n = int(index), int(total)
    if n < 1 or i >= n:
        raise ValueError(f"{ENV}={text!r}: shard i must be in 0..N-1 and N >= 1")
    return i, n


def shard_key(name: str, location: str, shapes: Mapping[str, Sequence[Any]],
              dtypes: Mapping[str, str]) -> str:
    """A stable hash of a graph's frame and inputs (16 hex digits). Only the file's name and the
    line count, so two checkouts agree; a clash only puts two graphs in one shard."""
    file, _, line = location.rpartition(":")
    inputs = sorted([n, [str(d) for d in dims], str(dtypes.get(n, ""))] for n, dims in shapes.items())
    text = json.dumps([name, f"{Path(file).name}:{line}", inputs], separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def shard_of(key: str, shards: int) -> int:
    """The shard that builds the graph of ``key`` among ``shards``."""
    return int(key, 16) % shards


class ShardState:
    """What this process's shard owns and has done: the keys built here, the graphs left."""

    def __init__(self, index: int, shards: int) -> None:
        self.index, self.shards = index, shards
        self.built: list[str] = []
        self.skipped: list[str] = []
        self.build_s = 0.0

    def owns(self, key: str) -> bool:
        return shard_of(key, self.shards) == self.index

    def report(self) -> dict[str, Any]:
        return {"shard": self.index, "shards": self.shards, "pid": os.getpid(),
                "built": self.built, "skipped": self.skipped, "build_s": round(self.build_s, 6)}


def _source_text(source: Any) -> str:
    """A Dynamo source as its trace names it (``L['x']``): ``name()``, a property in some torch."""
    if source is None:
        return ""
    name = getattr(source, "name", None)
    name = name() if callable(name) else name
    return name if isinstance(name, str) else str(source)


def graph_key(gm: Any, example_inputs: Sequence[Any], code: Any) -> str:
    """:func:`shard_key` of a graph Dynamo is about to hand to the backend."""
    import torch

    shapes: dict[str, list[Any]] = {}
    dtypes: dict[str, str] = {}
    placeholders = [n for n in gm.graph.nodes if n.op == "placeholder"]
    for node, value in zip(placeholders, example_inputs, strict=False):
        source = _source_text(getattr(node.meta.get("grapharg"), "source", None)
                              or getattr(node, "_dynamo_source", None))
        if not isinstance(value, torch.Tensor) or isinstance(value, torch.nn.Parameter) \
                or "._parameters[" in source or "._buffers[" in source or not source:
            continue
        shown = node.meta.get("example_value", value)
        shape = getattr(shown, "shape", value.shape)
        shapes[input_name(source)] = [int(d) if isinstance(d, int) else str(d) for d in shape]
        dtypes[input_name(source)] = str(value.dtype).removeprefix("torch.")
    name = getattr(code, "co_name", "")
    location = f"{getattr(code, 'co_filename', '')}:{getattr(code, 'co_firstlineno', 0)}"
    return shard_key(name, location, shapes, dtypes)


def install_shard(index: int, shards: int) -> ShardState:
    """Make this process shard ``index`` of ``shards`` (once; a second call returns the first)."""
    global _state
    if _state is not None:
        return _state
    from torch._dynamo.output_graph import OutputGraph

    state = ShardState(index, shards)
    original = OutputGraph.call_user_compiler

    def call_user_compiler(self: Any, gm: Any, example_inputs: Any) -> Any:
        key = graph_key(gm, example_inputs, getattr(getattr(self, "root_tx", None), "f_code", None))
        if not state.owns(key):
            state.skipped.append(key)
            return gm.forward  # another shard builds it: this one runs it eagerly
        started = time.perf_counter()
        try:
            return original(self, gm, example_inputs)
        finally:
            state.build_s += time.perf_counter() - started
            state.built.append(key)

    call_user_compiler.__wrapped__ = original  # type: ignore[attr-defined]
    OutputGraph.call_user_compiler = call_user_compiler
    _state = state
    return state


def remove_shard() -> None:
    """Undo :func:`install_shard` (tests): Dynamo hands every graph to the backend again."""
    global _state
    from torch._dynamo.output_graph import OutputGraph

    wrapped = getattr(OutputGraph.call_user_compiler, "__wrapped__", None)
    if _state is not None and wrapped is not None:
        OutputGraph.call_user_compiler = wrapped
    _state = None


def _write_report(state: ShardState, folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"precompile-shard.{os.getpid()}.json").write_text(json.dumps(state.report()))
    except OSError:
        pass  # the warm-up counts no graphs for this process and says so


def install_shard_from_env() -> bool:
    """With ``$NEURONKIT_PRECOMPILE`` set (``i/N``): this process becomes that shard, and at exit
    writes what it built into ``$NEURONKIT_RECORD``. Whether it did (a bad value raises)."""
    text = os.environ.get(ENV, "")
    if not text:
        return False
    if _state is not None:
        return True
    state = install_shard(*parse_shard(text))
    folder = os.environ.get("NEURONKIT_RECORD", "")
    if folder:
        atexit.register(_write_report, state, Path(folder))
    return True
