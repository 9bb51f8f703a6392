"""Building torch-dialect ops whose result type differs from their operand's: slices, views, permutes,
concatenations, reductions and integer literals, each typed from static shapes; and reading the
constant lists and bools that such ops take.

torch_ir.py reads IR and builds the ops that keep their operand's type; the decomposition passes
that move data around (decompose-slice-scatter, decompose-diagonal, decompose-unfold, ...) need
the rest, and compute every result shape here, as PyTorch would.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter
from .torch_ir import (
    TensorType,
    bool_constant,
    int_constant,
    int_list,
    none_constant,
    number,
    producer,
    tensor_type,
    vtensor,
)


def static_type(value: ir.Value) -> TensorType | None:
    """The value's tensor type if it is a `!torch.vtensor` of static shape; None otherwise."""
    described = tensor_type(value.type)
    return described if described is not None and described.static else None


def shape_of(value: ir.Value) -> tuple[int, ...]:
    described = static_type(value)
    assert described is not None, f"a static shape is needed, got {value.type}"
    return tuple(size for size in described.shape if size is not None)


def dtype_of(value: ir.Value) -> str:
    described = tensor_type(value.type)
    assert described is not None, f"a !torch.vtensor is needed, got {value.type}"
    return described.dtype


def constant_ints(value: ir.Value) -> list[int] | None:
    """The values of a `torch.prim.ListConstruct` of `torch.constant.int`s; None for anything else."""
    op = producer(value, "torch.prim.ListConstruct")
    items = [number(item) for item in op.operands] if op is not None else None
    return items if items is not None and all(isinstance(item, int) for item in items) else None


def constant_bool(value: ir.Value) -> bool | None:
    op = producer(value, "torch.constant.bool")
    return op.attributes["value"].value if op is not None else None


def int_literal(rewriter: Rewriter, values: np.ndarray) -> ir.Value:
    """A literal si64 tensor holding `values` (indices for gathers and scatters)."""
    array = np.ascontiguousarray(values, dtype=np.int64)
    attribute = ir.DenseElementsAttr.get(array, signless=False)
    return rewriter.create("torch.vtensor.literal", [], vtensor(array.shape, "si64"), {"value": attribute})


def slice_(rewriter: Rewriter, x: ir.Value, dim: int, start: int, end: int, step: int = 1) -> ir.Value:
    """`x[..., start:end:step, ...]` along `dim` (0 <= start <= end <= size, step >= 1).

    `dim` must have a static size; the others may be dynamic.
    """
    described = tensor_type(x.type)
    assert described is not None and described.shape[dim] is not None, f"a static size at {dim} is needed, got {x.type}"
    shape = list(described.shape)
    shape[dim] = len(range(start, end, step))
    operands = [x, *(int_constant(rewriter, number) for number in (dim, start, end, step))]
    return rewriter.create("torch.aten.slice.Tensor", operands, vtensor(shape, dtype_of(x)))


def cat(rewriter: Rewriter, values: Sequence[ir.Value], dim: int) -> ir.Value:
    shape = list(shape_of(values[0]))
    shape[dim] = sum(shape_of(value)[dim] for value in values)
    listed = rewriter.create("torch.prim.ListConstruct", list(values), ir.Type.parse("!torch.list<vtensor>"))
    return rewriter.create("torch.aten.cat", [listed, int_constant(rewriter, dim)], vtensor(shape, dtype_of(values[0])))


def permute(rewriter: Rewriter, x: ir.Value, order: Sequence[int]) -> ir.Value:
    """`x.permute(order)`; `x` itself when `order` is the identity."""
    if list(order) == list(range(len(order))):
        return x
    shape = shape_of(x)
    result = vtensor([shape[axis] for axis in order], dtype_of(x))
    return rewriter.create("torch.aten.permute", [x, int_list(rewriter, list(order))], result)


def view(rewriter: Rewriter, x: ir.Value, shape: Sequence[int]) -> ir.Value:
    """`x.view(shape)`; `x` itself when it has that shape already."""
    if tuple(shape) == shape_of(x):
        return x
    return rewriter.create("torch.aten.view", [x, int_list(rewriter, list(shape))], vtensor(shape, dtype_of(x)))


def reduce(
    rewriter: Rewriter, op_name: str, x: ir.Value, dims: Sequence[int], keepdim: bool, dtype: str | None = None
) -> ir.Value:
    """A reduction over `dims`: `torch.aten.sum.dim_IntList` (with its dtype argument None),
    `torch.aten.amax` or `torch.aten.amin`; the result has `dtype`, by default x's."""
    shape = [1 if axis in dims else size for axis, size in enumerate(shape_of(x)) if keepdim or axis not in dims]
    operands = [x, int_list(rewriter, list(dims)), bool_constant(rewriter, keepdim)]
    if op_name == "torch.aten.sum.dim_IntList":
        operands.append(none_constant(rewriter))
    return rewriter.create(op_name, operands, vtensor(shape, dtype or dtype_of(x)))
