"""decompose-vector-norm: `linalg_vector_norm` (torch.norm, F.normalize, cosine_similarity, ...)
becomes reductions.

    ord 2: sqrt(sum(x * x))    ord 1: sum(|x|)    ord inf / -inf: amax / amin(|x|)
    ord 0: sum(x != 0)         other p: sum(|x| ** p) ** (1 / p)

torch-mlir lowers the op but keeps it whole, outside kiln's primitive set. f16 and bf16 are
computed in f32 and rounded once, as PyTorch accumulates them. Static shapes, and no `dtype`
argument.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool, constant_ints, reduce, shape_of, static_type, vtensor
from .torch_ir import HALF_TYPES, elementwise, float_constant, number, producer, tensor_type, to_dtype


def decompose_vector_norm(op: ir.OpView, rewriter: Rewriter) -> None:
    x, ord_value, dim_value, keepdim_value, dtype_value = op.operands
    described, result = static_type(x), tensor_type(op.result.type)
    order, keepdim = number(ord_value), constant_bool(keepdim_value)
    dims = list(range(len(described.shape))) if described and producer(dim_value, "torch.constant.none") else constant_ints(dim_value)
    if (
        described is None
        or not described.shape  # a 0-d tensor: its norm over dim 0 is |x|, left to torch-mlir's lowering
        or result is None
        or not described.is_float
        or described.dtype != result.dtype
        or order is None
        or keepdim is None
        or not dims
        or producer(dtype_value, "torch.constant.none") is None
    ):
        return
    dims = sorted(dim % len(described.shape) for dim in dims)
    upcast = described.dtype in HALF_TYPES
    value = to_dtype(rewriter, x, "f32") if upcast else x

    def sum_of(terms: ir.Value) -> ir.Value:
        return reduce(rewriter, "torch.aten.sum.dim_IntList", terms, dims, keepdim)

    def magnitude() -> ir.Value:
        return elementwise(rewriter, "torch.aten.abs", value)

    if order == 2:
        norm = elementwise(rewriter, "torch.aten.sqrt", sum_of(elementwise(rewriter, "torch.aten.mul.Tensor", value, value)))
    elif order == 1:
        norm = sum_of(magnitude())
    elif order in (math.inf, -math.inf):
        norm = reduce(rewriter, "torch.aten.amax" if order > 0 else "torch.aten.amin", magnitude(), dims, keepdim)
    elif order == 0:
        zero = float_constant(rewriter, 0.0)
        nonzero = rewriter.create("torch.aten.ne.Scalar", [value, zero], vtensor(shape_of(value), "i1"))
        norm = sum_of(to_dtype(rewriter, nonzero, "f32" if upcast else described.dtype))
    else:
        powered = elementwise(rewriter, "torch.aten.pow.Tensor_Scalar", magnitude(), float_constant(rewriter, float(order)))
        norm = elementwise(rewriter, "torch.aten.pow.Tensor_Scalar", sum_of(powered), float_constant(rewriter, 1.0 / order))
    rewriter.replace(to_dtype(rewriter, norm, described.dtype) if upcast else norm)


PASS = pattern_pass(
    "decompose-vector-norm",
    "linalg_vector_norm -> sum/amax/amin reductions (and sqrt, pow)",
    {"torch.aten.linalg_vector_norm": decompose_vector_norm},
)
