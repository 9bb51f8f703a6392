"""decompose-slice-scatter: `slice_scatter` (writing `src` into a strided slice) becomes primitives.

torch-mlir lowers slice_scatter, but keeps it whole, outside kiln's primitive set; PyTorch emits it
for every in-place slice assignment (`y[:, 1:3] = s`), for circular padding, and torch-mlir's own
decompositions of diagonal_scatter produce it too. With step 1 it is a concatenation of the kept
parts and `src`; with a larger step, a `scatter` of `src` at literal indices. Static shapes only.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import cat, int_literal, shape_of, slice_, static_type
from .torch_ir import int_constant, number, producer


def decompose_slice_scatter(op: ir.OpView, rewriter: Rewriter) -> None:
    x, src, dim_value, start_value, end_value, step_value = op.operands
    if static_type(x) is None or static_type(src) is None:
        return
    shape = shape_of(x)
    dim, step = number(dim_value), number(step_value)
    start = 0 if producer(start_value, "torch.constant.none") else number(start_value)
    end = shape[dim] if producer(end_value, "torch.constant.none") else number(end_value)
    if not all(isinstance(v, int) for v in (dim, step, start, end)) or step < 1:
        return
    dim %= len(shape)
    start, end, _ = slice(start, end, step).indices(shape[dim])  # negative and out-of-range bounds, as PyTorch does
    if len(range(start, end, step)) != shape_of(src)[dim]:
        return
    if step == 1:
        parts = [slice_(rewriter, x, dim, 0, start)] if start > 0 else []
        parts.append(src)
        if end < shape[dim]:
            parts.append(slice_(rewriter, x, dim, end, shape[dim]))
        rewriter.replace(cat(rewriter, parts, dim) if len(parts) > 1 else src)
        return
    positions = np.arange(start, end, step).reshape([-1 if axis == dim else 1 for axis in range(len(shape))])
    index = int_literal(rewriter, np.broadcast_to(positions, shape_of(src)))
    scattered = rewriter.create("torch.aten.scatter.src", [x, int_constant(rewriter, dim), index, src], x.type)
    rewriter.replace(scattered)


PASS = pattern_pass(
    "decompose-slice-scatter",
    "slice_scatter -> a cat of slices (step 1) or a scatter at literal indices",
    {"torch.aten.slice_scatter": decompose_slice_scatter},
)
