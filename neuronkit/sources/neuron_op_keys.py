"""How native torch-neuronx keys the eager kernel of one aten op call, applied to the call as the
CPU ran it: the op Neuron runs there instead, its kernel key, or why the call cannot be mapped.

Read from torch-neuronx's source (``parmoham-aws/test-repo-parmoham`` at ``98154b86``; paths under
``torch_neuronx/``); which ops it registers, and what they key by value: :mod:`neuron_op_table`.

- **The key** of a registered op (``python_ops/torch_mlir/kernel.py:70-115``,
  ``kernels/base.py:103-160``, ``python_ops/processors/argument_processor.py:215-237``): the name
  it was registered under; per positional argument a tensor's shape and dtype, a static one's
  value, a list element by element, anything else by its type only (``x + 1`` and ``x + 2`` share
  a kernel, ``x + 2.5`` does not); keyword arguments the same, less ``device``, ``layout``,
  ``pin_memory``, ``memory_format``, ``requires_grad`` (``python_ops/shared/config.py:134-141``),
  the static ones by value. Outputs are not in it, an ``out=`` tensor is, and an in-place op gets
  ``out=self`` (``python_ops/auto_registration.py:286-291``). No kernel when a positional input
  tensor or every output is empty (``kernel.py:818-869``).
- **Dtypes are keyed before the cast.** The key is taken over the arguments as they arrived
  (``python_ops/torch_mlir/op_impl.py:87``, ``kernel.py:737-740``); int64 -> int32 and
  float64 -> float32 (tensors of one or more dims, and dtype arguments) happen after, for the
  compiled program only (``op_impl.py:89-100``, ``python_ops/dtype_autocast.py:31-78``): int64 and
  int32 inputs are two kernels. Only the classes of ``python_ops/base.py`` (attention, index) cast
  float64 to float32 before keying (``base.py:101-104,156-212``).
- **Copies and casts** on the device compile a kernel keyed ``aten::_to_copy`` or ``aten::copy_``
  with the ``out=`` tensor and the target dtype (``python_ops/torch_mlir/ops/to_copy.py:24-105``,
  ``torch_mlir/ops/copy.py:24-108``, ``python_ops/device_cast.py:22-61``); one to or from float64 /
  int64 outside those bounces through the CPU: no kernel (``python_ops/cast_policy.py:132-184``).
  ``clone`` copies (``csrc/aten/NeuronNativeFunctions.cpp:313-341``); a non-contiguous source is
  first made contiguous by an ``aten::contiguous`` kernel keyed by its layout, approximated here
  by shape, dtype and strides (``python_ops/contiguous.py:99-120``).
- **Attention.** For 4-D query/key/value torch-neuronx picks the overrideable SDPA backend
  (``csrc/aten/SdpBackendSelection.cpp:14-56``), so torch calls
  ``_scaled_dot_product_fused_attention_overrideable`` (torch ``aten/src/ATen/native/transformers/
  attention.cpp``, ``scaled_dot_product_attention``) where the CPU runs
  ``_scaled_dot_product_flash_attention_for_cpu`` (its backward likewise). torch-neuronx runs an
  NKI kernel when both sequence lengths are multiples of 512, head_dim <= 128, with no dropout and
  no mask (``python_ops/scaled_dot_product_fused_attention.py:19-57``), else a torch-mlir kernel over
  query, key and value repeated to the query's heads, the mask (or a one-element zeros), a dropout
  mask and the scale, ``is_causal`` and ``dropout_p`` by value
  (``python_ops/torch_mlir/ops/scaled_dot_product_attention.py:86-191,264-392``); the repeat and the
  zeros are kernels of their own. Its logsumexp (float32 ``(b, h, s)``; NKI's ``(b, h, 128, s/128)``)
  is an output, not keyed. Dtypes other than float32/16 and bfloat16 get no kernel
  (``base.py:974-980``). A 4-D SDPA the CPU ran on torch's math path (dropout, for one: its
  ``_safe_softmax``) is not what Neuron runs: named as not mapped.
- **``nn.Linear``**: Neuron registers ``aten::linear`` (``torch_mlir/ops/linear_algebra.py:79``)
  and its autograd fallback redispatches to it (``csrc/core/NeuronBindings.cpp:487-490``); the CPU
  decomposes it before a dispatch mode sees it, so the ops run inside ``nn.Linear.forward`` are
  keyed as the one ``aten::linear`` of its input, weight and bias. ``F.dropout`` in training
  likewise becomes the ``aten::native_dropout`` torch-neuronx registers
  (``torch_mlir/ops/dropout.py:8``) where the CPU runs ``bernoulli_`` and friends.
- **Ops the CPU decomposes first** although Neuron registers them whole (``linear`` aside:
  ``isfinite``, ``one_hot``, ``rms_norm``, ``silu_backward``, ...: the ``CompositeImplicitAutograd``
  names of :mod:`neuron_op_table`) never reach a dispatch mode: their parts are counted.
- **Ops it does not register** run as torch's composite for them, which takes precedence over a
  backend fallback (structured ops such as ``div.Tensor`` call their registered ``.out`` variant):
  :func:`route` says which, and the forecast counts the composite's parts. An op with no composite
  runs on torch-neuronx's CPU fallback (``csrc/core/NeuronBindings.cpp:483-485``): no kernel.

What the mapping cannot key exactly comes back as a note (``Mapped.note``), read as "not mapped".
"""
from __future__ import annotations

import math
from collections.abc import Callable
from types import FrameType
from typing import Any, NamedTuple

import torch

from neuronkit.sources.neuron_op_table import REGISTERED, Static

__all__ = ["Mapped", "NO_KERNEL", "route", "translate", "whole_keys", "composite_note"]

# allocations, metadata changes, host reads: native C++ in torch-neuronx, no compiled kernel
NO_KERNEL = frozenset({
    "aten::empty.memory_format", "aten::empty_strided", "aten::new_empty", "aten::new_empty_strided",
    "aten::empty_like", "aten::resize_", "aten::resize_as_", "aten::set_", "aten::set_.source_Storage",
    "aten::set_.source_Storage_storage_offset", "aten::set_.source_Tensor",
    "aten::set_.source_Tensor_storage_offset", "aten::_local_scalar_dense", "aten::_unsafe_view",
    "aten::_has_compatible_shallow_copy_type", "aten::record_stream",
})
_SPECIFIC = frozenset({"device", "layout", "pin_memory", "memory_format", "requires_grad"})
_SDPA = "aten::_scaled_dot_product_fused_attention_overrideable"
_ATTENTION_DTYPES = (torch.float32, torch.float16, torch.bfloat16)
_NO_MLIR_COPY = (torch.float64, torch.bool)               # torch_mlir/ops/copy.py:54
_NO_MLIR_TO_COPY = (torch.float64, torch.bool, torch.int32)  # torch_mlir/ops/to_copy.py:62
_WIDE = (torch.float64, torch.int64)                       # cast_policy.py:26-35
_DK = torch._C.DispatchKey
_PLAIN = Static(frozenset(), (), False)
_CAST = Static(frozenset(), ("out_dtype",), False)
# registered ahead of the torch-mlir table by classes with keys of their own
# (python_ops/__init__.py:33-74; grouped_mm.py:27-43; xla_ops/topk_xla.py:11-13): keyed generically
_OWN = frozenset({
    "aten::_native_multi_head_attention", "aten::_native_multi_head_attention.out",
    "aten::scatter_add", "aten::scatter_add_", "aten::scatter_add.out", "aten::gather",
    "aten::gather.out", "aten::nonzero", "aten::nonzero.out", "aten::index.Tensor_out",
    "aten::_grouped_mm", "aten::topk", "aten::topk.values", "aten::topk.out",
})


class Mapped(NamedTuple):
    """One op call as Neuron would run it: ``keys``, (op name, kernel key) per kernel; ``note``:
    why the count cannot vouch for this call, when it cannot; ``about``: the op the note names
    (default: the CPU's)."""

    keys: list[tuple[str, tuple]]
    note: str | None = None
    about: str | None = None


def route(func: Any) -> tuple[str, Any]:
    """How Neuron runs this op overload: ``("key", None)`` keyed by :func:`translate`, ``("skip",
    None)`` no kernel, ``("composite", dispatch_key)`` / ``("decompose", None)`` torch's composite
    runs and its parts are keyed, ``("fallback", None)`` torch-neuronx's CPU fallback."""
    name = func.name()
    if name in _SPECIAL or name in REGISTERED or name in _OWN:
        return "key", None
    if func.is_view or name in NO_KERNEL:
        return "skip", None
    for key in (_DK.CompositeExplicitAutogradNonFunctional, _DK.CompositeExplicitAutograd):
        if torch._C._dispatch_has_kernel_for_dispatch_key(name, key):
            return "composite", key
    if torch._C._dispatch_has_kernel_for_dispatch_key(name, _DK.CompositeImplicitAutograd):
        return "decompose", None
    if not any("Tensor" in str(r.type) for r in func._schema.returns):
        return "skip", None
    return "fallback", None


def translate(name: str, args: tuple, kwargs: dict, out: Any) -> Mapped:
    """The kernels Neuron compiles for a call :func:`route` sends to ``"key"`` or ``"fallback"``."""
    special = _SPECIAL.get(name)
    if special is not None:
        return special(args, kwargs, out)
    static = REGISTERED.get(name, _PLAIN if name in _OWN else None)
    if static is None:
        return Mapped([], "no torch-neuronx kernel for it: it would run on the CPU fallback, "
                          "not counted")
    if _empty(args) or _all_empty(out):
        return Mapped([])
    note = None
    if name in _OWN:
        note = "torch-neuronx keys it in a class of its own: counted approximately"
    elif static.rewritten:
        note = "torch-neuronx keys it after rewriting its arguments: counted approximately"
    return Mapped([(name, mlir_key(name, args, kwargs, static))], note)


def composite_note(name: str, args: tuple) -> str | None:
    """A note for an op whose composite runs here although Neuron would not run it at all."""
    if name == "aten::_safe_softmax" and args and getattr(args[0], "dim", lambda: 0)() == 4:
        return ("a 4-D scaled_dot_product_attention took torch's math path on the CPU: Neuron "
                "would run _scaled_dot_product_fused_attention_overrideable instead of the "
                "matmuls and softmax counted around it")
    return None


def whole_keys(frame: FrameType | None) -> Mapped | None:
    """The one kernel Neuron runs for the call in ``frame`` that the CPU decomposed before any
    dispatch mode saw it: ``nn.Linear.forward`` -> ``aten::linear``; ``F.dropout`` in training
    -> ``aten::native_dropout`` (torch's ``Dropout.cpp``, ``is_fused_kernel_acceptable``, takes
    the fused op for a ``PrivateUse1`` tensor). None for any other frame."""
    if frame is None:
        return None
    code = frame.f_code
    if code is torch.nn.Linear.forward.__code__:
        module, inp = frame.f_locals.get("self"), frame.f_locals.get("input")
        if isinstance(module, torch.nn.Linear) and isinstance(inp, torch.Tensor):
            args = (inp, module.weight) + ((module.bias,) if module.bias is not None else ())
            key = mlir_key("aten::linear", args, {}, REGISTERED["aten::linear"])
            return Mapped([("aten::linear", key)])
    if code is torch.nn.functional.dropout.__code__:
        inp, p = frame.f_locals.get("input"), frame.f_locals.get("p")
        if (isinstance(inp, torch.Tensor) and frame.f_locals.get("training")
                and isinstance(p, float) and 0 < p < 1 and inp.numel()):
            key = mlir_key("aten::native_dropout", (inp, p, True), {},
                           REGISTERED["aten::native_dropout"])
            return Mapped([("aten::native_dropout", key)], "torch-neuronx keys it after rewriting "
                          "its arguments: counted approximately", "aten::native_dropout")
    return None


# --------------------------------------------------------------------------- the generic key

def mlir_key(name: str, args: tuple, kwargs: dict, static: Static) -> tuple:
    """The key torch-neuronx's torch-mlir kernels compute (module docstring)."""
    if name.split("::")[-1].split(".")[0].endswith("_") and args:
        kwargs = {**kwargs, "out": args[0]}              # in place: the wrapper passes out=self
    nums = {i if i >= 0 else i + len(args) for i in static.nums}
    parts = tuple(_part(a, i in nums) for i, a in enumerate(args))
    named = tuple((k, _part(v, False)) for k, v in kwargs.items()
                  if k not in static.names and k not in _SPECIFIC
                  and (k != "out" or isinstance(v, torch.Tensor)))
    fixed = tuple((k, _text(kwargs[k])) for k in static.names if k in kwargs)
    return name, parts, named, fixed


def _part(value: Any, static: bool) -> Any:
    if isinstance(value, torch.Tensor):
        return "t", tuple(value.shape), value.dtype
    if static:
        return "v", _text(value)
    if isinstance(value, slice):
        return "slice", value.start, value.stop, value.step
    if isinstance(value, (list, tuple)):
        return tuple(_part(v, False) for v in value)
    return type(value).__name__


def _text(value: Any) -> str:
    return "neuron" if isinstance(value, torch.device) else str(value)


def _meta(shape: Any, dtype: torch.dtype) -> torch.Tensor:
    return torch.empty(tuple(shape), dtype=dtype, device="meta")


def _empty(args: tuple) -> bool:
    return any(isinstance(a, torch.Tensor) and a.numel() == 0 for a in args)


def _all_empty(out: Any) -> bool:
    outs = [t for t in (out if isinstance(out, (tuple, list)) else (out,))
            if isinstance(t, torch.Tensor)]
    return bool(outs) and all(t.numel() == 0 for t in outs)


# --------------------------------------------------------------------------- copies

def _contiguous(src: torch.Tensor) -> list[tuple[str, tuple]]:
    if src.is_contiguous():
        return []
    return [("aten::contiguous", ("aten::contiguous", ("t", tuple(src.shape), src.dtype),
                                  ("stride", tuple(src.stride()))))]


def _cast(src: torch.Tensor, dst: torch.Tensor, name: str = "aten::copy_") -> list:
    kw: dict[str, Any] = {"out": dst}
    if src.dtype != dst.dtype:
        kw["out_dtype"] = dst.dtype
    return [(name, mlir_key(name, (_meta(src.shape, src.dtype),), kw, _CAST))]


def _copy(dst: torch.Tensor, src: Any) -> Mapped:
    """``dst.copy_(src)`` with both on the device."""
    if not isinstance(src, torch.Tensor) or dst.numel() == 0:
        return Mapped([])                                 # a Python scalar: a host-side fill
    if src.device != dst.device:
        return Mapped([])                                 # a transfer, not a kernel
    keys = []
    if tuple(src.shape) != tuple(dst.shape):
        src = src.expand_as(dst)
    keys += _contiguous(src)
    note = None if dst.is_contiguous() else "a copy into a non-contiguous tensor: approximated"
    if src.dtype in _NO_MLIR_COPY or dst.dtype in _NO_MLIR_COPY:
        if src.dtype == dst.dtype or src.dtype in _WIDE or dst.dtype in _WIDE:
            return Mapped(keys, note)                     # a device copy or a CPU bounce
    return Mapped(keys + _cast(src, dst), note)


def _copy_(args: tuple, kwargs: dict, out: Any) -> Mapped:
    return _copy(args[0], args[1])


def _clone(args: tuple, kwargs: dict, out: Any) -> Mapped:
    src = args[0]
    if src.numel() == 0:
        return Mapped([])
    return Mapped(_contiguous(src) + _copy(_meta(src.shape, src.dtype),
                                           _meta(src.shape, src.dtype)).keys)


def _to_copy(args: tuple, kwargs: dict, out: Any) -> Mapped:
    src = args[0]
    dtype = kwargs.get("dtype") or src.dtype
    device = kwargs.get("device")
    if (device is not None and torch.device(device) != src.device) or src.numel() == 0:
        return Mapped([])                                 # a transfer, or nothing to copy
    if src.dtype not in _NO_MLIR_TO_COPY and dtype not in _NO_MLIR_TO_COPY:
        return Mapped(_contiguous(src) + _cast(src, _meta(src.shape, dtype), "aten::_to_copy"))
    if dtype == src.dtype or dtype in _WIDE or src.dtype in _WIDE:
        return Mapped([])                                 # unchanged, or a CPU bounce
    return Mapped(_contiguous(src) + _cast(src, _meta(src.shape, dtype)))


def _index(args: tuple, kwargs: dict, out: Any) -> Mapped:
    """``index.Tensor``: a ``base.py`` class, float64 cast first, keyed ``aten::index``
    (``python_ops/__init__.py:73``, ``torch_mlir/ops/index.py:17-36,71-87``)."""
    tensor, indices = args[0], list(args[1])
    if any(isinstance(i, torch.Tensor) and i.numel() == 0 for i in indices) or _all_empty(out):
        return Mapped([])
    if tensor.dtype == torch.float64 and tensor.dim():
        tensor = _meta(tensor.shape, torch.float32)
    note = None
    if any(isinstance(i, torch.Tensor) and i.dtype == torch.bool for i in indices):
        note = "a boolean index becomes integer indices first: counted approximately"
    return Mapped([("aten::index", mlir_key("aten::index", (tensor, indices), {}, _PLAIN))], note)


# --------------------------------------------------------------------------- attention

def _attention_note(q: Any, k: Any, v: Any) -> str | None:
    tensors = all(isinstance(t, torch.Tensor) for t in (q, k, v))
    if not tensors or q.dim() != 4 or k.dim() != 4 or v.dim() != 4:
        return "attention inputs that are not 4-D tensors: Neuron takes torch's math path"
    if not (q.dtype == k.dtype == v.dtype) or q.dtype not in _ATTENTION_DTYPES:
        return (f"attention in {q.dtype}: torch-neuronx has no kernel for it and falls back "
                "to the CPU, not counted")
    return None


def _repeat(t: torch.Tensor, heads: int) -> list:
    """The kernels of ``t.repeat_interleave(r, dim=1)`` on the device, for GQA."""
    rep = heads // t.shape[1]
    if rep <= 1:
        return []
    b, kv, s, d = t.shape
    return _clone((t.unsqueeze(2).expand(b, kv, rep, s, d),), {}, None).keys


def _helpers(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, zeros: bool) -> list:
    """The kernels torch-neuronx's attention runs besides its own: a one-element zeros for a
    missing mask or dropout mask, and the GQA repeat of key and value."""
    key = mlir_key("aten::zeros", ([1],), {"dtype": q.dtype, "device": torch.device("meta")},
                   REGISTERED["aten::zeros"])
    return [("aten::zeros", key)] * zeros + _repeat(k, q.shape[1]) + _repeat(v, q.shape[1])


def _nki(q: torch.Tensor, k: torch.Tensor, v: torch.Tensor, dropout: float, mask: Any) -> bool:
    return (q.shape[2] % 512 == 0 and k.shape[2] % 512 == 0 and q.shape[3] <= 128
            and dropout == 0 and mask is None and tuple(k.shape) == tuple(v.shape))


def _sdpa(args: tuple, kwargs: dict, out: Any) -> Mapped:
    """``_scaled_dot_product_flash_attention_for_cpu`` -> the overrideable op's kernel."""
    q, k, v = args[:3]
    note = _attention_note(q, k, v)
    if note:
        return Mapped([], note)
    dropout = float(args[3] if len(args) > 3 else kwargs.get("dropout_p", 0.0))
    causal = bool(args[4] if len(args) > 4 else kwargs.get("is_causal", False))
    mask, scale = kwargs.get("attn_mask"), kwargs.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    b, h, sq, _ = q.shape
    if _nki(q, k, v, dropout, mask):
        training = dropout > 0 or torch.is_grad_enabled()
        key = (_SDPA, "nki", _part(q, False), _part(k, False), _part(v, False), causal,
               str(scale), training)
        return Mapped([(_SDPA, key)])
    kr, vr = _meta((b, h, *k.shape[2:]), k.dtype), _meta((b, h, *v.shape[2:]), v.dtype)
    bias = mask if mask is not None else _meta((1,), q.dtype)
    drop = _meta((1,), q.dtype) if dropout == 0 else _meta((b, h, sq, k.shape[2]), torch.bool)
    fused = mlir_key(_SDPA, (q, kr, vr, bias, drop, scale, causal, dropout, True), {},
                     Static(frozenset({5, 6, 7, 8}), (), False))
    return Mapped([(_SDPA, fused), *_helpers(q, k, v, mask is None or dropout == 0)])


def _sdpa_backward(args: tuple, kwargs: dict, out: Any) -> Mapped:
    """``..._for_cpu_backward`` -> the overrideable backward's kernel."""
    grad, q, k, v, _, lse = args[:6]
    name = _SDPA + "_backward"
    note = _attention_note(q, k, v)
    if note:
        return Mapped([], note)
    dropout = float(args[6] if len(args) > 6 else kwargs.get("dropout_p", 0.0))
    causal = bool(args[7] if len(args) > 7 else kwargs.get("is_causal", False))
    mask, scale = kwargs.get("attn_mask"), kwargs.get("scale")
    scale = 1.0 / math.sqrt(q.shape[-1]) if scale is None else scale
    b, h, sq, _ = q.shape
    if _nki(q, k, v, dropout, mask):
        key = (name, "nki", _part(q, False), _part(k, False), _part(v, False), causal, str(scale))
        return Mapped([(name, key)])
    kr, vr = _meta((b, h, *k.shape[2:]), k.dtype), _meta((b, h, *v.shape[2:]), v.dtype)
    drop = _meta((1,), q.dtype) if dropout == 0 else _meta((b, h, sq, k.shape[2]), torch.bool)
    key = mlir_key(name, (grad, q, kr, vr, mask, drop, _meta(lse.shape, torch.float32), scale,
                          causal, dropout, True), {}, Static(frozenset({7, 8, 9, 10}), (), False))
    keys = [(name, key), *_helpers(q, k, v, dropout == 0)]
    if k.shape[1] != h:                                   # GQA: grads summed back to kv heads
        folded = _meta((b, k.shape[1], h // k.shape[1], *k.shape[2:]), k.dtype)
        keys.append(("aten::sum.dim_IntList", mlir_key("aten::sum.dim_IntList", (folded, [2]), {},
                                                       REGISTERED["aten::sum.dim_IntList"])))
    return Mapped(keys)


_SPECIAL: dict[str, Callable[[tuple, dict, Any], Mapped]] = {
    "aten::_scaled_dot_product_flash_attention_for_cpu": _sdpa,
    "aten::_scaled_dot_product_flash_attention_for_cpu_backward": _sdpa_backward,
    "aten::_to_copy": _to_copy,
    "aten::copy_": _copy_,
    "aten::clone": _clone,
    "aten::index.Tensor": _index,
}
