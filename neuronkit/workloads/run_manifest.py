"""The manifest of a recorded run (``manifest.json`` in ``neuronkit record``'s run folder): the
command, its folder, the backend, the device, and every graph the run built (function, place,
forward/backward, input shapes and dtypes, phase, context, cache keys), so that
``neuronkit warmup --manifest M -j N`` can build them all ahead of the next run.

    m = build_manifest(open_log("neuronkit-logs/20261206-101500"), ["python", "train.py"], "/job")
    m.save("manifest.json"); load_manifest("manifest.json").graphs[0]["shard_key"]

A loaded manifest is untrusted input: :func:`load_manifest` checks every field it uses and
raises :class:`ManifestError` saying which is wrong.
"""
from __future__ import annotations

import json
import os
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from neuronkit.events.event import BUILD_KINDS, CompileEvent
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.open import open_log
from neuronkit.sources.precompile_shard import shard_key, shard_of

__all__ = ["FILE_NAME", "FORMAT", "VERSION", "ManifestError", "RunManifest", "build_manifest",
           "load_manifest", "write_run_manifest"]

FORMAT, VERSION, FILE_NAME = "neuronkit-run-manifest", 1, "manifest.json"
MAX_BYTES = 64 * 1024 * 1024  # a manifest bigger than this is refused unread
_PHASE = re.compile(r"\[(prefill|decode)\]$")
_TEXT_FIELDS = ("function", "location", "kind", "context", "shard_key")


class ManifestError(ValueError):
    """A manifest file that cannot be used: the message says which field and why."""


@dataclass
class RunManifest:
    """A run's command and graphs (see the module); ``graphs`` are plain dicts, as saved."""

    command: list[str]
    cwd: str
    backends: list[str] = field(default_factory=list)
    device: str = ""
    as_neuron: dict[str, Any] | None = None
    graphs: list[dict[str, Any]] = field(default_factory=list)

    @property
    def counts(self) -> dict[str, int]:
        kinds = Counter(g["kind"] for g in self.graphs)
        return {"graphs": len(self.graphs), "forward": kinds["forward"],
                "backward": kinds["backward"],
                "functions": len({(g["function"], g["location"]) for g in self.graphs})}

    def shards(self, n: int) -> list[int]:
        """How many forward graphs each of ``n`` shards builds (the rule the warm-up applies; a
        backward graph is built with its forward graph)."""
        owned = [0] * n
        for g in self.graphs:
            if g["kind"] == "forward":
                owned[shard_of(g["shard_key"], n)] += 1
        return owned

    def to_dict(self) -> dict[str, Any]:
        return {"format": FORMAT, "version": VERSION, "command": self.command, "cwd": self.cwd,
                "backends": self.backends, "device": self.device, "as_neuron": self.as_neuron,
                "counts": self.counts, "graphs": self.graphs}

    def save(self, path: str | os.PathLike[str]) -> Path:
        path = Path(path)
        path.write_text(json.dumps(self.to_dict(), indent=1) + "\n")
        return path


def _graph(event: CompileEvent, forward_keys: dict[tuple[int, str], str]) -> dict[str, Any]:
    metrics = event.metrics if isinstance(event.metrics, dict) else {}
    frame: dict[str, Any] = metrics.get("frame") or {}
    dtypes: dict[str, str] = metrics.get("input_dtypes") or {}
    frame, dtypes = (frame if isinstance(frame, dict) else {}), (dtypes if isinstance(dtypes, dict) else {})
    lookups = [c for c in event.cache_key if isinstance(c, dict)]
    neff = [str(c.get("key")) for c in lookups if c.get("cache") == "neff"]
    neff += [str(k) for k in metrics.get("neff_keys") or [] if str(k) not in neff]
    key = shard_key(str(frame.get("name") or event.function),
                    str(frame.get("location") or event.location), event.input_shapes, dtypes)
    if event.kind == "backward":  # built by the shard that built its forward graph
        key = forward_keys.get((event.rank, event.compile_id), key)
    phase = _PHASE.search(event.function)
    return {"function": event.function, "location": event.location,
            "kind": "backward" if event.kind == "backward" else "forward",
            "input_shapes": dict(event.input_shapes), "input_dtypes": dict(dtypes),
            "phase": phase.group(1) if phase else None, "context": event.context,
            "rank": event.rank, "backend": event.backend, "shard_key": key,
            "fx_keys": [str(c.get("key")) for c in lookups if c.get("cache") == "fx_graph"],
            "neff_keys": neff}


def build_manifest(log: CompileLog, command: list[str], cwd: str) -> RunManifest:
    """The manifest of a run's log: every graph it built (first, recompile, backward), in order."""
    events = [e for e in log.events if e.kind in BUILD_KINDS]
    forward_keys: dict[tuple[int, str], str] = {}
    graphs = []
    for event in events:
        graph = _graph(event, forward_keys)
        if event.kind != "backward":
            forward_keys[(event.rank, event.compile_id)] = graph["shard_key"]
        graphs.append(graph)
    header = log.header if isinstance(log.header, dict) else {}
    backends = sorted({e.backend for e in events if e.backend} or
                      ({str(header["backend"])} if header.get("backend") else set()))
    devices = [e.device for e in events if e.device] or [str(header.get("device") or "")]
    as_neuron = header.get("as_neuron") if isinstance(header.get("as_neuron"), dict) else None
    return RunManifest([str(a) for a in command], str(cwd), backends, devices[0], as_neuron, graphs)


def write_run_manifest(run_dir: str | os.PathLike[str], command: list[str]) -> Path:
    """``manifest.json`` in ``run_dir`` from its logs; the command ran in this folder
    (``neuronkit record`` calls this after the command ends)."""
    run_dir = Path(run_dir)
    return build_manifest(open_log(run_dir), command, os.getcwd()).save(run_dir / FILE_NAME)


def _check(ok: bool, what: str) -> None:
    if not ok:
        raise ManifestError(what)


def _check_graph(i: int, g: Any) -> dict[str, Any]:
    _check(isinstance(g, dict), f"graphs[{i}] is not an object")
    for name in _TEXT_FIELDS:
        _check(isinstance(g.get(name), str), f"graphs[{i}].{name} is missing or not text")
    _check(g["kind"] in ("forward", "backward"), f"graphs[{i}].kind is {g['kind']!r}, "
                                                 "not forward or backward")
    _check(re.fullmatch(r"[0-9a-f]{16}", g["shard_key"]) is not None,
           f"graphs[{i}].shard_key is not 16 hex digits")
    shapes = g.get("input_shapes")
    _check(isinstance(shapes, dict) and all(
        isinstance(v, list) and all(isinstance(d, (int, str)) and not isinstance(d, bool) for d in v)
        for v in shapes.values()), f"graphs[{i}].input_shapes is not {{name: [dims]}}")
    for name in ("input_dtypes",):
        _check(isinstance(g.get(name, {}), dict), f"graphs[{i}].{name} is not an object")
    for name in ("fx_keys", "neff_keys"):
        _check(isinstance(g.get(name, []), list) and all(isinstance(k, str) for k in g.get(name, [])),
               f"graphs[{i}].{name} is not a list of text")
    return g


def load_manifest(path: str | os.PathLike[str]) -> RunManifest:
    """A saved manifest, every field it uses checked (:class:`ManifestError` if not usable)."""
    path = Path(path)
    if path.is_dir():
        path = path / FILE_NAME
    try:
        _check(path.stat().st_size <= MAX_BYTES, f"{path} is over {MAX_BYTES} bytes")
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise ManifestError(f"cannot read the manifest {path}: {exc}") from exc
    except json.JSONDecodeError as exc:
        raise ManifestError(f"{path} is not JSON: {exc}") from exc
    _check(isinstance(data, dict) and data.get("format") == FORMAT,
           f"{path} is not a run manifest (format {FORMAT!r}): a serving manifest of "
           "`neuronkit warmup MODEL --manifest` cannot be warmed up this way")
    _check(data.get("version") == VERSION, f"{path}: manifest version {data.get('version')!r}; "
                                           f"this neuronkit reads version {VERSION}")
    command = data.get("command")
    _check(isinstance(command, list) and bool(command) and all(isinstance(a, str) for a in command),
           f"{path}: command is not a non-empty list of text")
    _check(isinstance(data.get("cwd"), str) and bool(data["cwd"]), f"{path}: cwd is not text")
    backends, graphs = data.get("backends", []), data.get("graphs")
    _check(isinstance(backends, list) and all(isinstance(b, str) for b in backends),
           f"{path}: backends is not a list of text")
    _check(isinstance(graphs, list), f"{path}: graphs is not a list")
    as_neuron = data.get("as_neuron")
    _check(as_neuron is None or isinstance(as_neuron, dict), f"{path}: as_neuron is not an object")
    return RunManifest(command, data["cwd"], backends, str(data.get("device") or ""), as_neuron,
                       [_check_graph(i, g) for i, g in enumerate(graphs)])
