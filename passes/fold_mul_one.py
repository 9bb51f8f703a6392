"""fold-mul-one: `x * 1` and `1 * x` become `x`.

Matches `aten.mul.Scalar(x, 1)` and `aten.mul.Tensor` with a literal tensor of ones on either
side. Fires only when the product has x's type, with a static shape: a `1` that broadcasts x to a
larger shape, or promotes its dtype (an int tensor times 1.0), is kept. Exact for every input,
inf and NaN too.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number, same_type, splat


def fold_mul_scalar_one(mul: ir.OpView, rewriter: Rewriter) -> None:
    x, scalar = mul.operands
    if number(scalar) != 1 or not same_type(x, mul.result):
        return
    rewriter.replace(x)


def fold_mul_tensor_one(mul: ir.OpView, rewriter: Rewriter) -> None:
    lhs, rhs = mul.operands
    for x, one in ((lhs, rhs), (rhs, lhs)):
        if splat(one) == 1 and same_type(x, mul.result):
            rewriter.replace(x)
            return


PASS = pattern_pass(
    "fold-mul-one",
    "x * 1 -> x (same shape and dtype only)",
    {"torch.aten.mul.Scalar": fold_mul_scalar_one, "torch.aten.mul.Tensor": fold_mul_tensor_one},
)
