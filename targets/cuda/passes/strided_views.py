"""Which elements of an earlier tensor a chain of torch layout ops reads, as one strided window.

A kernel that reads its operands through strides need not have them copied into a layout of their
own: `permute`, `transpose`, `select`, `slice`, `squeeze`, `unsqueeze` and a `view` that splits or
merges dimensions only re-index the elements of the tensor they start from. `strided_view` walks
such a chain back from a value to the first tensor that is not a layout op's result (its root,
contiguous in row-major order: a value tensor has no layout of its own) and says where each element
of the value lies in it: an offset and a stride per dimension. A dimension a view merged from ones
that are not adjacent in memory is kept as its parts until a later view splits it again (as
nn.MultiheadAttention's batch-and-heads dimension is); one still merged at the end, or a view that
would have to cut inside a part, gives no answer.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from kiln.passes.torch_build import constant_ints, static_type
from kiln.passes.torch_ir import defining_op, number

# The layout ops, each with the tensor it reads as its first operand and integer arguments after it.
LAYOUT_OPS = (
    "torch.aten.permute", "torch.aten.transpose.int", "torch.aten.select.int", "torch.aten.slice.Tensor",
    "torch.aten.squeeze.dim", "torch.aten.unsqueeze", "torch.aten.view", "torch.aten.reshape",
)  # fmt: skip


@dataclass(frozen=True)
class StridedView:
    """`value` is the elements of `root` at `offset + sum(index[i] * strides[i])` (elements)."""

    root: ir.Value
    chain: tuple[ir.Operation, ...]  # the layout ops from root to value, in order
    shape: tuple[int, ...]
    offset: int
    strides: tuple[int, ...]


def strided_view(value: ir.Value) -> StridedView | None:
    """The strided window of the root that `value` is (the root itself with no layout op); None where
    a shape is not static or a view would copy."""
    chain: list[ir.Operation] = []
    root = value
    op = defining_op(root)
    while op is not None and op.name in LAYOUT_OPS:
        chain.append(op)
        root = op.operands[0]
        op = defining_op(root)
    described = static_type(root)
    if described is None or 0 in described.shape:
        return None
    shape = list(described.shape)
    contiguous = zip(shape, _contiguous(shape), strict=True)
    dims: list[Dim] = [((size, stride),) if size != 1 else () for size, stride in contiguous]
    offset = 0
    for op in reversed(chain):
        window = _apply(op, dims, offset)
        if window is None:
            return None
        dims, offset = window
    if any(len(dim) > 1 for dim in dims):  # a dimension still merged: no one stride walks it
        return None
    final = tuple(_size(dim) for dim in dims)
    return StridedView(root, tuple(reversed(chain)), final, offset, tuple(dim[0][1] if dim else 0 for dim in dims))


def integer_arguments(op: ir.Operation) -> list[int | list[int]] | None:
    """`op`'s arguments after its tensor: an int, or a list of them (a `prim.ListConstruct`); None
    where one is not a constant."""
    arguments: list[int | list[int]] = []
    for operand in list(op.operands)[1:]:
        listed, value = constant_ints(operand), number(operand)
        if listed is not None:
            arguments.append(listed)
        elif isinstance(value, int):
            arguments.append(value)
        else:
            return None
    return arguments


# A dimension as the elements it walks: (size, stride) factors, outermost first; a dimension of
# merged ones (a view that flattened them) keeps one factor each, so a later view can split it again
# where a single stride could not say it. Size-1 factors are dropped: () is a dimension of size 1.
Dim = tuple[tuple[int, int], ...]


def _apply(op: ir.Operation, dims: list[Dim], offset: int) -> tuple[list[Dim], int] | None:
    arguments = integer_arguments(op)
    if arguments is None:
        return None
    rank = len(dims)
    name = op.name
    if name == "torch.aten.permute":
        (order,) = arguments
        return [dims[axis % rank] for axis in order], offset  # type: ignore[union-attr]
    if name == "torch.aten.transpose.int":
        first, second = (int(axis) % rank for axis in arguments)  # type: ignore[arg-type]
        dims = list(dims)
        dims[first], dims[second] = dims[second], dims[first]
        return dims, offset
    if name == "torch.aten.select.int":
        dim, index = (int(item) for item in arguments)  # type: ignore[arg-type]
        dim %= rank
        index %= _size(dims[dim])
        for size, stride in reversed(dims[dim]):  # the index's digits, innermost factor first
            offset += (index % size) * stride
            index //= size
        return dims[:dim] + dims[dim + 1 :], offset
    if name == "torch.aten.slice.Tensor":
        dim, start, end, step = (int(item) for item in arguments)  # type: ignore[arg-type]
        dim %= rank
        size = _size(dims[dim])
        start, end = (min(max(bound + size if bound < 0 else bound, 0), size) for bound in (start, end))
        if step <= 0 or len(dims[dim]) > 1:  # a slice of merged dimensions is no longer strided
            return None
        stride = dims[dim][0][1] if dims[dim] else 0
        length = max(0, -(-(end - start) // step))
        dims = list(dims)
        dims[dim] = ((length, stride * step),) if length != 1 else ()
        return dims, offset + start * stride
    if name == "torch.aten.squeeze.dim":
        dim = int(arguments[0]) % rank  # type: ignore[arg-type]
        return (dims[:dim] + dims[dim + 1 :], offset) if not dims[dim] else (dims, offset)
    if name == "torch.aten.unsqueeze":
        dim = int(arguments[0]) % (rank + 1)  # type: ignore[arg-type]
        return [*dims[:dim], (), *dims[dim:]], offset
    viewed_type = static_type(op.results[0])  # view, reshape
    if viewed_type is None:
        return None
    viewed = _viewed(dims, list(viewed_type.shape))  # type: ignore[arg-type]
    return (viewed, offset) if viewed is not None else None


def _viewed(dims: list[Dim], new_shape: list[int]) -> list[Dim] | None:
    """`dims` as `new_shape`, the same elements in the same order: each new dimension takes factors
    from the innermost end, splitting one where it takes only part of it; None where a size does not
    divide a factor (torch's view would copy)."""
    factors = [factor for dim in dims for factor in dim]
    viewed: list[Dim] = []
    for size in reversed(new_shape):
        taken: list[tuple[int, int]] = []
        while size > 1:
            if not factors:
                return None
            whole, stride = factors.pop()
            if whole <= size:
                if size % whole:
                    return None
                taken.insert(0, (whole, stride))
                size //= whole
            else:
                if whole % size:
                    return None
                taken.insert(0, (size, stride))
                factors.append((whole // size, stride * size))
                size = 1
        viewed.insert(0, tuple(taken))
    return viewed if not factors else None


def _size(dim: Dim) -> int:
    size = 1
    for factor, _ in dim:
        size *= factor
    return size


def _contiguous(shape: list[int]) -> list[int]:
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step)
        step *= size
    return list(reversed(strides))
