"""Which parts of a cache key differ between two builds of one graph, in words.

An event names its cache lookups (``CompileEvent.cache_key``); a log keeps what each key is made
of (``log.key_parts``). A graph was BUILT when its FX graph lookup missed or was bypassed or its
NEFF was compiled, LOADED when the FX graph cache hit (or AOTAutograd's) or the NEFF came from
the disk or memory cache, UNKNOWN without lookups (backend eager and aot_eager cache nothing; a
log from before neuronkit recorded them; a TORCH_TRACE folder).

    explain(a_log, b_log, a_event, b_event, names=("A", "B")).words
    # ("NEURON_CC_FLAGS '-O1' -> '-O2'",) or ("input 0: float32 4x8 -> bfloat16 4x8",)
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Mapping

from neuronkit.advice.excerpts import excerpt
from neuronkit.events.event import CompileEvent
from neuronkit.events.facts import NEURONX_FIELD
from neuronkit.log.compile_log import CompileLog
from neuronkit.log.key_parts import KeyParts

__all__ = ["BUILT", "LOADED", "UNKNOWN", "KeyVerdict", "build_state", "explain", "lookups",
           "no_lookups_why", "neff_version_note", "part_words"]

BUILT, LOADED, UNKNOWN = "built", "loaded", "unknown"
VALUE_CHARS = 60  # a part's value in words (a flag string, a config value) is shortened to this
_CACHES = ("neff", "fx_graph", "aot_autograd")  # compared in this order; words said once
_UNCACHED_BACKENDS = ("eager", "aot_eager")  # Dynamo backends that build nothing to cache
_COMPILER_FIELDS = ("neuronx_cc", "neuronx-cc", "neuronxcc")  # a header's neuronx-cc version
_DTYPE = re.compile(r"dtype=torch\.(\w+)")
_SHAPE = re.compile(r"shape=torch\.Size\(\[([^\]]*)\]\)")
_INPUT = re.compile(r"^example_inputs\[(\d+)\]$")
_CONFIG = re.compile(r"^(inductor_config(?:_comms)?|fx_kwargs)\[(.+)\]$")
_CONFIG_WORDS = {"inductor_config": "inductor config", "inductor_config_comms":
                 "inductor config (comms)", "fx_kwargs": "compile option"}
_NEFF_WORDS = {"logical cores": "logical cores", "opt level": "opt level", "target": "target"}


def lookups(e: CompileEvent) -> list[dict[str, Any]]:
    """The event's cache lookups that are well formed (a log is untrusted input)."""
    found = e.cache_key if isinstance(e.cache_key, list) else []
    return [d for d in found if isinstance(d, dict) and d.get("cache") in _CACHES
            and isinstance(d.get("state"), str) and (d.get("key") is None or isinstance(d["key"], str))]


def build_state(e: CompileEvent) -> str:
    """BUILT, LOADED or UNKNOWN (see the module)."""
    states = [(d["cache"], d["state"]) for d in lookups(e)]
    if any((c == "fx_graph" and s in ("miss", "bypass")) or (c == "neff" and s == "compiled")
           for c, s in states):
        return BUILT
    if any((c in ("fx_graph", "aot_autograd") and s == "hit") or
           (c == "neff" and s in ("disk_hit", "memory_hit")) for c, s in states):
        return LOADED
    return UNKNOWN


@dataclass(frozen=True)
class KeyVerdict:
    """What differs between two builds' keys (``words``), or why it cannot tell (``unknown``)."""

    words: tuple[str, ...] = ()
    unknown: str = ""


def _short(value: str | None) -> str:
    if value is None:
        return "(not in the log)"
    return excerpt(" ".join(value.split()), VALUE_CHARS)


def _quoted(value: str | None) -> str:
    if value is None or value == "(unset)":
        return _short(value) if value is None else value
    return "'" + _short(value) + "'"


def _tensor(text: str | None) -> tuple[str, str] | None:
    """(dtype, ``4x8``) of a ``TensorMetadata(dtype=torch.float32, shape=torch.Size([4, 8]), ...)``."""
    if not text:
        return None
    dtype, shape = _DTYPE.search(text[:400]), _SHAPE.search(text[:400])
    if dtype is None or shape is None:
        return None
    dims = [d.strip() for d in shape.group(1).split(",") if d.strip()]
    return dtype.group(1), "x".join(dims) or "scalar"


def _input_name(e: CompileEvent | None, index: int, dims: str) -> str | None:
    """The event's name for input ``index`` where its recorded inputs line up with the key's."""
    shapes = e.input_shapes if e is not None and isinstance(e.input_shapes, dict) else {}
    items = list(shapes.items())
    if index >= len(items):
        return None
    name, shape = items[index]
    seen = "x".join(str(d) for d in shape) if isinstance(shape, list) else None
    return str(name) if seen == dims or (seen == "" and dims == "scalar") else None


def _input_words(index: int, a: str | None, b: str | None, events: tuple[CompileEvent | None, ...]
                 ) -> str:
    ta, tb = _tensor(a), _tensor(b)
    if ta is None or tb is None:
        return f"input {index}: {_short(a)} -> {_short(b)}"
    name = _input_name(events[1], index, tb[1]) or _input_name(events[0], index, ta[1])
    label = name or f"input {index}"
    if ta[0] == tb[0]:
        return f"the graph itself: {label} {ta[1]} -> {tb[1]}"
    return f"{label}: {ta[0]} {ta[1]} -> {tb[0]} {tb[1]}"


def _code_words(a: str | None, b: str | None) -> str:
    lines_a, lines_b = (a or "").splitlines(), (b or "").splitlines()
    for la, lb in zip(lines_a, lines_b, strict=False):
        if la != lb:
            return f"the graph's code changed, first at: {_short(lb.strip() or la.strip())}"
    if len(lines_a) != len(lines_b) and (a is not None and b is not None):
        longer = lines_b if len(lines_b) > len(lines_a) else lines_a
        return f"the graph's code changed, first at: {_short(longer[min(len(lines_a), len(lines_b))])}"
    return "the graph's code changed"


def part_words(cache: str, name: str, a: str | None, b: str | None,
               headers: tuple[Mapping[str, Any], Mapping[str, Any]] = ({}, {}),
               events: tuple[CompileEvent | None, ...] = (None, None)) -> str:
    """One differing part of a key in words; ``a``/``b``: its text in each run (None: not in
    the log); ``headers``: the logs' headers (torch's version); ``events``: the two builds."""
    if cache == "neff":
        # the parts of torch-neuronx's key: <HLO hash>_<target>_<lnc>_<opt>_<flags>
        # (core/KernelExecution.cpp:25-57,151-179 in the torch-neuronx snapshot)
        if name == "graph":
            return "graph (HLO) changed"
        if name == "NEURON_CC_FLAGS":
            return f"NEURON_CC_FLAGS {_quoted(a)} -> {_quoted(b)}"
        if name in _NEFF_WORDS:
            return f"{_NEFF_WORDS[name]} {_short(a)} -> {_short(b)}"
    index = _INPUT.match(name)
    if index:
        return _input_words(int(index.group(1)), a, b, events)
    if name == "gm":
        return _code_words(a, b)
    if name == "torch_version":  # a sha256 of torch.__version__ and inductor's source files
        va, vb = (str(h.get("torch") or "?") for h in headers)
        if va != vb:
            return f"torch version: {_short(va)} -> {_short(vb)}"
        return f"torch's source changed (its hash), version {_short(vb)} both"
    if name.startswith("system_info["):
        return "system info changed (device, CUDA/HIP or Triton version)"
    config = _CONFIG.match(name)
    if config:
        return f"{_CONFIG_WORDS[config.group(1)]}: {config.group(2)} {_short(a)} -> {_short(b)}"
    return f"{_short(name)}: {_short(a)} -> {_short(b)}"


def _first(found: list[dict[str, Any]], cache: str) -> dict[str, Any] | None:
    return next((d for d in found if d["cache"] == cache), None)


def _parts_words(cache: str, ka: str, kb: str, stores: tuple[KeyParts, KeyParts],
                 headers: tuple[Mapping[str, Any], Mapping[str, Any]],
                 events: tuple[CompileEvent, CompileEvent]) -> list[str] | None:
    pa, pb = stores[0].parts(ka), stores[1].parts(kb)
    if pa is None or pb is None:
        return None
    words = []
    for name in dict.fromkeys([*pa, *pb]):
        if pa.get(name) != pb.get(name):
            text_a = stores[0].value(pa[name]) if name in pa else None
            text_b = stores[1].value(pb[name]) if name in pb else None
            words.append(part_words(cache, name, text_a, text_b, headers, events))
    return words


def explain(a_log: CompileLog, b_log: CompileLog, a: CompileEvent, b: CompileEvent,
            names: tuple[str, str] = ("A", "B")) -> KeyVerdict:
    """Why ``b`` (run B's build) did not reuse ``a`` (run A's build of the same graph, or the
    one closest to it): the parts of their keys that differ, in words."""
    la, lb = lookups(a), lookups(b)
    if not la or not lb:
        return KeyVerdict(unknown="no cache lookups recorded")
    words: list[str] = []
    same: list[str] = []
    unknown = ""
    for cache in _CACHES:
        da, db = _first(la, cache), _first(lb, cache)
        if da is None or db is None:
            continue
        if db["state"] == "bypass":
            words.append(f"{cache} cache bypassed in {names[1]}: {_short(str(db.get('reason')))}")
            continue
        ka, kb = da.get("key"), db.get("key")
        if not ka or not kb:
            continue
        if ka == kb:
            same.append(cache)
            continue
        found = _parts_words(cache, ka, kb, (a_log.key_parts, b_log.key_parts),
                             (a_log.header, b_log.header), (a, b))
        if found is None:
            unknown = "the keys' parts are not in the logs"
        else:
            words += found
    if not words and same and build_state(b) == BUILT and build_state(a) == LOADED:
        words.append(f"the same {same[0]} key: {names[1]}'s cache did not hold it (another cache "
                     "folder, or one cleared)")
    return KeyVerdict(tuple(dict.fromkeys(words)), "" if words else unknown)


def no_lookups_why(log: CompileLog, events: list[CompileEvent]) -> str:
    """Why a log records no cache lookups, in words."""
    backends = {str(e.backend) for e in events if e.backend} or {str(log.header.get("backend") or "")}
    uncached = sorted(b for b in backends if b in _UNCACHED_BACKENDS)
    if uncached and len(uncached) == len(backends):
        return f"backend {', '.join(uncached)} caches nothing"
    return "a log from before neuronkit recorded them, or a TORCH_TRACE folder"


def neff_version_note(a_log: CompileLog, b_log: CompileLog, b_loaded_neffs: int,
                      names: tuple[str, str]) -> str:
    """A warning when B loaded NEFFs while its torch-neuronx or neuronx-cc version differs from
    A's: neither version is part of the NEFF key, so a NEFF built by the other version loads."""
    # the persistent key hashes only the in-memory key and the HLO bytes
    # (core/cache/CacheUtils.cpp:11-35); the in-memory key is <HLO hash>_<target>_<lnc>_<opt>_
    # <flags> (core/KernelExecution.cpp:25-57,151-179): no compiler or torch-neuronx version
    if not b_loaded_neffs:
        return ""
    changed = []
    for label, fields in (("torch-neuronx", (NEURONX_FIELD,)), ("neuronx-cc", _COMPILER_FIELDS)):
        va = next((a_log.header.get(f) for f in fields if a_log.header.get(f)), None)
        vb = next((b_log.header.get(f) for f in fields if b_log.header.get(f)), None)
        if va and vb and va != vb:
            changed.append(f"{label} {_short(str(va))} -> {_short(str(vb))}")
    if not changed:
        return ""
    return (f"{names[1]} loaded {b_loaded_neffs} NEFF(s) from the cache although "
            f"{' and '.join(changed)}: the NEFF key holds no compiler or torch-neuronx version, so "
            "a NEFF built by the other version loads; clear the cache to rebuild with this one")
