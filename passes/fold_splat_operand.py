"""fold-splat-operand: an add or multiply by a broadcast constant becomes the scalar op, broadcast after.

`x + broadcast_to(c)` for a splat literal c (every element equal, e.g. a mask that
fold-arange-compare found all true) has the broadcast's shape, larger than x's: BEiT's relative
position bias [1, 12, 197, 197] plus a [32, 1, 197, 197] mask is written at the batch's size each
layer. `x + c` (aten.add.Scalar) computes the same elements in x's dtype, and a broadcast_to after
it keeps the result's shape as a view, which the attention kernels read through zero strides (and
which, built from weights alone, IREE computes once at load). Only where x is floating point and
the result has x's dtype, so that no type promotion changes what is computed.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import static_type
from .torch_ir import float_constant, int_constant, int_list, number, producer, splat

BROADCASTS = ("torch.aten.broadcast_to", "torch.aten.expand")
SCALAR_OPS = {"torch.aten.add.Tensor": "torch.aten.add.Scalar", "torch.aten.mul.Tensor": "torch.aten.mul.Scalar"}


def fold_splat_operand(op: ir.OpView, rewriter: Rewriter) -> None:
    x, y = op.operands[0], op.operands[1]
    value = _splat_through_broadcasts(y)
    if value is None and (op.name == "torch.aten.mul.Tensor" or number(op.operands[2]) == 1):
        x, y, value = y, x, _splat_through_broadcasts(x)  # c * x, c + x: the same ops the other way round
    source, result = static_type(x), static_type(op.result)
    if value is None or source is None or result is None or not source.is_float or source.dtype != result.dtype:
        return
    scalar = float_constant(rewriter, value) if isinstance(value, float) else int_constant(rewriter, int(value))  # a bool mask's True: 1
    computed = rewriter.create(SCALAR_OPS[op.name], [x, scalar, *op.operands[2:]], x.type)
    if source.shape != result.shape:
        computed = rewriter.create("torch.aten.broadcast_to", [computed, int_list(rewriter, list(result.shape))], op.result.type)  # type: ignore[arg-type]
    rewriter.replace(computed)


def _splat_through_broadcasts(value: ir.Value) -> int | float | bool | None:
    while (broadcast := producer(value, *BROADCASTS)) is not None:
        value = broadcast.operands[0]
    return splat(value)


PASS = pattern_pass(
    "fold-splat-operand",
    "x + broadcast_to(splat c), x * broadcast_to(splat c) -> broadcast_to(x + c), broadcast_to(x * c): x's size, not the broadcast's",
    {name: fold_splat_operand for name in SCALAR_OPS},
)
