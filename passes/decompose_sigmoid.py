"""decompose-sigmoid: `aten.sigmoid(x)` becomes `reciprocal(1 + exp(-x))`.

The formula torch-mlir's own lowering of sigmoid uses. It is computed in the result's dtype (an
int input is converted first), except that f16 and bf16 are computed in f32 and rounded once at
the end, as PyTorch does. torch-mlir keeps sigmoid whole (and turns silu into `x * sigmoid(x)`),
so without this it would be outside kiln's primitive set.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import HALF_TYPES, elementwise, float_constant, int_constant, tensor_type, to_dtype


def decompose_sigmoid(sigmoid: ir.OpView, rewriter: Rewriter) -> None:
    x = sigmoid.operands[0]
    source, result = tensor_type(x.type), tensor_type(sigmoid.result.type)
    if source is None or result is None or not result.is_float:
        return
    compute_type = "f32" if result.dtype in HALF_TYPES else result.dtype  # an int x is converted too
    x_compute = x if source.dtype == compute_type else to_dtype(rewriter, x, compute_type)
    exp = elementwise(rewriter, "torch.aten.exp", elementwise(rewriter, "torch.aten.neg", x_compute))
    one = float_constant(rewriter, 1.0)
    denominator = elementwise(rewriter, "torch.aten.add.Scalar", exp, one, int_constant(rewriter, 1))
    y = elementwise(rewriter, "torch.aten.reciprocal", denominator)
    rewriter.replace(y if compute_type == result.dtype else to_dtype(rewriter, y, result.dtype))


PASS = pattern_pass(
    "decompose-sigmoid",
    "sigmoid(x) -> reciprocal(1 + exp(-x))",
    {"torch.aten.sigmoid": decompose_sigmoid},
)
