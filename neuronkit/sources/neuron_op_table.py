"""The aten ops native torch-neuronx compiles an eager kernel for, and the arguments it keys by
value: data read from its source (``parmoham-aws/test-repo-parmoham`` at ``98154b86``; paths are
under ``torch_neuronx/python_ops/``), for :mod:`neuronkit.sources.neuron_op_keys`.

Which implementation an op gets is decided by registration order (``__init__.py:85-98``): the
common ops (attention, gather, scatter_add, nonzero, index, rms_norm: ``__init__.py:12-82``),
then every ``@neuron_op`` class (``auto_registration.py:306-390``), then each ``@register_aten``
of ``torch_mlir/ops/*.py`` (``torch_mlir/operation_registry.py:76-149``). A second registration
of the same name for ``PrivateUse1`` raises in ``torch.library`` and is skipped
(``operation_registry.py:138-146``), so an earlier one wins. The ``xla_ops`` classes import
``TorchNeuronXLAKernel`` from ``torch_neuronx.kernels``, which does not export it
(``kernels/__init__.py:1-3``), or need ``jax``, which the snapshot does not install
(``pyproject.toml:7-12``): their import fails (``auto_registration.py:326-331``) and they register
nothing. The names the earlier registrations took are left out below.

Each line is one ``@register_aten`` group of ``torch_mlir/ops/<file>``, in file order: its op names
(``aten::`` left off), then ``| static_argnums | static_argnames`` where it declares them, then
``| p`` where it rewrites its arguments before keying (``uses_preprocessing``,
``torch_mlir/op_impl.py:68-85``). Names torch has no overload for register nothing and never match.
"""
from __future__ import annotations

from typing import NamedTuple

__all__ = ["Static", "REGISTERED"]

_TABLE = """
# activation.py
relu relu.out relu_ gelu gelu_ gelu.out silu silu.out sigmoid sigmoid.out tanh tanh.out
sigmoid_backward sigmoid_backward.grad_input silu_backward tanh_backward gelu_backward
gelu_backward.grad_input
softplus softplus.out | 1,2
softplus_backward softplus_backward.grad_input | 2,3
# binary.py
mul.Scalar mul.Tensor mul.out mul.Scalar_out mul_ remainder remainder.Tensor_out floor_divide
floor_divide.out addcmul addcmul.out addcdiv addcdiv.out
add.Tensor add.out add_.Tensor | | alpha
sub.Tensor sub.out sub_.Tensor | | alpha
div div.out div.out_mode div_.Tensor | | rounding_mode
pow pow.Tensor_Scalar_out pow.Tensor_Tensor_out | 1
# comparison.py
eq eq.Scalar_out eq.Tensor_out ne ne.Scalar_out ne.Tensor_out gt gt.Scalar_out gt.Tensor_out ge
ge.Scalar_out ge.Tensor_out lt lt.Scalar_out lt.Tensor_out le le.Tensor_out le.Scalar_out clamp
clamp.out clamp.Tensor clamp.Tensor_out clamp_max clamp_max.out clamp_max.Tensor
clamp_max.Tensor_out clamp_min clamp_min.out clamp_min.Tensor clamp_min.Tensor_out isnan isinf
isneginf isneginf.out isfinite
# convolution.py
convolution | 3,4,5,6,7,8 | | p
convolution_backward | 3,4,5,6,7,8,9,10
# creation.py
ones_like zero_
arange arange.start_out | 0,1,2 | dtype
zeros zeros.out | 0 | dtype,device
ones ones.out | 0 | dtype
eye eye.out | 0,1
eye.m eye.m_out | 0,1
fill_.Tensor | 1
fill_.Scalar | 1
full full.out | 0
scalar_tensor | | dtype
# dropout.py
native_dropout | 1,2 | | p
native_dropout_backward | 2
# embedding.py
one_hot | 1 | | p
# foreach_ops.py
_foreach_norm.Scalar _foreach_norm.Scalar_out | 1,2 | dtype
_foreach_add.Scalar _foreach_add.Scalar_out | | | p
_foreach_add_.Scalar | | | p
_foreach_add.List _foreach_add.List_out | 2 | | p
_foreach_add_.List | 2 | | p
_foreach_add.ScalarList _foreach_add.ScalarList_out | 2 | | p
_foreach_add_.ScalarList | | | p
_foreach_add.Tensor _foreach_add.Tensor_out | 2 | | p
_foreach_add_.Tensor | 2 | | p
_foreach_mul.Scalar _foreach_mul.Scalar_out | | | p
_foreach_mul_.Scalar | | | p
_foreach_mul.List _foreach_mul.List_out | | | p
_foreach_mul.ScalarList _foreach_mul.ScalarList_out | | | p
_foreach_mul_.List | | | p
_foreach_mul_.ScalarList | | | p
_foreach_mul.Tensor _foreach_mul.Tensor_out | | | p
_foreach_mul_.Tensor | | | p
_foreach_sub.Scalar _foreach_sub.Scalar_out | 2 | | p
_foreach_sub_.Scalar | 2 | | p
_foreach_sub.List _foreach_sub.List_out | 2 | | p
_foreach_sub.ScalarList _foreach_sub.ScalarList_out | 2 | | p
_foreach_sub_.List | 2 | | p
_foreach_sub_.ScalarList | | | p
_foreach_sub.Tensor _foreach_sub.Tensor_out | 2 | | p
_foreach_sub_.Tensor | 2 | | p
_foreach_div.Scalar _foreach_div.Scalar_out | | | p
_foreach_div_.Scalar | | | p
_foreach_div.List _foreach_div.List_out | | | p
_foreach_div.ScalarList _foreach_div.ScalarList_out | | | p
_foreach_div_.List | | | p
_foreach_div_.ScalarList | | | p
_foreach_div.Tensor _foreach_div.Tensor_out | | | p
_foreach_div_.Tensor | | | p
# indexing.py
masked_fill masked_fill_.Scalar where.self where.self_out
index_select index_select.out | 1 | | p
index_copy index_copy_ index_copy.out | 1
index_add index_add_ index_add.out | 1 | alpha
scatter scatter.value_out | 1 | | p
scatter.src scatter.src_out scatter.reduce | 1 | reduce | p
scatter.value_reduce_out scatter.reduce_out | 1 | reduce | p
masked_select masked_select.out masked_select.Tensor_out | 2 | | p
nonzero_static nonzero_static.out | | size,fill_value,dtype
_index_put_impl_ | | accumulate,unsafe,use_masked_fill | p
index_select_backward | 1,2
slice_backward | 1,2,3,4,5
# linear_algebra.py
dot dot.out mv mv.out mm mm.out bmm bmm.out linear
addmm addmm.out | | beta,alpha
addmv addmv_ addmv.out | | beta,alpha
linalg_vector_norm linalg_vector_norm.out | 1,2,3 | dtype
linear_backward | 3
# logical.py
bitwise_left_shift.Tensor bitwise_left_shift.Tensor_out bitwise_left_shift.Tensor_Scalar
bitwise_left_shift.Tensor_Scalar_out bitwise_left_shift.Scalar_Tensor
bitwise_left_shift.Scalar_Tensor_out bitwise_right_shift.Tensor bitwise_right_shift.Tensor_out
bitwise_right_shift.Tensor_Scalar bitwise_right_shift.Tensor_Scalar_out
bitwise_right_shift.Scalar_Tensor bitwise_right_shift.Scalar_Tensor_out signbit signbit.out sgn
sgn.out
logical_and logical_and.out | | dtype
logical_or logical_or.out | | dtype
logical_not logical_not.out | | dtype
logical_xor logical_xor.out | | dtype
bitwise_and bitwise_and.out bitwise_and.Tensor_out | | dtype
bitwise_or bitwise_or.out bitwise_or.Tensor_out | | dtype
bitwise_xor bitwise_xor.out bitwise_xor.Tensor_out | | dtype
bitwise_not bitwise_not.out bitwise_not.Tensor_out | | dtype
# loss.py
nll_loss_forward | 3,4
nll_loss_backward | 4,5
# misc.py
lerp.Scalar lerp.Scalar_out lerp.Tensor lerp.Tensor_out lerp_.Scalar lerp_.Tensor
embedding | 2,3,4
embedding_dense_backward embedding_dense_backward.out | 2,3,4
_softmax _softmax.out | 1,2
_log_softmax _log_softmax.out | 1,2
softmax | 1 | dtype
log_softmax | 1 | dtype
_softmax_backward_data _softmax_backward_data.out | 2,3
_log_softmax_backward_data _log_softmax_backward_data.out | 2,3
histc histc.out | | bins,range_min,range_max | p
threshold threshold.out | 1,2
threshold_backward threshold_backward.grad_input | 2
# normalization.py
batch_norm_backward_elemt batch_norm_backward_elemt.out batch_norm_elemt batch_norm_elemt.out
batch_norm_gather_stats_with_counts batch_norm_backward_reduce batch_norm_backward_reduce.out
native_layer_norm native_layer_norm.out | 1,4
native_layer_norm_backward native_layer_norm_backward.out | 2,7
batch_norm_stats batch_norm_stats.out | | eps
_fused_rms_norm | 1,3
_fused_rms_norm_backward | 2,5
# optimizer.py
_fused_adamw_ _fused_adamw_.tensor_lr | | | p
# reduction.py
sum sum.dim_IntList sum.IntList_out | 1,2 | dtype
mean mean.dim mean.out mean.dtype_out | 1,2
max max.unary_out max.dim max.dim_max | 1,2
amax amax.out | 1,2
amin amin.out | 1,2
all all.out all.all_out | 1,2
any any.out any.all_out | 1,2
cumsum cumsum.out | 1 | dtype
value_selecting_reduction_backward | 1,3,4
# tensor_ops.py
cat cat.out | 1
stack stack.out | 1
triu triu.out | 1
tril tril.out | 1
flip flip.out | 1
constant_pad_nd | 1,2
reflection_pad1d | 1
reflection_pad2d | 1
reflection_pad3d | 1
replication_pad1d | 1
replication_pad2d replication_pad2d.out | 1
replication_pad3d | 1
repeat | 1
repeat_interleave.Tensor | | output_size | p
# unary.py
abs abs.out neg neg.out sqrt sqrt.out rsqrt rsqrt.out cos cos.out sin sin.out exp exp.out log
log.out erf erf.out erfinv erfinv.out ceil ceil.out trunc trunc.out sign sign.out reciprocal
reciprocal_ reciprocal.out
"""


class Static(NamedTuple):
    """What a registered op keys by value: positional indices, keyword names; ``rewritten``: its
    key is taken over arguments torch-neuronx rewrites first (``uses_preprocessing``)."""

    nums: frozenset[int]
    names: tuple[str, ...]
    rewritten: bool


def _parse(table: str) -> dict[str, Static]:
    found: dict[str, Static] = {}
    for line in table.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        names, *rest = (part.strip() for part in line.split("|"))
        nums = frozenset(int(n) for n in rest[0].split(",") if n) if rest else frozenset()
        keywords = tuple(n for n in rest[1].split(",") if n) if len(rest) > 1 else ()
        static = Static(nums, keywords, len(rest) > 2 and rest[2] == "p")
        for name in names.split():
            found["aten::" + name] = static
    return found


REGISTERED: dict[str, Static] = _parse(_TABLE)
