"""decompose-unfold: `x.unfold(dim, size, step)` (sliding windows) becomes a gather and a view.

The n = (length - size) // step + 1 windows along `dim` are an index_select of the elements
w * step + k (window w, offset k; literal indices), viewed as n x size and the `size` axis moved
last, where unfold puts it. torch-mlir lowers unfold but keeps it whole, outside kiln's primitive
set. Static shapes only.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import dtype_of, int_literal, permute, shape_of, static_type, view, vtensor
from .torch_ir import int_constant, number


def decompose_unfold(op: ir.OpView, rewriter: Rewriter) -> None:
    x, dim_value, size_value, step_value = op.operands
    dim, size, step = (number(value) for value in (dim_value, size_value, step_value))
    if static_type(x) is None or not all(isinstance(v, int) for v in (dim, size, step)) or step < 1:
        return
    shape = list(shape_of(x))
    if not shape:
        return  # a 0-d tensor unfolds into one window of itself
    dim %= len(shape)
    windows = (shape[dim] - size) // step + 1
    if size < 1 or windows < 1:
        return
    positions = (np.arange(windows)[:, None] * step + np.arange(size)[None, :]).reshape(-1)
    gathered_shape = [*shape[:dim], windows * size, *shape[dim + 1 :]]
    operands = [x, int_constant(rewriter, dim), int_literal(rewriter, positions)]
    gathered = rewriter.create("torch.aten.index_select", operands, vtensor(gathered_shape, dtype_of(x)))
    split = view(rewriter, gathered, [*shape[:dim], windows, size, *shape[dim + 1 :]])
    order = [axis for axis in range(len(shape) + 1) if axis != dim + 1] + [dim + 1]
    rewriter.replace(permute(rewriter, split, order))


PASS = pattern_pass(
    "decompose-unfold",
    "unfold(dim, size, step) -> index_select of every window's elements, view, permute",
    {"torch.aten.unfold": decompose_unfold},
)
