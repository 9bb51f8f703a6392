"""A matmul's weight that `--quantize` made (compiler/quantize.py): found so the GEMV reads its bytes.

A quantized Linear dequantizes its weight with torch ops before multiplying; matched here exactly
(the ops QuantizedLinear.dequantized gives, after kiln's passes), so outline-contractions can hand
the kernel the int8 values and f32 scales instead of the dequantized weight:

- int8, a scale per output channel: `to(mul(to(V, f32), S[N, 1]), dtype)`;
- int4 in halves with a scale per group of G: `to(view(mul(view(sub(to(cat([V & 15, (V >> 4) & 15], 1),
  f32), 8), [N, K/G, G]), unsqueeze(S, -1)), [N, K]), dtype)`.

The last rounding to the model's dtype is where the kernel differs: it multiplies by the f32 weight
(one rounding fewer, as its f32 accumulation already is).
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from kiln.passes.torch_build import constant_ints, static_type
from kiln.passes.torch_ir import number, producer, splat

# The ops of both forms, pure: erased with the matmul once the call reads the bytes instead
DEQUANTIZING = (
    "torch.aten.mul.Tensor", "torch.aten.sub.Scalar", "torch.aten.cat", "torch.aten.bitwise_and.Tensor",
    "torch.aten.__rshift__.Scalar", "torch.aten.unsqueeze", "torch.aten.view", "torch.aten.to.dtype",
)  # fmt: skip


@dataclass(frozen=True)
class QuantizedWeight:
    """W[N, K] as `ops` make it from `values` (int8: [N, K]; int4: [N, K/2], two a byte) and `scales`
    (f32 [N, 1], or [N, K/group])."""

    values: ir.Value
    scales: ir.Value
    bits: int
    group: int  # 0: a scale per output channel
    ops: tuple[ir.Operation, ...]  # producers first: replayed from the values and scales

    @property
    def scheme(self) -> list[int]:
        """As outline-contractions' description holds it (Matmul.quantized)."""
        return [self.bits, self.group]


def match(weight: ir.Value) -> QuantizedWeight | None:
    """The quantized weight `weight` is dequantized from, if it is one of the two forms above."""
    rounded = producer(weight, "torch.aten.to.dtype")
    if rounded is not None and _dtype(rounded.operands[0]) == "f32":
        dequantized, rounding = rounded.operands[0], (rounded,)
    elif _dtype(weight) == "f32":
        dequantized, rounding = weight, ()
    else:
        return None
    view = producer(dequantized, "torch.aten.view")
    if view is not None:
        return _int4(view, rounding)
    return _int8(dequantized, rounding)


def _int8(dequantized: ir.Value, rounding: tuple[ir.Operation, ...]) -> QuantizedWeight | None:
    mul = producer(dequantized, "torch.aten.mul.Tensor")
    widened = producer(mul.operands[0], "torch.aten.to.dtype") if mul is not None else None
    if mul is None or widened is None:
        return None
    values, scales = widened.operands[0], mul.operands[1]
    shape = _shape(dequantized)
    if _dtype(values) != "si8" or _dtype(scales) != "f32" or _shape(values) != shape or shape is None or _shape(scales) != (shape[0], 1):
        return None
    return QuantizedWeight(values, scales, 8, 0, (widened, mul, *rounding))


def _int4(view: ir.Operation, rounding: tuple[ir.Operation, ...]) -> QuantizedWeight | None:
    shape = _shape(view.results[0])
    mul = producer(view.operands[0], "torch.aten.mul.Tensor")
    if shape is None or len(shape) != 2 or mul is None:
        return None
    (n, k), grouped = shape, _shape(mul.results[0])
    unsqueeze = producer(mul.operands[1], "torch.aten.unsqueeze")
    split = producer(mul.operands[0], "torch.aten.view")
    if grouped is None or len(grouped) != 3 or unsqueeze is None or split is None or number(unsqueeze.operands[1]) not in (-1, 2):
        return None
    group = grouped[2]
    scales = unsqueeze.operands[0]
    sub = producer(split.operands[0], "torch.aten.sub.Scalar")
    widened = producer(sub.operands[0], "torch.aten.to.dtype") if sub is not None else None
    if sub is None or widened is None or number(sub.operands[1]) != 8 or number(sub.operands[2]) != 1:
        return None
    cat = producer(widened.operands[0], "torch.aten.cat")
    parts = producer(cat.operands[0], "torch.prim.ListConstruct") if cat is not None else None
    if cat is None or parts is None or len(parts.operands) != 2 or number(cat.operands[1]) not in (1, -1):
        return None
    low, high = (producer(part, "torch.aten.bitwise_and.Tensor") for part in parts.operands)
    shifted = producer(high.operands[0], "torch.aten.__rshift__.Scalar") if high is not None else None
    if low is None or high is None or shifted is None or splat(low.operands[1]) != 15 or splat(high.operands[1]) != 15:
        return None
    values = low.operands[0]
    if shifted.operands[0] != values or number(shifted.operands[1]) != 4 or _dtype(values) != "si8" or _dtype(scales) != "f32":
        return None
    if k % (2 * group) or _shape(values) != (n, k // 2) or _shape(scales) != (n, k // group) or grouped != (n, k // group, group):
        return None
    if constant_ints(split.operands[1]) is None or constant_ints(view.operands[1]) is None:
        return None
    chain = (low, shifted, high, parts, cat, widened, sub, split, unsqueeze, mul, view, *rounding)
    return QuantizedWeight(values, scales, 4, group, chain)


def _dtype(value: ir.Value) -> str | None:
    described = static_type(value)
    return described.dtype if described is not None else None


def _shape(value: ir.Value) -> tuple[int, ...] | None:
    described = static_type(value)
    return tuple(size for size in described.shape if size is not None) if described is not None else None
