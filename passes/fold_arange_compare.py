"""fold-arange-compare: a comparison of an `arange` with a constant that holds everywhere, or nowhere, becomes a constant mask.

transformers (5.x) builds an attention mask for a model called without one from `arange(n) >= 0`
(its padding rule, with no padding), broadcast to the batch: every element true, yet computed
each call, and BEiT adds it to its relative position bias, which then has the batch's size (32 x
12 x 197 x 197 written each layer, where 12 x 197 x 197 would do). The values of `arange(start,
end, step)` lie between its first and last, so `>=`, `>`, `<=`, `<`, `==` and `!=` with a number
decide themselves where that range lies on one side of it; shape-only ops between (view, unsqueeze,
broadcast_to, ...) keep the range. The mask becomes a splat literal, which later folds see through.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number, producer, splat_literal, tensor_type

SHAPE_ONLY = (
    "torch.aten.view", "torch.aten.reshape", "torch.aten._unsafe_view", "torch.aten.unsqueeze", "torch.aten.squeeze",
    "torch.aten.squeeze.dim", "torch.aten.flatten.using_ints", "torch.aten.broadcast_to", "torch.aten.expand",
)  # fmt: skip
ARANGES = ("torch.aten.arange", "torch.aten.arange.start", "torch.aten.arange.start_step")  # (end), (start, end), (start, end, step)
COMPARISONS = ("ge", "gt", "le", "lt", "eq", "ne")


def fold_arange_compare(op: ir.OpView, rewriter: Rewriter) -> None:
    bounds = _arange_bounds(op.operands[0])
    other = number(op.operands[1])
    result = tensor_type(op.result.type)
    if bounds is None or other is None or result is None or not result.static:
        return
    decided = _decide(op.name.split(".")[2], *bounds, other)
    if decided is not None:
        rewriter.replace(splat_literal(rewriter, op.result.type, int(decided)))


def _arange_bounds(value: ir.Value) -> tuple[float, float] | None:
    """(smallest, largest) of the `arange` that `value` reshapes or broadcasts; None for anything else."""
    while (reshaped := producer(value, *SHAPE_ONLY)) is not None:
        value = reshaped.operands[0]
    arange = producer(value, *ARANGES)
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


PASS = pattern_pass(
    "fold-arange-compare",
    "arange(...) compared with a number, true or false for all of its values -> a splat mask",
    {f"torch.aten.{name}.Scalar": fold_arange_compare for name in COMPARISONS},
)
