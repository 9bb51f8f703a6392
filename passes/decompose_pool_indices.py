"""decompose-pool-indices: max pooling whose indices are used computes them by an argmax.

IREE 3.13 cannot compile torch-mlir's lowering of `max_pool2d_with_indices` once the indices are
read ("'vector.store' op write affecting operations on global resources are restricted to
workgroup distributed contexts"); F.max_pool*d(return_indices=True) and max_unpool need them.
Here the values come from `max_pool2d`/`max_pool3d` (primitives), and the indices from every
window's elements gathered at literal positions of the input, padded with -inf, then the index
of their maximum (`max.dim`: the first maximum in the window's row-major order, as PyTorch's
kernels pick) mapped back to its flat position in the unpadded input, also through a literal
table. Pooling whose indices nobody
reads is left to torch-mlir. Static shapes only.

The op has two results, which a rewrite pattern cannot replace, so this pass walks the module
and builds the replacement before the op itself.
"""

from __future__ import annotations

import itertools
import math

import numpy as np
from torch_mlir import ir

from .pass_api import Pass, PassRun, ops_named
from .torch_build import (
    constant_bool,
    constant_ints,
    dtype_of,
    int_literal,
    shape_of,
    static_type,
    view,
    vtensor,
)
from .torch_ir import bool_constant, float_constant, int_constant, int_list

POOLS = {"torch.aten.max_pool2d_with_indices": "torch.aten.max_pool2d", "torch.aten.max_pool3d_with_indices": "torch.aten.max_pool3d"}


class Builder:
    """Creates ops just before one op, at its location: what torch_ir's and torch_build's helpers
    ask of a pattern's Rewriter, for this pass that is not a set of patterns."""

    def __init__(self, op: ir.Operation) -> None:
        self.op = op

    def create(
        self, name: str, operands: list[ir.Value], result_type: ir.Type, attributes: dict[str, ir.Attribute] | None = None
    ) -> ir.Value:
        with ir.InsertionPoint(self.op), self.op.location:
            return ir.Operation.create(name, results=[result_type], operands=list(operands), attributes=attributes).result


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for op in ops_named(module, POOLS):
        if list(op.results[1].uses):
            decompose(op)


def decompose(op: ir.Operation) -> None:
    x, kernel_value, stride_value, padding_value, dilation_value, ceil_mode_value = op.operands
    spatial = 2 if op.name.endswith("2d_with_indices") else 3
    kernel, stride, padding, dilation = (constant_ints(v) for v in (kernel_value, stride_value, padding_value, dilation_value))
    ceil_mode = constant_bool(ceil_mode_value)
    values_type, indices_type = op.results[0].type, op.results[1].type
    if static_type(x) is None or static_type(op.results[1]) is None or ceil_mode is None:
        return
    if kernel is None or stride is None or padding is None or dilation is None:
        return
    stride = stride or kernel
    if not all(len(v) == spatial for v in (kernel, stride, padding, dilation)):
        return
    shape, out = shape_of(x), shape_of(op.results[1])
    batch, sizes, outputs = list(shape[:-spatial]), shape[-spatial:], out[-spatial:]
    extents = [(o - 1) * s + (k - 1) * d + 1 for o, s, k, d in zip(outputs, stride, kernel, dilation, strict=True)]
    after = [max(extent - size - pad, 0) for extent, size, pad in zip(extents, sizes, padding, strict=True)]
    padded = [size + pad + right for size, pad, right in zip(sizes, padding, after, strict=True)]
    gather_at, original_at = _positions(outputs, kernel, stride, dilation, padding, sizes, padded)
    window = math.prod(kernel)

    b = Builder(op)
    values = b.create(POOLS[op.name], list(op.operands), values_type)
    pads = [amount for axis in reversed(range(spatial)) for amount in (padding[axis], after[axis])]
    dtype = dtype_of(x)
    with_border = x
    if any(pads):
        border = [int_list(b, pads), float_constant(b, -math.inf)]
        with_border = b.create("torch.aten.constant_pad_nd", [x, *border], vtensor([*batch, *padded], dtype))
    flat = view(b, with_border, [*batch, math.prod(padded)])
    gathered = b.create(
        "torch.aten.index_select",
        [flat, int_constant(b, len(batch)), int_literal(b, gather_at.reshape(-1))],
        vtensor([*batch, gather_at.size], dtype),
    )
    windows = view(b, gathered, [*batch, *outputs, window])
    last = int_constant(b, len(batch) + spatial)
    kept = [*batch, *outputs, 1]
    with ir.InsertionPoint(op), op.location:  # max.dim's indices: torch-to-linalg lowers argmax as this op
        maximum = ir.Operation.create(
            "torch.aten.max.dim", results=[vtensor(kept, dtype), vtensor(kept, "si64")], operands=[windows, last, bool_constant(b, True)]
        )
    chosen = maximum.results[1]
    table = int_literal(b, original_at.reshape([1] * len(batch) + [*outputs, window]))
    if any(size != 1 for size in batch):
        every = [*batch, *outputs, window]
        table = b.create("torch.aten.broadcast_to", [table, int_list(b, every)], vtensor(every, "si64"))
    picked = b.create("torch.aten.gather", [table, last, chosen, bool_constant(b, False)], vtensor([*batch, *outputs, 1], "si64"))
    indices = view(b, picked, shape_of(op.results[1]))
    assert str(indices.type) == str(indices_type)
    op.results[0].replace_all_uses_with(values)
    op.results[1].replace_all_uses_with(indices)
    op.erase()


def _positions(
    outputs: list[int], kernel: list[int], stride: list[int], dilation: list[int], padding: list[int], sizes: list[int], padded: list[int]
) -> tuple[np.ndarray, np.ndarray]:
    """For every output and window element (row-major): its flat position in the padded input
    (to gather), and in the unpadded one (the index PyTorch reports; -1 for padding, never the
    maximum since padding is -inf)."""
    gather_at = np.zeros([*outputs, math.prod(kernel)], dtype=np.int64)
    original_at = np.full([*outputs, math.prod(kernel)], -1, dtype=np.int64)
    for out in itertools.product(*(range(o) for o in outputs)):
        for element, offset in enumerate(itertools.product(*(range(k) for k in kernel))):
            coordinate = [o * s + k * d for o, s, k, d in zip(out, stride, offset, dilation, strict=True)]
            gather_at[(*out, element)] = np.ravel_multi_index(coordinate, padded)
            unpadded = [c - p for c, p in zip(coordinate, padding, strict=True)]
            if all(0 <= u < size for u, size in zip(unpadded, sizes, strict=True)):
                original_at[(*out, element)] = np.ravel_multi_index(unpadded, sizes)
    return gather_at, original_at


PASS = Pass(
    name="decompose-pool-indices",
    summary="max_pool2d/3d_with_indices whose indices are read -> max_pool (values), argmax over gathered windows (indices)",
    level="torch",
    run=run,
)
