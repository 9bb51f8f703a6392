"""decompose-diagonal: `diagonal` and `diagonal_scatter` become a strided slice of a flattened view.

torch-mlir lowers `diagonal` but keeps it whole, outside kiln's primitive set (trace and
einsum("ii->") use it). With the two dims moved last and flattened into one of r*c elements, the
diagonal at `offset` is every (c+1)-th element from `offset` (or from -offset*c below the main
diagonal); diagonal_scatter writes `src` into that same slice, which decompose-slice-scatter (run
after this pass) turns into primitives. Static shapes only.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import permute, shape_of, slice_, static_type, view
from .torch_ir import int_constant, number


def _layout(x: ir.Value, offset_value: ir.Value, dim1_value: ir.Value, dim2_value: ir.Value) -> tuple | None:
    """(order putting the two dims last, the flattened shape, start, end, step); None if unknown."""
    if static_type(x) is None:
        return None
    offset, dim1, dim2 = (number(value) for value in (offset_value, dim1_value, dim2_value))
    if not all(isinstance(value, int) for value in (offset, dim1, dim2)):
        return None
    shape = shape_of(x)
    dim1, dim2 = dim1 % len(shape), dim2 % len(shape)
    rows, columns = shape[dim1], shape[dim2]
    length = min(rows, columns - offset) if offset >= 0 else min(rows + offset, columns)
    if dim1 == dim2 or length <= 0:
        return None
    order = [axis for axis in range(len(shape)) if axis not in (dim1, dim2)] + [dim1, dim2]
    flat = [shape[axis] for axis in order[:-2]] + [rows * columns]
    start = offset if offset >= 0 else -offset * columns
    step = columns + 1
    return order, flat, start, start + (length - 1) * step + 1, step


def decompose_diagonal(op: ir.OpView, rewriter: Rewriter) -> None:
    x, offset, dim1, dim2 = op.operands
    layout = _layout(x, offset, dim1, dim2)
    if layout is None:
        return
    order, flat_shape, start, end, step = layout
    flat = view(rewriter, permute(rewriter, x, order), flat_shape)
    rewriter.replace(slice_(rewriter, flat, len(flat_shape) - 1, start, end, step))


def decompose_diagonal_scatter(op: ir.OpView, rewriter: Rewriter) -> None:
    x, src, offset, dim1, dim2 = op.operands
    layout = _layout(x, offset, dim1, dim2)
    if layout is None:
        return
    order, flat_shape, start, end, step = layout
    moved = permute(rewriter, x, order)
    flat = view(rewriter, moved, flat_shape)
    bounds = [int_constant(rewriter, number) for number in (len(flat_shape) - 1, start, end, step)]
    scattered = rewriter.create("torch.aten.slice_scatter", [flat, src, *bounds], flat.type)
    inverse = sorted(range(len(order)), key=order.__getitem__)
    rewriter.replace(permute(rewriter, view(rewriter, scattered, shape_of(moved)), inverse))


PASS = pattern_pass(
    "decompose-diagonal",
    "diagonal / diagonal_scatter -> a strided slice / slice_scatter of a flattened view",
    {"torch.aten.diagonal": decompose_diagonal, "torch.aten.diagonal_scatter": decompose_diagonal_scatter},
)
