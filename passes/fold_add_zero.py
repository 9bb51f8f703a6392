"""fold-add-zero: `x + 0`, `0 + x` and `x - 0` become `x`.

Matches `aten.add.Scalar/sub.Scalar(x, 0, alpha)` and `aten.add.Tensor/sub.Tensor` with a
literal tensor of zeros (`0 + x` only with alpha 1, since it means `alpha * x`; other alphas must
be finite constants). Fires only when the result has x's type, with a static shape, so a zero that
broadcasts or promotes x is kept.

Floats: `x - 0` is exact. `x + 0` is exact except for the sign of a zero: IEEE gives
`-0.0 + 0.0 = +0.0` and the fold leaves `-0.0` (so does `x - (-0.0)`). The two compare equal,
so we fold; every result that is not a zero, inf and NaN included, is unchanged.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number, same_type, splat


def fold_scalar_zero(op: ir.OpView, rewriter: Rewriter) -> None:
    x, scalar, alpha = op.operands
    if number(scalar) != 0 or not _finite(number(alpha)) or not same_type(x, op.result):
        return
    rewriter.replace(x)


def fold_tensor_zero(op: ir.OpView, rewriter: Rewriter) -> None:
    lhs, rhs, alpha = op.operands
    if not _finite(number(alpha)):
        return
    if splat(rhs) == 0 and same_type(lhs, op.result):
        rewriter.replace(lhs)
        return
    if op.name == "torch.aten.add.Tensor" and number(alpha) == 1 and splat(lhs) == 0 and same_type(rhs, op.result):
        rewriter.replace(rhs)


def _finite(alpha: float | None) -> bool:
    """A known, finite alpha: `alpha * 0` is 0 (an infinite alpha would make it NaN)."""
    return alpha is not None and math.isfinite(alpha)


PASS = pattern_pass(
    "fold-add-zero",
    "x + 0 -> x, x - 0 -> x (same shape and dtype only)",
    {
        "torch.aten.add.Scalar": fold_scalar_zero,
        "torch.aten.sub.Scalar": fold_scalar_zero,
        "torch.aten.add.Tensor": fold_tensor_zero,
        "torch.aten.sub.Tensor": fold_tensor_zero,
    },
)
