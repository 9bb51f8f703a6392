"""fold-sub-self: `x - x` becomes a literal tensor of zeros, for integer tensors only.

Matches `aten.sub.Tensor(x, x, 1)` whose dtype is a signed or unsigned integer, with a static
shape. Floats are left alone on purpose: `inf - inf` and `NaN - NaN` are NaN, not 0, and a
model may rely on that to propagate a bad input.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number, splat_literal, tensor_type


def fold_sub_self(sub: ir.OpView, rewriter: Rewriter) -> None:
    lhs, rhs, alpha = sub.operands
    result = tensor_type(sub.result.type)
    if lhs != rhs or number(alpha) != 1 or result is None or not result.static or not result.is_integer:
        return
    rewriter.replace(splat_literal(rewriter, sub.result.type, 0))


PASS = pattern_pass(
    "fold-sub-self",
    "x - x -> 0 for integer tensors (floats kept: inf - inf is NaN)",
    {"torch.aten.sub.Tensor": fold_sub_self},
)
