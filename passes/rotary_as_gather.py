"""rotary-as-gather: a rotary embedding over part of each head becomes one op over the whole head.

Phi, GPT-NeoX, StableLM and Persimmon rotate only the first `r` of a head's `D` dimensions, as
transformers writes it:

    xr, xp = x[..., :r], x[..., r:]
    rotated = xr * cos + cat([-xr[..., h:], xr[..., :h]]) * sin        # h = r / 2
    out = cat([rotated, xp])

Slicing and concatenating the innermost dimension makes IREE copy all of Q and K into a layout with
that dimension outermost and back (Phi-2 at batch 8: 4.1 of its 16.2 ms a call, in transposes). The
same values, written over the whole head, are

    out = where(d < r, x * cos[idx] + x[perm] * (sin[idx] * sign), x)

with constant index vectors (`perm[d]` = d + h below h, d - h up to r, d beyond; `idx[d]` = d below
r, 0 beyond) and `sign` = -1 below h, +1 beyond (a `where` of `-sin` and `sin`): a gather by a
constant index, which IREE fuses into the one elementwise dispatch that reads Q or K where the
projection wrote it. Bit-identical:
(-a) * b is a * (-b) in IEEE arithmetic, and the `where` keeps the unrotated part exactly (inf too).
A full rotary (r = D) is left alone: IREE fuses its concatenation already.
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import dtype_of, int_literal
from .torch_ir import int_constant, number, producer, tensor_type, vtensor


def rotary_as_gather(cat: ir.OpView, rewriter: Rewriter) -> None:
    described = tensor_type(cat.result.type)
    parts = producer(cat.operands[0], "torch.prim.ListConstruct")
    if described is None or not described.shape or described.shape[-1] is None:
        return
    if parts is None or len(parts.operands) != 2:
        return
    rank, width = len(described.shape), described.shape[-1]
    if _last_dim(cat.operands[1], rank) is None:
        return
    rotated, unrotated = parts.operands
    kept = _head_slice(unrotated, rank)
    if kept is None or kept[2] < width:
        return
    x, r, _ = kept
    found = _rotary(rotated, x, r, rank)
    if found is None or str(x.type) != str(cat.result.type) or width <= r:
        return
    cos, sin = found
    half = r // 2
    perm = np.array([d + half if d < half else d - half if d < r else d for d in range(width)])
    idx = np.array([d if d < r else 0 for d in range(width)])
    last = int_constant(rewriter, rank - 1)

    def gather(value: ir.Value, indices: np.ndarray) -> ir.Value:
        shape = list(tensor_type(value.type).shape)  # type: ignore[union-attr]
        shape[-1] = width
        return rewriter.create(
            "torch.aten.index_select", [value, last, int_literal(rewriter, indices)], vtensor(shape, dtype_of(value))
        )

    sin_gathered = gather(sin, idx)
    negated = rewriter.create("torch.aten.neg", [sin_gathered], sin_gathered.type)
    sin_signed = rewriter.create(
        "torch.aten.where.self", [_bool_literal(rewriter, np.arange(width) < half), negated, sin_gathered], negated.type
    )
    straight = rewriter.create("torch.aten.mul.Tensor", [x, gather(cos, idx)], x.type)
    turned = rewriter.create("torch.aten.mul.Tensor", [gather(x, perm), sin_signed], x.type)
    total = rewriter.create("torch.aten.add.Tensor", [straight, turned, int_constant(rewriter, 1)], x.type)
    mask = _bool_literal(rewriter, np.arange(width) < r)
    rewriter.replace(rewriter.create("torch.aten.where.self", [mask, total, x], x.type))


def _rotary(value: ir.Value, x: ir.Value, r: int, rank: int) -> tuple[ir.Value, ir.Value] | None:
    """(cos, sin) if `value` is `x[..., :r] * cos + rotate_half(x[..., :r]) * sin` (either order of
    each product and of the sum), with cos and sin of `value`'s dtype and `r` wide."""
    add = producer(value, "torch.aten.add.Tensor")
    if add is None or number(add.operands[2]) != 1:
        return None
    a, b = add.operands[0], add.operands[1]
    for first, second in ((a, b), (b, a)):
        straight = _product_with(first, lambda v: _is_head_slice(v, x, 0, r, rank))
        turned = _product_with(second, lambda v: _is_rotate_half(v, x, r, rank))
        if straight is not None and turned is not None:
            cos, sin = straight, turned
            tables = [tensor_type(cos.type), tensor_type(sin.type)]
            if all(t is not None and t.shape[-1] == r and t.dtype == dtype_of(value) for t in tables):
                return cos, sin
    return None


def _product_with(value: ir.Value, is_factor: Callable[[ir.Value], bool]) -> ir.Value | None:
    """The other factor of `value` = mul(f, other) where is_factor(f), either order; None otherwise."""
    mul = producer(value, "torch.aten.mul.Tensor")
    if mul is None:
        return None
    a, b = mul.operands
    if is_factor(a):
        return b
    if is_factor(b):
        return a
    return None


def _is_rotate_half(value: ir.Value, x: ir.Value, r: int, rank: int) -> bool:
    """`cat([-y[..., h:], y[..., :h]], -1)` for y = x[..., :r], h = r / 2 (transformers' rotate_half)."""
    cat = producer(value, "torch.aten.cat")
    parts = producer(cat.operands[0], "torch.prim.ListConstruct") if cat is not None else None
    if cat is None or parts is None or len(parts.operands) != 2 or r % 2 or _last_dim(cat.operands[1], rank) is None:
        return False
    negated = producer(parts.operands[0], "torch.aten.neg")
    if negated is None:
        return False
    half = r // 2
    return _is_nested_slice(negated.operands[0], x, half, r, r, rank) and _is_nested_slice(
        parts.operands[1], x, 0, half, r, rank
    )


def _is_nested_slice(value: ir.Value, x: ir.Value, start: int, end: int, r: int, rank: int) -> bool:
    """`x[..., :r][..., start:end]`, or `x[..., start:end]` itself."""
    outer = _head_slice(value, rank)
    if outer is None or outer[1:] != (start, end):
        return False
    return outer[0] == x or _is_head_slice(outer[0], x, 0, r, rank)


def _is_head_slice(value: ir.Value, x: ir.Value, start: int, end: int, rank: int) -> bool:
    found = _head_slice(value, rank)
    return found is not None and found[0] == x and found[1:] == (start, min(end, _width(x)))


def _head_slice(value: ir.Value, rank: int) -> tuple[ir.Value, int, int] | None:
    """(x, start, end) if `value` is `x[..., start:end]` along the last dim with step 1, the end
    clamped to x's width; None otherwise."""
    op = producer(value, "torch.aten.slice.Tensor")
    if op is None or _last_dim(op.operands[1], rank) is None or number(op.operands[4]) != 1:
        return None
    x, start, end = op.operands[0], number(op.operands[2]), number(op.operands[3])
    width = _width(x)
    if not isinstance(start, int) or not isinstance(end, int) or width is None or not 0 <= start <= width or end < 0:
        return None
    return x, start, min(end, width)


def _width(value: ir.Value) -> int | None:
    described = tensor_type(value.type)
    return described.shape[-1] if described is not None and described.shape else None


def _last_dim(value: ir.Value, rank: int) -> int | None:
    dim = number(value)
    return dim if isinstance(dim, int) and dim % rank == rank - 1 and -rank <= dim < rank else None


def _bool_literal(rewriter: Rewriter, values: np.ndarray) -> ir.Value:
    builtin = ir.RankedTensorType.get(list(values.shape), ir.IntegerType.get_signless(1))
    attribute = ir.DenseElementsAttr.get(np.ascontiguousarray(values, dtype=np.bool_), type=builtin)
    return rewriter.create("torch.vtensor.literal", [], vtensor(values.shape, "i1"), {"value": attribute})


PASS = pattern_pass(
    "rotary-as-gather",
    "a rotary embedding over part of a head (slices and concatenations) -> one op over the whole head",
    {"torch.aten.cat": rotary_as_gather},
)
