"""fold-sin-cos: `sin(x)^2 + cos(x)^2` becomes a literal tensor of ones.

The square may be written `pow(s, 2)` or `s * s` (as expand-pow-small leaves it), in either
order, and `add` must have alpha 1. The result type (shape and dtype) is kept: the ones have the
add's type. Needs a static shape (the ones are a literal). For finite x the identity holds up to
rounding; for inf or NaN eager PyTorch gives NaN and the fold gives 1, which no finite input can
tell apart.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number, producer, splat_literal, tensor_type


def fold_sin_cos(add: ir.OpView, rewriter: Rewriter) -> None:
    lhs, rhs, alpha = add.operands
    if number(alpha) != 1:
        return
    result = tensor_type(add.result.type)
    if result is None or not result.static:
        return
    first, second = _square_of(lhs), _square_of(rhs)
    if first is None or second is None:
        return
    either_order = ((first, second), (second, first))
    if not any(_same_argument(sine, cosine) for sine, cosine in either_order):
        return
    rewriter.replace(splat_literal(rewriter, add.result.type, 1))


def _square_of(value: ir.Value) -> ir.Value | None:
    """`s` when `value` is `pow(s, 2)` or `s * s`."""
    power = producer(value, "torch.aten.pow.Tensor_Scalar")
    if power is not None and number(power.operands[1]) == 2:
        return power.operands[0]
    product = producer(value, "torch.aten.mul.Tensor")
    if product is not None and product.operands[0] == product.operands[1]:
        return product.operands[0]
    return None


def _same_argument(sine: ir.Value, cosine: ir.Value) -> bool:
    """`sine` is `sin(x)` and `cosine` is `cos(x)`, of the same x."""
    sin = producer(sine, "torch.aten.sin")
    cos = producer(cosine, "torch.aten.cos")
    return sin is not None and cos is not None and sin.operands[0] == cos.operands[0]


PASS = pattern_pass(
    "fold-sin-cos",
    "sin(x)^2 + cos(x)^2 -> a literal tensor of ones",
    {"torch.aten.add.Tensor": fold_sin_cos},
)
