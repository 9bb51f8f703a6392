"""decompose-gelu: `aten.gelu` becomes the primitives PyTorch defines it with.

    approximate="none":  x * 0.5 * (1 + erf(x * 1/sqrt(2)))
    approximate="tanh":  x * 0.5 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))

in PyTorch's order of operations. f16 and bf16 inputs are computed in f32 and rounded once at
the end, as PyTorch does. torch-mlir keeps gelu whole (it lowers it directly), so without this
the op would be outside kiln's primitive set; fuse-elementwise puts the pieces back into one op.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import HALF_TYPES, elementwise, float_constant, int_constant, string, tensor_type, to_dtype


def decompose_gelu(gelu: ir.OpView, rewriter: Rewriter) -> None:
    x, approximate = gelu.operands
    described = tensor_type(x.type)
    mode = string(approximate)
    if described is None or not described.is_float or mode not in ("none", "tanh"):
        return
    upcast = described.dtype in HALF_TYPES
    x_compute = to_dtype(rewriter, x, "f32") if upcast else x

    def scale(value: ir.Value, factor: float) -> ir.Value:
        return elementwise(rewriter, "torch.aten.mul.Scalar", value, float_constant(rewriter, factor))

    def plus_one(value: ir.Value) -> ir.Value:
        one = float_constant(rewriter, 1.0)
        return elementwise(rewriter, "torch.aten.add.Scalar", value, one, int_constant(rewriter, 1))

    if mode == "none":
        gate = elementwise(rewriter, "torch.aten.erf", scale(x_compute, math.sqrt(0.5)))
    else:
        square = elementwise(rewriter, "torch.aten.mul.Tensor", x_compute, x_compute)
        cube = elementwise(rewriter, "torch.aten.mul.Tensor", square, x_compute)
        inner = elementwise(rewriter, "torch.aten.add.Tensor", x_compute, scale(cube, 0.044715), int_constant(rewriter, 1))
        gate = elementwise(rewriter, "torch.aten.tanh", scale(inner, math.sqrt(2 / math.pi)))
    result = elementwise(rewriter, "torch.aten.mul.Tensor", scale(x_compute, 0.5), plus_one(gate))
    rewriter.replace(to_dtype(rewriter, result, described.dtype) if upcast else result)


PASS = pattern_pass(
    "decompose-gelu",
    "gelu(x) -> x * 0.5 * (1 + erf(x / sqrt(2))), or its tanh form",
    {"torch.aten.gelu": decompose_gelu},
)
