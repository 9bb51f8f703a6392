"""decompose-math: elementwise functions outside kiln's primitive set become primitives.

    asinh(x) = ±log1p(|x| + x^2 / (1 + sqrt(1 + x^2))), with x's sign
    acosh(x) = log1p((x - 1) + sqrt((x - 1) * (x + 1)))
    atanh(x) = 0.5 * log1p(2x / (1 - x))
    isfinite(x) = |x| < inf                        (integers: all true)
    isclose(a, b) = a == b | (|a - b| finite and <= atol + |rtol * b|)   (| both NaN, if equal_nan)
    log10(x) = log(x) * (1 / ln 10)

Integers are converted to the result's float type first. The log1p forms keep full precision near 0 (and acosh near 1), where the textbook log forms
cancel; isclose is PyTorch's own definition. torch-mlir keeps the first five whole (outside kiln's
primitive set). log10 is a primitive, but IREE 3.13's llvm-cpu backend cannot link it ("undefined
symbol: log10f"); log and a multiplication are within an ulp of it. f16 and bf16 are computed in
f32 and rounded once, as PyTorch does; asinh overflows to NaN for |x| above ~1e19 (x^2 is inf),
and gives +0 for -0.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool
from .torch_ir import (
    HALF_TYPES,
    elementwise,
    float_constant,
    int_constant,
    number,
    tensor_type,
    to_dtype,
    vtensor,
)

Formula = Callable[[Rewriter, ir.Value], ir.Value]


def _add_scalar(rewriter: Rewriter, x: ir.Value, value: float) -> ir.Value:
    return elementwise(rewriter, "torch.aten.add.Scalar", x, float_constant(rewriter, value), int_constant(rewriter, 1))


def _mul_scalar(rewriter: Rewriter, x: ir.Value, value: float) -> ir.Value:
    return elementwise(rewriter, "torch.aten.mul.Scalar", x, float_constant(rewriter, value))


def _asinh(rewriter: Rewriter, x: ir.Value) -> ir.Value:
    magnitude = elementwise(rewriter, "torch.aten.abs", x)
    square = elementwise(rewriter, "torch.aten.mul.Tensor", magnitude, magnitude)
    root_plus_one = _add_scalar(rewriter, elementwise(rewriter, "torch.aten.sqrt", _add_scalar(rewriter, square, 1.0)), 1.0)
    ratio = elementwise(rewriter, "torch.aten.div.Tensor", square, root_plus_one)
    summed = elementwise(rewriter, "torch.aten.add.Tensor", magnitude, ratio, int_constant(rewriter, 1))
    result = elementwise(rewriter, "torch.aten.log1p", summed)
    negative = _predicate(rewriter, "torch.aten.lt.Scalar", [x, float_constant(rewriter, 0.0)], x)
    return rewriter.create("torch.aten.where.self", [negative, elementwise(rewriter, "torch.aten.neg", result), result], x.type)


def _acosh(rewriter: Rewriter, x: ir.Value) -> ir.Value:
    below = _add_scalar(rewriter, x, -1.0)
    product = elementwise(rewriter, "torch.aten.mul.Tensor", below, _add_scalar(rewriter, x, 1.0))
    summed = elementwise(rewriter, "torch.aten.add.Tensor", below, elementwise(rewriter, "torch.aten.sqrt", product), int_constant(rewriter, 1))
    return elementwise(rewriter, "torch.aten.log1p", summed)


def _atanh(rewriter: Rewriter, x: ir.Value) -> ir.Value:
    one_minus = elementwise(rewriter, "torch.aten.rsub.Scalar", x, float_constant(rewriter, 1.0), int_constant(rewriter, 1))
    ratio = elementwise(rewriter, "torch.aten.div.Tensor", _mul_scalar(rewriter, x, 2.0), one_minus)
    return _mul_scalar(rewriter, elementwise(rewriter, "torch.aten.log1p", ratio), 0.5)


def _log10(rewriter: Rewriter, x: ir.Value) -> ir.Value:
    return _mul_scalar(rewriter, elementwise(rewriter, "torch.aten.log", x), 1.0 / math.log(10.0))


FLOAT_FORMULAS: dict[str, Formula] = {
    "torch.aten.asinh": _asinh,
    "torch.aten.acosh": _acosh,
    "torch.aten.atanh": _atanh,
    "torch.aten.log10": _log10,
}


def decompose_float_function(op: ir.OpView, rewriter: Rewriter) -> None:
    """One of FLOAT_FORMULAS, computed in the result's float dtype (f32 for f16 and bf16; an
    integer x is converted first, as PyTorch promotes it)."""
    x = op.operands[0]
    source, result = tensor_type(x.type), tensor_type(op.result.type)
    if source is None or result is None or not result.is_float or source.dtype not in (result.dtype, *_INTEGERS):
        return
    compute = "f32" if result.dtype in HALF_TYPES else result.dtype
    value = FLOAT_FORMULAS[op.name](rewriter, x if source.dtype == compute else to_dtype(rewriter, x, compute))
    rewriter.replace(value if compute == result.dtype else to_dtype(rewriter, value, result.dtype))


_INTEGERS = ("i1", "ui8", "si8", "si16", "si32", "si64")


def _predicate(rewriter: Rewriter, op_name: str, operands: list[ir.Value], like: ir.Value) -> ir.Value:
    """An elementwise op with an i1 result shaped like `like`."""
    described = tensor_type(like.type)
    assert described is not None
    return rewriter.create(op_name, operands, vtensor(described.shape, "i1"))


def decompose_isfinite(op: ir.OpView, rewriter: Rewriter) -> None:
    x = op.operands[0]
    described = tensor_type(x.type)
    if described is None:
        return
    if not described.is_float:  # integers and bools are always finite
        rewriter.replace(_predicate(rewriter, "torch.aten.eq.Tensor", [x, x], x))
        return
    magnitude = elementwise(rewriter, "torch.aten.abs", x)
    rewriter.replace(_predicate(rewriter, "torch.aten.lt.Scalar", [magnitude, float_constant(rewriter, math.inf)], x))


def decompose_isclose(op: ir.OpView, rewriter: Rewriter) -> None:
    a, b, rtol_value, atol_value, equal_nan_value = op.operands
    described = tensor_type(a.type)
    rtol, atol, equal_nan = number(rtol_value), number(atol_value), constant_bool(equal_nan_value)
    if described is None or not described.is_float or str(a.type) != str(b.type):
        return
    if rtol is None or atol is None or equal_nan is None:
        return

    def either(p: ir.Value, q: ir.Value) -> ir.Value:
        return _predicate(rewriter, "torch.aten.logical_or", [p, q], a)

    def both(p: ir.Value, q: ir.Value) -> ir.Value:
        return _predicate(rewriter, "torch.aten.logical_and", [p, q], a)

    close = _predicate(rewriter, "torch.aten.eq.Tensor", [a, b], a)
    if equal_nan:
        # NaN is the one value unequal to itself (torch-to-linalg has no lowering of aten.isnan)
        close = either(close, both(_predicate(rewriter, "torch.aten.ne.Tensor", [a, a], a), _predicate(rewriter, "torch.aten.ne.Tensor", [b, b], a)))
    if rtol != 0 or atol != 0:
        allowed = _add_scalar(rewriter, elementwise(rewriter, "torch.aten.abs", _mul_scalar(rewriter, b, float(rtol))), float(atol))
        actual = elementwise(rewriter, "torch.aten.abs", elementwise(rewriter, "torch.aten.sub.Tensor", a, b, int_constant(rewriter, 1)))
        finite = _predicate(rewriter, "torch.aten.lt.Scalar", [actual, float_constant(rewriter, math.inf)], a)
        within = _predicate(rewriter, "torch.aten.le.Tensor", [actual, allowed], a)
        close = either(close, both(finite, within))
    rewriter.replace(close)


PASS = pattern_pass(
    "decompose-math",
    "asinh, acosh, atanh, isfinite, isclose, log10 -> log1p, sqrt, comparisons, ...",
    {
        **dict.fromkeys(FLOAT_FORMULAS, decompose_float_function),
        "torch.aten.isfinite": decompose_isfinite,
        "torch.aten.isclose": decompose_isclose,
    },
)
