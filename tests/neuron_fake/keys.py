"""Cache-key formats of native torch-neuronx (snapshot 98154b86).

- Eager Python key: ``torch_neuronx/kernels/base.py:103-160`` (``get_cache_key``) plus
  ``python_ops/processors/argument_processor.py:215-237`` (static kwargs), e.g.
  ``aten::add.Tensor_t0_(2, 3)_torch.float32_t1_(2, 3)_torch.float32``.
- C++ suffix ``_<target>_<lnc>_<opt without dash>_<args>`` with spaces -> ``_`` and ``=`` -> ``-``
  (``csrc/core/KernelExecution.cpp:25-57``); eager ``-O1`` (``:77-83``), graphs ``-O2``
  (``:163-169``), both overridable by ``NEURON_COMPILER_OPT_LEVEL``; args
  ``--model-type transformer --auto-cast=none`` plus ``" " + NEURON_CC_FLAGS`` when that is
  *set* (an empty value still adds a trailing ``_``) (``:65-75,151-161``).
- Target and LNC from the instance type (``csrc/core/utils/PlatformUtils.cpp:27-31,84-92``);
  ``NEURON_LOGICAL_NC_CONFIG`` overrides the LNC.
- Graph base key: 64 hex chars of sha256 (``neuron_dynamo_backend/utils/stablehlo_utils.py:14-44``);
  the fake hashes the FX code and I/O specs instead of StableHLO text.
- Persistent key: 32 hex chars of XXH3-128 over (in-memory key + IR bytes)
  (``csrc/core/cache/CacheUtils.cpp:11-35``); without the ``xxhash`` package the fake uses
  blake2b-128, which has the same format but other values.
- Python (sync-mode) disk key: ``sha256(sha256(hlo) ":" sha256(config | version))``
  (``torch_neuronx/kernels/compiler_subprocess.py:39-56``).
"""
from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping
from typing import Any

try:  # the real hash, when available
    import xxhash as _xxhash
except ImportError:  # pragma: no cover - depends on the environment
    _xxhash = None

PLATFORMS: dict[str, tuple[str, str]] = {
    "inf1": ("inf1", "1"), "trn1": ("trn1", "1"), "trn1n": ("trn1", "1"), "inf2": ("trn1", "1"),
    "trn2": ("trn2", "2"), "trn2n": ("trn2", "2"), "trn2u": ("trn2", "2"),
    "trn3": ("trn3", "2"), "trn3u": ("trn3", "2"),
}
BASE_ARGS = "--model-type transformer --auto-cast=none"
EAGER_OPT, GRAPH_OPT = "-O1", "-O2"


def platform(instance_type: str, env: Mapping[str, str] | None = None) -> tuple[str, str]:
    """(target, logical cores), as ``GetPlatformTarget`` / ``GetLogicalNeuronCores``."""
    env = os.environ if env is None else env
    if instance_type not in PLATFORMS:
        raise RuntimeError(f"Unknown instance type: {instance_type}. Supported types: inf1, trn1, "
                           "trn1n, inf2, trn2, trn2n, trn2u, trn3")
    target, lnc = PLATFORMS[instance_type]
    return target, env.get("NEURON_LOGICAL_NC_CONFIG", lnc)


def compiler_args(env: Mapping[str, str] | None = None) -> str:
    """``GetXLAAdditionalArgs`` / ``GetCompileAdditionalArgs`` (identical in the snapshot)."""
    env = os.environ if env is None else env
    flags = env.get("NEURON_CC_FLAGS")
    return BASE_ARGS if flags is None else f"{BASE_ARGS} {flags}"


def opt_level(default: str, env: Mapping[str, str] | None = None) -> str:
    env = os.environ if env is None else env
    return env.get("NEURON_COMPILER_OPT_LEVEL", default)


def extension(instance_type: str, default_opt: str, env: Mapping[str, str] | None = None) -> str:
    """``CreateCompilerExtensionHash``: ``<target>_<lnc>_<opt>[_<args>]``."""
    target, lnc = platform(instance_type, env)
    opt = opt_level(default_opt, env)
    opt = opt[1:] if opt.startswith("-") else opt
    args = compiler_args(env).replace(" ", "_").replace("=", "-")
    ext = f"{target}_{lnc}_{opt}"
    return f"{ext}_{args}" if args else ext


def final_key(base_key: str, instance_type: str, default_opt: str,
              env: Mapping[str, str] | None = None) -> str:
    """``GenerateCacheKey``: ``base_key + "_" + extension``."""
    return f"{base_key}_{extension(instance_type, default_opt, env)}"


def eager_python_key(op_name: str, *inputs: Any, kwargs: dict[str, Any] | None = None,
                     static_indices: tuple[int, ...] | None = None,
                     static_argnames: tuple[str, ...] = ()) -> str:
    """``BaseKernel.get_cache_key`` (+ ``add_static_to_cache_key``) for CPU stand-in tensors."""
    import torch

    parts = [op_name]

    def process(key: Any, inp: Any) -> None:
        if isinstance(inp, torch.Tensor):
            parts.extend([f"t{key}", str(tuple(inp.shape)), str(inp.dtype)])
        elif static_indices and key in static_indices:
            parts.extend([f"static{key}", str(inp)])
        elif isinstance(inp, slice):
            parts.extend([f"slice{key}", f"{inp.start}_{inp.stop}_{inp.step}"])
        elif isinstance(inp, list | tuple):
            for j, sub in enumerate(inp):
                parts.append(eager_python_key(f"sub_arg{key}_{j}", sub))
        elif isinstance(key, int):  # scalars: only their type is part of the key
            parts.extend([f"s{key}", type(inp).__name__])
        else:
            parts.extend([key, type(inp).__name__])

    for i, inp in enumerate(inputs):
        process(i, inp)
    all_kwargs = kwargs or {}
    for key, value in all_kwargs.items():
        if key not in static_argnames:
            process(key, value)
    key = "_".join(parts)
    static = [f"{n}_{all_kwargs[n]}" for n in static_argnames if n in all_kwargs]
    return f"{key}_{'_'.join(static)}" if static else key


def graph_base_key(ir_text: str, input_specs: list[tuple[tuple[int, ...], str]]) -> str:
    """64 hex chars: sha256 of the module text plus I/O shapes and dtypes."""
    hasher = hashlib.sha256(ir_text.encode("utf-8"))
    for shape, dtype in input_specs:
        hasher.update(str(list(shape)).encode("utf-8"))
        hasher.update(str(dtype).encode("utf-8"))
    return hasher.hexdigest()


def persistent_key(cache_key: str, ir_bytes: bytes) -> str:
    """``MakePersistentCacheKey``: 32 lowercase hex chars (zeros for empty input)."""
    data = cache_key.encode("utf-8") + bytes(ir_bytes)
    if not data:
        return "0" * 32
    if _xxhash is not None:
        return _xxhash.xxh3_128_hexdigest(data)
    return hashlib.blake2b(data, digest_size=16).hexdigest()


def python_neff_key(hlo: bytes, config: str = "trn2|transformer|-O1|none|XLA|2|") -> str:
    """``NEFFCacheKey.hash``: 64 hex chars, the sync-mode (Python) disk layout's key."""
    hlo_hash = hashlib.sha256(hlo).hexdigest()
    config_hash = hashlib.sha256(config.encode()).hexdigest()
    return hashlib.sha256(f"{hlo_hash}:{config_hash}".encode()).hexdigest()
