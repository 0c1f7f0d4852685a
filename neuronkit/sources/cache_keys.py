"""The cache lookups of a build and what their keys are made of.

On CPU and CUDA, torch's structured trace carries each lookup of inductor's FX graph cache and of
the AOTAutograd cache as an artifact (``fx_graph_cache_hit|miss|bypass``,
``aotautograd_cache_hit|miss|bypass``; ``cache_info`` in torch/_inductor/codecache.py and
torch/_functorch/_aot_autograd/autograd_cache.py): a JSON payload with ``key``, ``cache_state``
and ``components``, one ``"[digest] name: value"`` line per part of the key (~635 for an FX
graph: the graph's code, each example input's metadata, torch's version, every inductor setting).
:func:`lookup_of` turns one into the event's lookup (cache, key, state) and keeps the parts here,
for the recorder to write once per key (:func:`parts_of`).

On Neuron, :func:`neff_parts` reads the parts from torch-neuronx's in-memory key itself, which
holds them in readable form (see there).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from collections import OrderedDict
from typing import Any, Callable

__all__ = ["CACHE_ARTIFACTS", "digest_of", "lookup_of", "neff_lookup", "neff_parts", "parts_of",
           "persistent_reader"]

CACHE_ARTIFACTS = {f"{prefix}_cache_{state}": (cache, state)
                   for prefix, cache in (("fx_graph", "fx_graph"), ("aotautograd", "aot_autograd"))
                   for state in ("hit", "miss", "bypass")}
_KEPT = 64  # keys whose parts are kept until a recorder writes them (a few per compile)
_PARTS: OrderedDict[str, tuple[str, dict[str, tuple[str, str]]]] = OrderedDict()
_COMPONENT = re.compile(r"\[([^\]\s]{1,128})\] ([^:\n]{1,512}): (.*)", re.S)


def digest_of(text: str) -> str:
    """A digest for a part whose source gives none (the Neuron key's readable parts)."""
    return hashlib.blake2b(text.encode("utf-8", "replace"), digest_size=10).hexdigest()


def _payload(payload: Any) -> dict[str, Any]:
    if callable(payload):  # torch may hand the payload lazily
        payload = payload()
    if isinstance(payload, (str, bytes)):
        payload = json.loads(payload)
    return payload if isinstance(payload, dict) else {}


def _components(lines: Any) -> dict[str, tuple[str, str]]:
    parts: dict[str, tuple[str, str]] = {}
    for line in lines if isinstance(lines, list) else ():
        match = _COMPONENT.match(str(line))
        if match:
            parts.setdefault(match.group(2), (match.group(1)[:16], match.group(3)))  # 80 bits
    return parts


def _keep(key: str, cache: str, parts: dict[str, tuple[str, str]]) -> None:
    _PARTS[key] = (cache, parts)
    _PARTS.move_to_end(key)
    while len(_PARTS) > _KEPT:
        _PARTS.popitem(last=False)


def lookup_of(artifact: str, payload: Any,
              keep: dict[str, tuple[str, dict[str, tuple[str, str]]]] | None = None
              ) -> dict[str, Any] | None:
    """The lookup a cache artifact of the trace records (None: not a cache artifact); its key's
    parts are kept in ``keep`` (a trace file's reader), else for :func:`parts_of`."""
    if artifact not in CACHE_ARTIFACTS:
        return None
    cache, state = CACHE_ARTIFACTS[artifact]
    data = _payload(payload)
    key = data.get("key")
    lookup: dict[str, Any] = {"cache": cache, "key": str(key) if key else None, "state": state}
    if state == "bypass" and data.get("cache_bypass_reason"):
        lookup["reason"] = str(data["cache_bypass_reason"])
    parts = _components(data.get("components"))
    if lookup["key"] and parts:
        if keep is not None:
            keep[lookup["key"]] = (cache, parts)
        else:
            _keep(lookup["key"], cache, parts)
    return lookup


def parts_of(key: Any) -> tuple[str, dict[str, tuple[str, str]]] | None:
    """(cache, parts) of a key a lookup named, while kept (the last ``_KEPT`` keys)."""
    return _PARTS.get(key) if isinstance(key, str) else None


# torch-neuronx's graph key: ``<64 hex sha256 of the module and its I/O specs>_<target>_<lnc>_
# <opt level without its dash>_<args>``, args = "--model-type transformer --auto-cast=none" plus
# " " + NEURON_CC_FLAGS when set, spaces -> "_" and "=" -> "-" (core/KernelExecution.cpp:25-57
# CreateCompilerExtensionHash / GenerateCacheKey; :151-179 the graph's args and -O2 default,
# NEURON_COMPILER_OPT_LEVEL overriding; core/utils/PlatformUtils.cpp:82-92 target, and the
# logical cores NEURON_LOGICAL_NC_CONFIG overrides). The NEFF file's name, the persistent key,
# is XXH3-128 of (that key + the IR bytes): no neuronx-cc or torch-neuronx version goes into it
# (core/cache/CacheUtils.cpp:11-35).
_BASE_ARGS = "--model-type_transformer_--auto-cast-none"
_GRAPH_KEY = re.compile(r"([0-9a-f]{64})_([^_]+)_([^_]+)_([^_]+)(?:_(.*))?", re.S)


def neff_parts(key: str, env: dict[str, str] | None = None) -> dict[str, tuple[str, str]] | None:
    """The parts of a torch-neuronx graph key, readable (None: not a graph key): the graph (its
    HLO hash), target, logical cores, opt level and NEURON_CC_FLAGS (the environment's own value
    when it gives these args, else the key's text with its spaces and ``=`` restored as far as
    the key allows)."""
    match = _GRAPH_KEY.fullmatch(key)
    if match is None:
        return None
    base, target, lnc, opt, args = match.groups()
    args = args or ""
    flags: str
    if args == _BASE_ARGS:
        flags = "(unset)"
    elif args.startswith(_BASE_ARGS + "_"):
        raw = args[len(_BASE_ARGS) + 1:]
        env_flags = (os.environ if env is None else env).get("NEURON_CC_FLAGS")
        same = env_flags is not None and env_flags.replace(" ", "_").replace("=", "-") == raw
        flags = env_flags if same and env_flags is not None else raw.replace("_", " ")
    else:
        flags = args.replace("_", " ")  # not the snapshot's fixed args: shown as the key has it
    texts = {"graph": base, "target": target, "logical cores": lnc, "opt level": "-" + opt,
             "NEURON_CC_FLAGS": flags or "''"}
    return {name: (digest_of(f"{name}={text}"), text) for name, text in texts.items()}


def neff_lookup(key: str, state: str | None, persistent: Callable[[str], str | None]) -> dict[str, Any]:
    """The lookup of a NEFF build: its key, state (compiled / disk_hit / memory_hit), and its
    persistent key (the file's name) where ``persistent`` gives it; parts kept for the recorder."""
    lookup: dict[str, Any] = {"cache": "neff", "key": key, "state": state}
    try:
        pkey = persistent(key)
    except Exception:  # a broken private call must not cost the event
        pkey = None
    if pkey:
        lookup["persistent_key"] = str(pkey)
    parts = neff_parts(key)
    if parts:
        _keep(key, "neff", parts)
    return lookup


def persistent_reader(module: Any) -> Callable[[str], str | None]:
    """``key -> persistent key`` from torch-neuronx's ``_C.get_neff_info(key)``, which returns
    ``(persistent_key, neff_bytes)`` of an in-memory entry, or None (core/NeuronBindings.cpp:
    1415-1431); a version without it gives None for every key."""
    info = getattr(getattr(module, "_C", None), "get_neff_info", None)

    def read(key: str) -> str | None:
        found = info(key) if info is not None else None
        return str(found[0]) if isinstance(found, tuple) and found and found[0] else None
    return read
