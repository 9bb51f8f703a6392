"""fold-splat-operand: an add or multiply by a broadcast constant becomes the scalar op, broadcast after.

`x + broadcast_to(c)` for a constant c whose elements are all equal has the broadcast's shape, larger
than x's. transformers (5.x) builds the mask of a batch without padding as `arange(n) >= 0` (its
padding rule, with no padding) broadcast to the batch, and BEiT adds it to its relative position
bias: [1, 12, 197, 197] plus [32, 1, 197, 197], written at the batch's size each layer. `x + c`
(aten.add.Scalar) computes the same elements in x's dtype, and a broadcast_to after it keeps the
result's shape as a view, which the attention kernels read through zero strides (and which, built
from weights alone, IREE computes once at load). Only where x is floating point and the result has
x's dtype, so that no type promotion changes what is computed.

c is a splat literal, or a comparison of an `arange` (through shape-only ops) with a number that
holds for all of its values or for none: they lie between its first and last. Such a mask is folded
only here, into the op that reads it; a constant mask left on its own made IREE 3.13 miscompile the
ceil-mode pooling count it fed (tests/ops/test_fixes_33_runtime.py).
"""

from __future__ import annotations

import math

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import static_type
from .torch_ir import RESHAPES, float_constant, int_constant, int_list, number, producer, splat

SHAPE_ONLY = (*RESHAPES, "torch.aten.broadcast_to", "torch.aten.expand")  # the elements' values stay
ARANGES = ("torch.aten.arange", "torch.aten.arange.start", "torch.aten.arange.start_step")  # (end), (start, end), (start, end, step)
COMPARISONS = tuple(f"torch.aten.{name}.Scalar" for name in ("ge", "gt", "le", "lt", "eq", "ne"))
SCALAR_OPS = {"torch.aten.add.Tensor": "torch.aten.add.Scalar", "torch.aten.mul.Tensor": "torch.aten.mul.Scalar"}


def fold_splat_operand(op: ir.OpView, rewriter: Rewriter) -> None:
    x, y = op.operands[0], op.operands[1]
    value = _one_value(y)
    if value is None and (op.name == "torch.aten.mul.Tensor" or number(op.operands[2]) == 1):
        x, value = y, _one_value(x)  # c * x, c + x: the same ops the other way round
    source, result = static_type(x), static_type(op.result)
    if value is None or source is None or result is None or not source.is_float or source.dtype != result.dtype:
        return
    scalar = float_constant(rewriter, value) if isinstance(value, float) else int_constant(rewriter, int(value))  # a bool mask's True: 1
    computed = rewriter.create(SCALAR_OPS[op.name], [x, scalar, *op.operands[2:]], x.type)
    if source.shape != result.shape:
        computed = rewriter.create("torch.aten.broadcast_to", [computed, int_list(rewriter, list(result.shape))], op.result.type)  # type: ignore[arg-type]
    rewriter.replace(computed)


def _one_value(value: ir.Value) -> int | float | bool | None:
    """The one value of every element of `value`: a splat literal or a decided arange comparison,
    through shape-only ops; None for anything else."""
    source = _through_shape_ops(value)
    compare = producer(source, *COMPARISONS)
    if compare is None:
        return splat(source)
    bounds, other = _arange_bounds(compare.operands[0]), number(compare.operands[1])
    return _decide(compare.name.split(".")[2], *bounds, other) if bounds is not None and other is not None else None


def _arange_bounds(value: ir.Value) -> tuple[float, float] | None:
    """(smallest, largest) of the `arange` that `value` reshapes or broadcasts; None for anything else."""
    arange = producer(_through_shape_ops(value), *ARANGES)
    if arange is None:
        return None
    given = [number(operand) for operand in arange.operands[: ARANGES.index(arange.name) + 1]]
    if any(item is None for item in given):
        return None
    values = [float(item) for item in given]  # type: ignore[arg-type]  # None: returned above
    start, end, step = {1: (0.0, values[0], 1.0), 2: (values[0], values[1], 1.0), 3: (values[0], values[1], values[2])}[len(values)]
    count = math.ceil((end - start) / step) if step else 0
    if count <= 0:
        return None
    last = start + (count - 1) * step
    return min(start, last), max(start, last)


def _decide(comparison: str, low: float, high: float, other: float) -> bool | None:
    """Whether `x <comparison> other` holds for every x in [low, high] (True), for none (False), or depends (None)."""
    everywhere = {"ge": low >= other, "gt": low > other, "le": high <= other, "lt": high < other, "eq": low == high == other, "ne": other < low or other > high}
    nowhere = {"ge": high < other, "gt": high <= other, "le": low > other, "lt": low >= other, "eq": other < low or other > high, "ne": low == high == other}
    return True if everywhere[comparison] else False if nowhere[comparison] else None


def _through_shape_ops(value: ir.Value) -> ir.Value:
    """The tensor that `value` reshapes or broadcasts (through any chain of them), or `value`."""
    while (reshaped := producer(value, *SHAPE_ONLY)) is not None:
        value = reshaped.operands[0]
    return value


PASS = pattern_pass(
    "fold-splat-operand",
    "x + broadcast_to(splat c), x * broadcast_to(splat c) -> broadcast_to(x + c), broadcast_to(x * c): x's size, not the broadcast's",
    {name: fold_splat_operand for name in SCALAR_OPS},
)
