"""The conformance suite's cases: one line per op variant, expanded into one Case per dtype.

Each case is a tiny module over one ATen op (as torch.export names it), its inputs described by
kind and shape with a seed of its own (runner.Arg), and optionally a tolerance. The runner
(runner.py) compiles and checks them; nothing here is a result.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch
from torch import nn

from kiln.runtime.tensors import short_dtype

from .runner import Arg, Case, Input

# ---------------------------------------------------------------------------------------------
# The case table. Each line is one op variant; `dtypes` expands it into one Case per dtype.
# ---------------------------------------------------------------------------------------------

F = nn.functional
F32, F16, BF16 = torch.float32, torch.float16, torch.bfloat16
I8, U8, I32, I64, BOOL = torch.int8, torch.uint8, torch.int32, torch.int64, torch.bool
HALVES = (F32, F16, BF16)
INTS = (I32, I64)


class Fn(nn.Module):
    """A function as a module: what most cases compile."""

    def __init__(self, function: Callable[..., Any]) -> None:
        super().__init__()
        self.function = function

    def forward(self, *args: torch.Tensor) -> Any:
        return self.function(*args)


def x(*shape: int) -> Arg:
    return Arg(shape)


def pos(*shape: int) -> Arg:
    return Arg(shape, "positive")


def unit(*shape: int) -> Arg:
    return Arg(shape, "unit")


def idx(high: int, *shape: int) -> Arg:
    return Arg(shape, "index", high)


def mask(*shape: int) -> Arg:
    return Arg(shape, "mask")


def typed(dtype: torch.dtype, *shape: int, high: int = 4) -> Arg:
    return Arg(shape, high=high, dtype=dtype)


def nonzero(*shape: int) -> Arg:
    """Values at least 0.5 (1 for integers) away from zero, either sign: divisors."""

    def make(generator: torch.Generator, dtype: torch.dtype) -> torch.Tensor:
        sign = torch.randint(0, 2, shape, generator=generator) * 2 - 1
        if dtype.is_floating_point:
            return (sign * (torch.rand(shape, generator=generator) + 0.5)).to(dtype)
        return (sign * torch.randint(1, 4, shape, generator=generator)).to(dtype)

    return make


def prob(*shape: int) -> Input:
    """Values in (0.05, 0.95): probabilities, logit's domain."""
    return lambda generator, dtype: (torch.rand(shape, generator=generator) * 0.9 + 0.05).to(dtype)


def permutation(size: int, columns: int) -> Input:
    """An int64 (size, columns) index whose every column is a permutation: scatter without collisions."""
    return lambda generator, dtype: torch.argsort(torch.rand(size, columns, generator=generator), dim=0)


def special_values(dtype: torch.dtype) -> torch.Tensor:
    values = [0.0, -0.0, 1.5, -2.5, 0.5, -0.5, 2.5, float("inf"), float("-inf"), float("nan")]
    return torch.tensor(values).to(dtype)


def sorted_values(*shape: int) -> Input:
    return lambda generator, dtype: torch.randn(shape, generator=generator).sort(dim=-1).values.to(dtype)


_CASES: list[Case] = []


def _aten(op: str) -> str:
    return f"aten.{op}" if "." in op else f"aten.{op}.default"


def fn(
    variant: str,
    op: str,
    function: Callable[..., Any],
    *args: Input,
    dtypes: Sequence[torch.dtype] = (F32,),
    tol: tuple[float, float] | None = None,
) -> None:
    """A case per dtype for `function(*inputs)`; `op` as torch.export names it, less `aten.`/`.default`."""
    mod(variant, op, lambda: Fn(function), *args, dtypes=dtypes, tol=tol)


def mod(
    variant: str,
    op: str,
    build: Callable[[], nn.Module],
    *args: Input,
    dtypes: Sequence[torch.dtype] = (F32,),
    tol: tuple[float, float] | None = None,
) -> None:
    """A case per dtype for the module `build()` makes (its weights drawn from the case's seed)."""
    for dtype in dtypes:
        _CASES.append(Case(f"{variant}[{short_dtype(dtype)}]", _aten(op), build, tuple(args), dtype, tol))


# Elementwise math, one input.
fn("abs", "abs", torch.abs, x(3, 5), dtypes=(*HALVES, *INTS))
fn("neg", "neg", torch.neg, x(3, 5), dtypes=(F32, I32, I64))
fn("exp", "exp", torch.exp, x(3, 5), dtypes=HALVES)
fn("exp2", "exp2", torch.exp2, x(3, 5))
fn("expm1", "expm1", torch.expm1, x(3, 5))
fn("log", "log", torch.log, pos(3, 5), dtypes=HALVES)
fn("log2", "log2", torch.log2, pos(3, 5))
fn("log10", "log10", torch.log10, pos(3, 5))
fn("log10.half", "log10", torch.log10, pos(3, 5), dtypes=(F16, BF16))
fn("log1p", "log1p", torch.log1p, pos(3, 5))
fn("sqrt", "sqrt", torch.sqrt, pos(3, 5), dtypes=HALVES)
fn("rsqrt", "rsqrt", torch.rsqrt, pos(3, 5), dtypes=HALVES)
fn("sin", "sin", torch.sin, x(3, 5), dtypes=HALVES)
fn("cos", "cos", torch.cos, x(3, 5), dtypes=HALVES)
fn("tan", "tan", torch.tan, unit(3, 5))
fn("asin", "asin", torch.asin, unit(3, 5))
fn("acos", "acos", torch.acos, unit(3, 5))
fn("atan", "atan", torch.atan, x(3, 5))
fn("sinh", "sinh", torch.sinh, x(3, 5))
fn("cosh", "cosh", torch.cosh, x(3, 5))
fn("tanh", "tanh", torch.tanh, x(3, 5), dtypes=HALVES)
fn("asinh", "asinh", torch.asinh, x(3, 5))
fn("asinh.large", "asinh", lambda a: torch.asinh(a * 1000), x(3, 5), dtypes=(F32, F16))
fn("acosh", "acosh", lambda a: torch.acosh(a + 1), pos(3, 5))
fn("atanh", "atanh", torch.atanh, unit(3, 5))
fn("erf", "erf", torch.erf, x(3, 5), dtypes=HALVES)
fn("erfc", "erfc", torch.erfc, x(3, 5))
fn("erfinv", "erfinv", torch.erfinv, unit(3, 5))
fn("reciprocal", "reciprocal", torch.reciprocal, nonzero(3, 5))
fn("floor", "floor", torch.floor, x(3, 5))
fn("ceil", "ceil", torch.ceil, x(3, 5))
fn("round", "round", torch.round, lambda generator, dtype: special_values(dtype)[:7])
fn("round.decimals", "round.decimals", lambda a: torch.round(a, decimals=2), x(3, 5))
fn("trunc", "trunc", torch.trunc, x(3, 5))
fn("frac", "frac", torch.frac, x(3, 5))
fn("sign", "sign", torch.sign, x(3, 5), dtypes=(F32, I32))
fn("sgn", "sgn", torch.sgn, x(3, 5))
fn("square", "square", torch.square, x(3, 5), dtypes=(F32, I64))
fn("logit", "logit", torch.logit, prob(3, 5))
fn("lgamma", "lgamma", torch.lgamma, pos(3, 5))
fn("digamma", "digamma", torch.digamma, pos(3, 5))
fn("i0", "i0", torch.i0, x(3, 5))
fn("sinc", "sinc", torch.sinc, x(3, 5))
fn("deg2rad", "deg2rad", torch.deg2rad, x(3, 5))
fn("rad2deg", "rad2deg", torch.rad2deg, x(3, 5))
fn("nan_to_num", "nan_to_num", torch.nan_to_num, lambda generator, dtype: special_values(dtype))
fn("signbit", "signbit", torch.signbit, lambda generator, dtype: special_values(dtype))
fn("isnan", "isnan", torch.isnan, lambda generator, dtype: special_values(dtype))
fn("isinf", "isinf", torch.isinf, lambda generator, dtype: special_values(dtype))
fn("isfinite", "isfinite", torch.isfinite, lambda generator, dtype: special_values(dtype))
fn("isfinite.int", "isfinite", torch.isfinite, x(3, 5), dtypes=(I64,))
fn("isneginf", "isneginf", torch.isneginf, lambda generator, dtype: special_values(dtype))
fn("isposinf", "isposinf", torch.isposinf, lambda generator, dtype: special_values(dtype))
fn("bitwise_not", "bitwise_not", torch.bitwise_not, x(3, 5), dtypes=(I32, I64, BOOL))
fn("logical_not", "logical_not", torch.logical_not, x(3, 5), dtypes=(F32, BOOL))
fn("clone", "clone", torch.clone, x(3, 5))

# Elementwise math, two or more inputs (broadcasting included).
fn("add.Tensor", "add.Tensor", torch.add, x(3, 5), x(3, 5), dtypes=(*HALVES, *INTS, I8, U8))
fn("add.Tensor.broadcast", "add.Tensor", torch.add, x(3, 1), x(1, 5))
fn("add.Tensor.alpha", "add.Tensor", lambda a, b: torch.add(a, b, alpha=2), x(3, 5), x(3, 5))
fn("add.Tensor.promote", "add.Tensor", torch.add, typed(I64, 3, 5), x(3, 5))
fn("add.Scalar", "add.Tensor", lambda a: a + 2.5, x(3, 5))
fn("sub.Tensor", "sub.Tensor", torch.sub, x(3, 5), x(3, 5), dtypes=(F32, I64))
fn("sub.Scalar", "sub.Tensor", lambda a: a - 1.5, x(3, 5))
fn("rsub.Scalar", "rsub.Scalar", lambda a: 1.5 - a, x(3, 5))
fn("mul.Tensor", "mul.Tensor", torch.mul, x(3, 5), x(3, 5), dtypes=(*HALVES, *INTS, BOOL))
fn("mul.Scalar", "mul.Tensor", lambda a: a * 3, x(3, 5))
fn("mul.Scalar.rounding", "mul.Tensor", lambda a: torch.floor(a * (1 / 3)), lambda g, d: (torch.randint(0, 30, (3, 5), generator=g) * 3).to(d))
fn("div.Tensor", "div.Tensor", torch.div, x(3, 5), nonzero(3, 5), dtypes=HALVES)
fn("div.Tensor.int", "div.Tensor", torch.div, x(3, 5), nonzero(3, 5), dtypes=INTS)
fn("div.Scalar", "div.Tensor", lambda a: a / 4, x(3, 5))
fn("div.trunc", "div.Tensor_mode", lambda a, b: torch.div(a, b, rounding_mode="trunc"), x(3, 5), nonzero(3, 5), dtypes=(F32, I64))
fn("div.floor", "div.Tensor_mode", lambda a, b: torch.div(a, b, rounding_mode="floor"), x(3, 5), nonzero(3, 5), dtypes=(F32, I64))
fn("floor_divide", "floor_divide", torch.floor_divide, x(3, 5), nonzero(3, 5), dtypes=(F32, I32))
fn("remainder.Tensor", "remainder.Tensor", torch.remainder, x(3, 5), nonzero(3, 5), dtypes=(F32, I64))
fn("remainder.Scalar", "remainder.Scalar", lambda a: torch.remainder(a, 1.5), x(3, 5))
fn("fmod.Tensor", "fmod.Tensor", torch.fmod, x(3, 5), nonzero(3, 5), dtypes=(F32, I32))
fn("fmod.Scalar", "fmod.Scalar", lambda a: torch.fmod(a, 1.5), x(3, 5), dtypes=(F32, F16))
fn("pow.Tensor_Tensor", "pow.Tensor_Tensor", torch.pow, pos(3, 5), x(3, 5))
fn("pow.Tensor_Scalar", "pow.Tensor_Scalar", lambda a: torch.pow(a, 3), x(3, 5), dtypes=(F32, F16, I32, I64))
fn("pow.Tensor_Scalar.half", "pow.Tensor_Scalar", lambda a: torch.pow(a, 0.5), pos(3, 5))
fn("pow.Scalar", "pow.Scalar", lambda a: torch.pow(2.0, a), x(3, 5))
fn("atan2", "atan2", torch.atan2, x(3, 5), x(3, 5))
fn("hypot", "hypot", torch.hypot, x(3, 5), x(3, 5))
fn("maximum", "maximum", torch.maximum, x(3, 5), x(3, 5), dtypes=(F32, BF16, I32))
fn("minimum", "minimum", torch.minimum, x(3, 5), x(3, 5), dtypes=(F32, I64))
fn("fmax", "fmax", torch.fmax, x(3, 5), x(3, 5))
fn("fmin", "fmin", torch.fmin, x(3, 5), x(3, 5))
fn("copysign", "copysign.Tensor", torch.copysign, x(3, 5), x(3, 5))
fn("logaddexp", "logaddexp", torch.logaddexp, x(3, 5), x(3, 5))
fn("logaddexp2", "logaddexp2", torch.logaddexp2, x(3, 5), x(3, 5))
fn("xlogy", "xlogy.Tensor", torch.xlogy, x(3, 5), pos(3, 5))
fn("lerp.Scalar", "lerp.Scalar", lambda a, b: torch.lerp(a, b, 0.3), x(3, 5), x(3, 5))
fn("lerp.Tensor", "lerp.Tensor", torch.lerp, x(3, 5), x(3, 5), prob(3, 5))
fn("addcmul", "addcmul", lambda a, b, c: torch.addcmul(a, b, c, value=0.5), x(3, 5), x(3, 5), x(3, 5))
fn("addcdiv", "addcdiv", lambda a, b, c: torch.addcdiv(a, b, c, value=0.5), x(3, 5), x(3, 5), nonzero(3, 5))
fn("clamp", "clamp", lambda a: torch.clamp(a, -0.5, 0.5), x(3, 5), dtypes=(F32, F16, I64))
fn("clamp.Tensor", "clamp.Tensor", torch.clamp, x(3, 5), x(3, 5), x(3, 5))
fn("clamp.int_bounds", "clamp", lambda a: torch.clamp(a, -2, 1), x(3, 5), dtypes=(I32, I64))
fn("clamp_min", "clamp_min", lambda a: torch.clamp_min(a, 0.1), x(3, 5))
fn("clamp_max", "clamp_max", lambda a: torch.clamp_max(a, 0.1), x(3, 5))
fn("heaviside", "heaviside", torch.heaviside, x(3, 5), x(3, 5))
fn("bitwise_and", "bitwise_and.Tensor", torch.bitwise_and, x(3, 5), x(3, 5), dtypes=(I32, I64, BOOL))
fn("bitwise_or", "bitwise_or.Tensor", torch.bitwise_or, x(3, 5), x(3, 5), dtypes=(I32, BOOL))
fn("bitwise_xor", "bitwise_xor.Tensor", torch.bitwise_xor, x(3, 5), x(3, 5), dtypes=(I64, BOOL))
fn("bitwise_left_shift", "bitwise_left_shift.Tensor", torch.bitwise_left_shift, x(3, 5), pos(3, 5), dtypes=(I32,))
fn("bitwise_right_shift", "bitwise_right_shift.Tensor", torch.bitwise_right_shift, x(3, 5), pos(3, 5), dtypes=(I64,))
fn("gcd", "gcd", torch.gcd, typed(I64, 3, 5, high=30), typed(I64, 3, 5, high=30), dtypes=(I64,))

# Comparisons and logic.
for _name in ("eq", "ne", "lt", "le", "gt", "ge"):
    _compare = getattr(torch, _name)
    fn(f"{_name}.Tensor", f"{_name}.Tensor", _compare, x(3, 5), x(3, 5), dtypes=(F32, I64))
    fn(f"{_name}.Scalar", f"{_name}.Scalar", lambda a, f=_compare: f(a, 0.25), x(3, 5))
fn("eq.Tensor.broadcast", "eq.Tensor", torch.eq, typed(I32, 4, 1), typed(I32, 1, 3), dtypes=(I32,))
fn("logical_and", "logical_and", torch.logical_and, x(3, 5), x(3, 5), dtypes=(F32, BOOL))
fn("logical_or", "logical_or", torch.logical_or, x(3, 5), x(3, 5), dtypes=(BOOL,))
fn("logical_xor", "logical_xor", torch.logical_xor, x(3, 5), x(3, 5), dtypes=(BOOL,))
fn("isclose", "isclose", lambda a, b: torch.isclose(a, a + b * 1e-6), x(3, 5), x(3, 5))
fn("where.self", "where.self", torch.where, mask(3, 5), x(3, 5), x(3, 5), dtypes=(*HALVES, I64))
fn("where.broadcast", "where.self", torch.where, mask(3, 1), x(1, 5), x(3, 5))
fn("where.ScalarOther", "where.ScalarOther", lambda c, a: torch.where(c, a, 0.0), mask(3, 5), x(3, 5))
fn("where.Scalar", "where.Scalar", lambda c: torch.where(c, 1.0, -1.0), mask(3, 5))
fn("masked_fill.Scalar", "masked_fill.Scalar", lambda a, m: a.masked_fill(m, -1.0), x(3, 5), mask(3, 5), dtypes=(F32, F16, I64))
fn("masked_fill.Tensor", "masked_fill.Tensor", lambda a, m, v: a.masked_fill(m, v), x(3, 5), mask(3, 5), x())
fn("masked_fill.broadcast", "masked_fill.Scalar", lambda a, m: a.masked_fill(m, float("-inf")), x(2, 3, 5), mask(3, 5))

# Reductions, over all elements and over dims with and without keepdim.
fn("sum", "sum", torch.sum, x(3, 5), dtypes=(*HALVES, I32, BOOL))
fn("sum.dim", "sum.dim_IntList", lambda a: a.sum(1), x(3, 4, 5), dtypes=(F32, F16, I64))
fn("sum.dims_keepdim", "sum.dim_IntList", lambda a: a.sum((0, 2), keepdim=True), x(3, 4, 5))
fn("sum.dtype", "sum.dim_IntList", lambda a: a.sum(-1, dtype=torch.float32), x(3, 5), dtypes=(F16,))
fn("mean", "mean", torch.mean, x(3, 5), dtypes=HALVES)
fn("mean.dim", "mean.dim", lambda a: a.mean(-1), x(3, 4, 5), dtypes=(F32, BF16))
fn("mean.dims_keepdim", "mean.dim", lambda a: a.mean((1, 2), keepdim=True), x(2, 3, 4, 5))
fn("nanmean", "nanmean", lambda a: a.nanmean(0), lambda generator, dtype: special_values(dtype).view(2, 5))
fn("nansum", "nansum", lambda a: a.nansum(), lambda generator, dtype: special_values(dtype)[:7])
fn("prod", "prod", torch.prod, unit(3, 4))
fn("prod.dim", "prod.dim_int", lambda a: a.prod(1, keepdim=True), x(3, 4), dtypes=(F32, I64))
fn("amax", "amax", lambda a: a.amax(1), x(3, 4, 5), dtypes=(F32, F16, I32))
fn("amax.dims_keepdim", "amax", lambda a: a.amax((0, 2), keepdim=True), x(3, 4, 5))
fn("amin", "amin", lambda a: a.amin(-1), x(3, 4, 5), dtypes=(F32, I64))
fn("max", "max", torch.max, x(3, 5), dtypes=(F32, I64))
fn("max.dim", "max.dim", lambda a: a.max(1), x(3, 5, 4))
fn("max.dim_keepdim", "max.dim", lambda a: a.max(-1, keepdim=True), x(3, 5), dtypes=(F32, BF16))
fn("min", "min", torch.min, x(3, 5))
fn("min.dim", "min.dim", lambda a: a.min(0), x(3, 5))
fn("aminmax", "aminmax", lambda a: torch.aminmax(a, dim=1), x(3, 5))
fn("argmax", "argmax", lambda a: a.argmax(), x(3, 5))
fn("argmax.dim", "argmax", lambda a: a.argmax(1), x(3, 5), dtypes=(F32, F16))
fn("argmax.dim_keepdim", "argmax", lambda a: a.argmax(0, keepdim=True), typed(I32, 4, 5, high=1000), dtypes=(I32,))
fn("argmin.dim", "argmin", lambda a: a.argmin(-1), x(3, 5))
fn("std", "std.correction", lambda a: a.std(), x(3, 5))
fn("std.dim", "std.dim", lambda a: a.std(1, keepdim=True), x(3, 5))
fn("var", "var.correction", lambda a: a.var(1, correction=0), x(3, 5), dtypes=(F32, F16))
fn("var_mean", "var_mean.dim", lambda a: torch.var_mean(a, 1), x(3, 5))
fn("std_mean", "std_mean.dim", lambda a: torch.std_mean(a, (0, 1)), x(3, 5))
fn("logsumexp", "logsumexp", lambda a: a.logsumexp(-1), x(3, 5), dtypes=(F32, BF16))
fn("norm", "linalg_vector_norm", lambda a: a.norm(), x(3, 5))
fn("norm.dim_p1", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a, 1, dim=1), x(3, 5))
fn("norm.inf", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a, float("inf"), dim=0), x(3, 5))
fn("norm.p3_keepdim", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a, 3, dim=-1, keepdim=True), x(3, 5))
fn("norm.p0", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a.relu(), 0, dim=1), x(3, 5))
fn("norm.half", "linalg_vector_norm", lambda a: torch.linalg.vector_norm(a, dim=(0, 1)), x(3, 5), dtypes=(F16, BF16))
fn("all", "all", torch.all, x(3, 5), dtypes=(BOOL, F32))
fn("all.dim", "all.dim", lambda a: a.all(1), x(3, 5), dtypes=(BOOL,))
fn("any", "any", torch.any, x(3, 5), dtypes=(BOOL,))
fn("any.dim", "any.dim", lambda a: a.any(0, keepdim=True), x(3, 5), dtypes=(BOOL, I32))
fn("count_nonzero", "count_nonzero", lambda a: torch.count_nonzero(a, dim=1), typed(I64, 3, 5, high=2), dtypes=(I64,))
fn("median", "median", torch.median, x(3, 5))
fn("median.dim", "median.dim", lambda a: torch.median(a, 1), x(3, 5))
fn("mode", "mode", lambda a: torch.mode(a, 1), typed(I64, 3, 7, high=3), dtypes=(I64,))

# Cumulative ops.
fn("cumsum", "cumsum", lambda a: a.cumsum(1), x(3, 5), dtypes=(F32, F16, I64))
fn("cumsum.dim0", "cumsum", lambda a: a.cumsum(0), x(4, 3, 2))
fn("cumsum.int_to_i64", "cumsum", lambda a: a.cumsum(-1), x(3, 5), dtypes=(I32, BOOL))
fn("cumprod", "cumprod", lambda a: a.cumprod(1), unit(3, 5))
fn("cummax", "cummax", lambda a: torch.cummax(a, 1), x(3, 5))
fn("cummin", "cummin", lambda a: torch.cummin(a, 0), x(3, 5))
fn("logcumsumexp", "logcumsumexp", lambda a: torch.logcumsumexp(a, 1), x(3, 5))
fn("diff", "diff", lambda a: torch.diff(a, dim=1), x(3, 5))

# The matmul family.
fn("mm", "mm", torch.mm, x(4, 6), x(6, 5), dtypes=HALVES)
fn("mm.int", "mm", torch.mm, x(4, 6), x(6, 5), dtypes=(I32, I64))
fn("bmm", "bmm", torch.bmm, x(2, 4, 6), x(2, 6, 5), dtypes=HALVES)
fn("matmul.2d", "matmul", torch.matmul, x(4, 6), x(6, 5))
fn("matmul.1d_2d", "matmul", torch.matmul, x(6), x(6, 5))
fn("matmul.2d_1d", "matmul", torch.matmul, x(4, 6), x(6))
fn("matmul.broadcast", "matmul", torch.matmul, x(2, 3, 4, 6), x(6, 5), dtypes=(F32, BF16))
fn("matmul.batched_broadcast", "matmul", torch.matmul, x(2, 1, 4, 6), x(3, 6, 5))
fn("mv", "mv", torch.mv, x(4, 6), x(6))
fn("dot", "dot", torch.dot, x(6), x(6))
fn("vdot", "vdot", torch.vdot, x(6), x(6))
fn("inner", "inner", torch.inner, x(3, 6), x(4, 6))
fn("outer", "outer", torch.outer, x(4), x(5))
fn("addmm", "addmm", lambda b, m1, m2: torch.addmm(b, m1, m2, beta=0.5, alpha=2), x(5), x(4, 6), x(6, 5))
fn("addmv", "addmv", torch.addmv, x(4), x(4, 6), x(6))
fn("addr", "addr", torch.addr, x(4, 5), x(4), x(5))
fn("baddbmm", "baddbmm", lambda b, m1, m2: torch.baddbmm(b, m1, m2, alpha=0.5), x(2, 4, 5), x(2, 4, 6), x(2, 6, 5))
fn("addbmm", "addbmm", torch.addbmm, x(4, 5), x(2, 4, 6), x(2, 6, 5))
mod("linear", "linear", lambda: nn.Linear(6, 5), x(3, 6), dtypes=HALVES)
mod("linear.no_bias", "linear", lambda: nn.Linear(6, 5, bias=False), x(2, 3, 6))
mod("bilinear", "bilinear", lambda: nn.Bilinear(4, 3, 5), x(2, 4), x(2, 3))
fn("einsum.matmul", "einsum", lambda a, b: torch.einsum("bij,bjk->bik", a, b), x(2, 3, 4), x(2, 4, 5))
fn("einsum.attention", "einsum", lambda q, k: torch.einsum("bhqd,bhkd->bhqk", q, k), x(1, 2, 4, 8), x(1, 2, 5, 8))
fn("einsum.trace_sum", "einsum", lambda a: torch.einsum("ii->", a), x(4, 4))
fn("tensordot", "tensordot", lambda a, b: torch.tensordot(a, b, dims=([1, 2], [0, 1])), x(2, 3, 4), x(3, 4, 5))
fn("kron", "kron", torch.kron, x(2, 3), x(2, 2))
fn("trace", "trace", torch.trace, x(4, 4))
fn("cross", "linalg_cross", lambda a, b: torch.linalg.cross(a, b), x(4, 3), x(4, 3))
fn("cdist", "cdist", torch.cdist, x(2, 4, 3), x(2, 5, 3), tol=(1e-4, 1e-4))
fn("cosine_similarity", "cosine_similarity", F.cosine_similarity, x(4, 8), x(4, 8))
fn("pairwise_distance", "pairwise_distance", F.pairwise_distance, x(4, 8), x(4, 8))
fn("det", "linalg_det", torch.linalg.det, x(2, 3, 3))
fn("inverse", "linalg_inv", torch.linalg.inv, lambda generator, dtype: (torch.randn(3, 3, generator=generator) + 3 * torch.eye(3)).to(dtype))

# Convolutions of 1-3 dims: stride, padding, dilation, groups, transposed.
mod("conv1d", "conv1d", lambda: nn.Conv1d(3, 4, 3), x(2, 3, 10), dtypes=HALVES)
mod("conv1d.stride2_pad1_dilation2", "conv1d", lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2), x(2, 3, 11))
mod("conv1d.groups", "conv1d", lambda: nn.Conv1d(4, 6, 3, groups=2, bias=False), x(2, 4, 9))
mod("conv1d.same", "conv1d.padding", lambda: nn.Conv1d(3, 4, 4, padding="same"), x(2, 3, 9))
mod("conv2d", "conv2d", lambda: nn.Conv2d(3, 4, 3), x(2, 3, 8, 8), dtypes=HALVES)
mod("conv2d.stride2_pad1", "conv2d", lambda: nn.Conv2d(3, 4, 3, stride=2, padding=1), x(2, 3, 9, 9))
mod("conv2d.dilation2", "conv2d", lambda: nn.Conv2d(3, 4, 3, dilation=2), x(1, 3, 9, 9))
mod("conv2d.groups", "conv2d", lambda: nn.Conv2d(4, 8, 3, groups=2, padding=1), x(1, 4, 6, 6), dtypes=(F32, F16))
mod("conv2d.depthwise", "conv2d", lambda: nn.Conv2d(4, 4, 3, groups=4), x(2, 4, 7, 7))
mod("conv2d.rect_asym", "conv2d", lambda: nn.Conv2d(3, 5, (1, 3), stride=(2, 1), padding=(0, 2)), x(1, 3, 6, 7))
mod("conv2d.same", "conv2d.padding", lambda: nn.Conv2d(3, 4, 3, padding="same", bias=False), x(1, 3, 6, 6))
mod("conv2d.reflect_padding", "conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="reflect"), x(1, 3, 6, 6))
mod("conv2d.circular_padding", "conv2d", lambda: nn.Conv2d(3, 4, 3, padding=1, padding_mode="circular"), x(1, 3, 6, 6))
mod("conv3d", "conv3d", lambda: nn.Conv3d(2, 3, 3), x(1, 2, 5, 6, 6), dtypes=(F32, BF16))
mod("conv3d.stride_pad_groups", "conv3d", lambda: nn.Conv3d(4, 4, 3, stride=2, padding=1, groups=2), x(1, 4, 5, 6, 6))
mod("conv_transpose1d", "conv_transpose1d", lambda: nn.ConvTranspose1d(3, 4, 3, stride=2), x(2, 3, 6))
mod("conv_transpose1d.pad_outpad", "conv_transpose1d", lambda: nn.ConvTranspose1d(3, 4, 3, stride=2, padding=1, output_padding=1), x(2, 3, 6))
mod("conv_transpose2d", "conv_transpose2d.input", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2), x(1, 3, 5, 5), dtypes=(F32, F16))
mod("conv_transpose2d.pad_outpad_dilation", "conv_transpose2d.input", lambda: nn.ConvTranspose2d(3, 4, 3, stride=2, padding=1, output_padding=1, dilation=2), x(1, 3, 5, 5))
mod("conv_transpose2d.groups", "conv_transpose2d.input", lambda: nn.ConvTranspose2d(4, 6, 2, stride=2, groups=2), x(1, 4, 4, 4))
mod("conv_transpose3d", "conv_transpose3d.input", lambda: nn.ConvTranspose3d(2, 3, 2, stride=2), x(1, 2, 3, 4, 4))

# Pooling of 1-3 dims.
fn("max_pool1d", "max_pool1d", lambda a: F.max_pool1d(a, 3, stride=2, padding=1), x(2, 3, 10))
fn("max_pool2d", "max_pool2d", lambda a: F.max_pool2d(a, 2), x(2, 3, 8, 8), dtypes=HALVES)
fn("max_pool2d.stride_pad", "max_pool2d", lambda a: F.max_pool2d(a, 3, stride=2, padding=1), x(1, 3, 9, 9))
fn("max_pool2d.dilation", "max_pool2d", lambda a: F.max_pool2d(a, 2, dilation=2), x(1, 3, 9, 9))
fn("max_pool2d.ceil_mode", "max_pool2d", lambda a: F.max_pool2d(a, 3, stride=2, ceil_mode=True), x(1, 3, 8, 8))
fn("max_pool2d.indices", "max_pool2d_with_indices", lambda a: F.max_pool2d(a, 2, return_indices=True), x(1, 3, 6, 6))
fn("max_pool2d.indices_pad_ceil", "max_pool2d_with_indices", lambda a: F.max_pool2d(a, 3, 2, 1, ceil_mode=True, return_indices=True), x(2, 2, 8, 8))
fn("max_pool1d.indices", "max_pool1d_with_indices", lambda a: F.max_pool1d(a, 3, 2, 1, return_indices=True), x(2, 3, 10))
fn("max_pool3d.indices", "max_pool3d_with_indices", lambda a: F.max_pool3d(a, 2, return_indices=True), x(1, 2, 4, 4, 4))
fn("max_pool3d", "max_pool3d", lambda a: F.max_pool3d(a, 2, stride=2, padding=1), x(1, 2, 5, 6, 6))
fn("avg_pool1d", "avg_pool1d", lambda a: F.avg_pool1d(a, 3, stride=2, padding=1), x(2, 3, 10))
fn("avg_pool2d", "avg_pool2d", lambda a: F.avg_pool2d(a, 2), x(2, 3, 8, 8), dtypes=(F32, F16))
fn("avg_pool2d.pad_exclude", "avg_pool2d", lambda a: F.avg_pool2d(a, 3, stride=2, padding=1, count_include_pad=False), x(1, 3, 9, 9))
fn("avg_pool2d.ceil_mode", "avg_pool2d", lambda a: F.avg_pool2d(a, 3, stride=2, ceil_mode=True), x(1, 3, 8, 8))
fn("avg_pool2d.divisor", "avg_pool2d", lambda a: F.avg_pool2d(a, 2, divisor_override=3), x(1, 3, 6, 6))
fn("avg_pool3d", "avg_pool3d", lambda a: F.avg_pool3d(a, 2, stride=2), x(1, 2, 4, 6, 6))
fn("adaptive_avg_pool1d", "adaptive_avg_pool1d", lambda a: F.adaptive_avg_pool1d(a, 4), x(2, 3, 8))
fn("adaptive_avg_pool2d", "adaptive_avg_pool2d", lambda a: F.adaptive_avg_pool2d(a, (2, 2)), x(2, 3, 8, 8), dtypes=(F32, BF16))
fn("adaptive_avg_pool2d.global", "adaptive_avg_pool2d", lambda a: F.adaptive_avg_pool2d(a, 1), x(2, 3, 7, 7))
fn("adaptive_avg_pool2d.uneven", "adaptive_avg_pool2d", lambda a: F.adaptive_avg_pool2d(a, (3, 4)), x(1, 3, 7, 9))
fn("adaptive_avg_pool3d", "adaptive_avg_pool3d", lambda a: F.adaptive_avg_pool3d(a, 2), x(1, 2, 4, 4, 4))
fn("adaptive_avg_pool3d.global", "adaptive_avg_pool3d", lambda a: F.adaptive_avg_pool3d(a, 1), x(1, 2, 3, 4, 5))
fn("adaptive_avg_pool3d.uneven", "adaptive_avg_pool3d", lambda a: F.adaptive_avg_pool3d(a, (2, 3, 2)), x(1, 2, 5, 4, 3))
fn("adaptive_max_pool1d", "adaptive_max_pool1d", lambda a: F.adaptive_max_pool1d(a, 4), x(2, 3, 8))
fn("adaptive_max_pool2d", "adaptive_max_pool2d", lambda a: F.adaptive_max_pool2d(a, 2), x(2, 3, 8, 8))
fn("adaptive_max_pool2d.uneven", "adaptive_max_pool2d", lambda a: F.adaptive_max_pool2d(a, (3, 2)), x(1, 3, 7, 5))
fn("lp_pool1d", "avg_pool1d", lambda a: F.lp_pool1d(a, 2, 3), pos(2, 3, 9))
fn("lp_pool2d", "avg_pool2d", lambda a: F.lp_pool2d(a, 2, 2), pos(1, 3, 6, 6))
fn("max_unpool2d", "max_unpool2d", lambda a: F.max_unpool2d(*F.max_pool2d(a, 2, return_indices=True), 2), x(1, 2, 4, 4))

# Normalizations (eval mode: batch norm uses its running statistics).
def _batch_norm(kind: type[nn.Module], channels: int) -> nn.Module:
    norm = kind(channels)
    norm.running_mean.uniform_(-1, 1)
    norm.running_var.uniform_(0.5, 2)
    norm.weight.data.uniform_(0.5, 1.5)
    norm.bias.data.uniform_(-0.5, 0.5)
    return norm


mod("batch_norm1d", "batch_norm", lambda: _batch_norm(nn.BatchNorm1d, 3), x(4, 3, 5))
mod("batch_norm2d", "batch_norm", lambda: _batch_norm(nn.BatchNorm2d, 3), x(2, 3, 4, 4), dtypes=HALVES)
mod("batch_norm3d", "batch_norm", lambda: _batch_norm(nn.BatchNorm3d, 2), x(1, 2, 3, 4, 4))
fn("batch_norm.functional", "batch_norm", lambda a, m, v: F.batch_norm(a, m, v, eps=1e-3), x(2, 3, 4), x(3), pos(3))
mod("layer_norm", "layer_norm", lambda: nn.LayerNorm(8), x(2, 3, 8), dtypes=HALVES)
mod("layer_norm.2d_no_affine", "layer_norm", lambda: nn.LayerNorm((3, 8), elementwise_affine=False), x(2, 3, 8))
mod("layer_norm.no_bias", "layer_norm", lambda: nn.LayerNorm(8, bias=False), x(4, 8))
mod("group_norm", "group_norm", lambda: nn.GroupNorm(2, 4), x(2, 4, 3, 3), dtypes=(F32, BF16))
mod("group_norm.per_channel", "group_norm", lambda: nn.GroupNorm(4, 4), x(2, 4, 5))
mod("instance_norm2d", "instance_norm", lambda: nn.InstanceNorm2d(3, affine=True), x(2, 3, 4, 4))
mod("instance_norm1d", "instance_norm", lambda: nn.InstanceNorm1d(3), x(2, 3, 6))
mod("rms_norm", "rms_norm", lambda: nn.RMSNorm(8), x(2, 3, 8), dtypes=HALVES)
mod("local_response_norm", "avg_pool3d", lambda: nn.LocalResponseNorm(3), x(2, 5, 4, 4))
fn("normalize", "linalg_vector_norm", lambda a: F.normalize(a, dim=-1), x(3, 8))

# Activations.
fn("relu", "relu", F.relu, x(3, 5), dtypes=(*HALVES, I64))
fn("relu6", "relu6", lambda a: F.relu6(a * 4), x(3, 5))
fn("leaky_relu", "leaky_relu", lambda a: F.leaky_relu(a, 0.1), x(3, 5), dtypes=(F32, F16))
fn("elu", "elu", F.elu, x(3, 5), dtypes=(F32, BF16))
fn("selu", "selu", F.selu, x(3, 5))
fn("celu", "celu", lambda a: F.celu(a, alpha=0.5), x(3, 5))
fn("gelu", "gelu", F.gelu, x(3, 5), dtypes=HALVES)
fn("gelu.tanh", "gelu", lambda a: F.gelu(a, approximate="tanh"), x(3, 5), dtypes=(F32, F16))
fn("silu", "silu", F.silu, x(3, 5), dtypes=HALVES)
fn("mish", "mish", F.mish, x(3, 5))
fn("softplus", "softplus", F.softplus, x(3, 5))
fn("softplus.beta_threshold", "softplus", lambda a: F.softplus(a * 10, beta=2, threshold=5), x(3, 5))
fn("softsign", "div.Tensor", F.softsign, x(3, 5))
fn("hardtanh", "hardtanh", lambda a: F.hardtanh(a, -0.5, 0.5), x(3, 5))
fn("hardsigmoid", "hardsigmoid", lambda a: F.hardsigmoid(a * 4), x(3, 5))
fn("hardswish", "hardswish", lambda a: F.hardswish(a * 4), x(3, 5))
fn("hardshrink", "hardshrink", F.hardshrink, x(3, 5))
fn("softshrink", "softshrink", F.softshrink, x(3, 5))
fn("tanhshrink", "tanh", F.tanhshrink, x(3, 5))
fn("logsigmoid", "log_sigmoid", F.logsigmoid, x(3, 5))
fn("sigmoid", "sigmoid", torch.sigmoid, x(3, 5), dtypes=HALVES)
mod("prelu", "prelu", lambda: nn.PReLU(3, init=0.2), x(2, 3, 4))
fn("glu", "glu", lambda a: F.glu(a, -1), x(3, 8))
fn("threshold", "threshold", lambda a: F.threshold(a, 0.1, 20.0), x(3, 5))
fn("rrelu.eval", "rrelu", lambda a: F.rrelu(a, training=False), x(3, 5))

# The softmax family.
fn("softmax", "softmax.int", lambda a: a.softmax(-1), x(3, 5), dtypes=HALVES)
fn("softmax.dim0", "softmax.int", lambda a: a.softmax(0), x(4, 3, 5))
fn("softmax.to_f32", "softmax.int", lambda a: a.softmax(-1, dtype=torch.float32), x(3, 5), dtypes=(F16,))
fn("log_softmax", "log_softmax.int", lambda a: a.log_softmax(1), x(3, 5), dtypes=HALVES)
fn("softmin", "softmax.int", lambda a: F.softmin(a, dim=-1), x(3, 5))
fn("softmax.masked_inf", "softmax.int", lambda a, m: a.masked_fill(m, float("-inf")).softmax(-1), x(3, 6), lambda g, d: torch.tensor([[True] * 3 + [False] * 3] * 3))

# Indexing: gather, scatter, index_put and friends.
fn("index_select", "index_select", lambda a, i: a.index_select(1, i), x(3, 5), idx(5, 4), dtypes=(F32, I64))
fn("gather", "gather", lambda a, i: a.gather(1, i), x(3, 5), idx(5, 3, 4), dtypes=(F32, F16, I32))
fn("gather.dim0", "gather", lambda a, i: torch.gather(a, 0, i), x(4, 3), idx(4, 6, 3))
fn("scatter.src", "scatter.src", lambda a, i, s: a.scatter(0, i, s), x(4, 5), permutation(4, 5), x(4, 5))
fn("scatter.value", "scatter.value", lambda a, i: a.scatter(0, i, 2.5), x(4, 5), permutation(4, 5))
fn("scatter.reduce_add", "scatter.reduce", lambda a, i, s: a.scatter(1, i, s, reduce="add"), x(3, 6), idx(6, 3, 4), x(3, 4))
fn("scatter_add", "scatter_add", lambda a, i, s: a.scatter_add(1, i, s), x(3, 6), idx(6, 3, 4), x(3, 4), dtypes=(F32, I64))
for _reduce in ("sum", "prod", "amax", "amin", "mean"):
    for _include_self in (True, False) if _reduce in ("sum", "mean") else (True,):
        fn(
            f"scatter_reduce.{_reduce}" + ("" if _include_self else "_exclude_self"),
            "scatter_reduce.two",
            lambda a, i, s, r=_reduce, keep=_include_self: a.scatter_reduce(1, i, s, reduce=r, include_self=keep),
            x(3, 6),
            idx(6, 3, 4),
            x(3, 4),
        )
fn("index_add", "index_add", lambda a, i, s: a.index_add(0, i, s, alpha=2), x(5, 3), idx(5, 4), x(4, 3))
fn("index_copy", "index_copy", lambda a, i, s: a.index_copy(0, i, s), x(5, 3), lambda g, d: torch.randperm(5, generator=g)[:3], x(3, 3))
fn("index_fill", "index_fill.int_Scalar", lambda a, i: a.index_fill(1, i, -1.0), x(3, 5), idx(5, 2))
fn("index_put", "index_put", lambda a, i, v: torch.index_put(a, (i,), v), x(6, 3), lambda g, d: torch.randperm(6, generator=g)[:4], x(4, 3))
fn("index_put.accumulate", "index_put", lambda a, i, v: torch.index_put(a, (i,), v, accumulate=True), x(6, 3), idx(6, 5), x(5, 3), dtypes=(F32, I64))
fn("index_put.2d", "index_put", lambda a, i, j, v: torch.index_put(a, (i, j), v), x(4, 5), lambda g, d: torch.tensor([0, 1, 3]), lambda g, d: torch.tensor([4, 0, 2]), x(3))
fn("setitem.index", "index_put_", lambda a, i, v: a.clone().index_put_((i,), v), x(6, 3), lambda g, d: torch.tensor([5, 0, 2]), x(3, 3))
fn("index.Tensor", "index.Tensor", lambda a, i: a[i], x(5, 3), idx(5, 2, 4), dtypes=(F32, BF16, I32))
fn("index.Tensor.two", "index.Tensor", lambda a, i, j: a[i, j], x(5, 4), idx(5, 3), idx(4, 3))
fn("index.Tensor.middle", "index.Tensor", lambda a, i: a[:, i], x(3, 5, 2), idx(5, 4))
fn("index.Tensor.broadcast", "index.Tensor", lambda a, i, j: a[i[:, None], j], x(5, 4), idx(5, 3), idx(4, 2))
fn("index.mask", "index.Tensor", lambda a, m: a[m], x(3, 5), mask(3, 5))
fn("take", "take", lambda a, i: torch.take(a, i), x(3, 5), idx(15, 6))
fn("take_along_dim", "take_along_dim", lambda a, i: torch.take_along_dim(a, i, dim=1), x(3, 5), idx(5, 3, 2))
fn("masked_scatter", "masked_scatter", lambda a, m, s: a.masked_scatter(m, s), x(3, 5), mask(3, 5), x(3, 5))
fn("masked_select", "masked_select", torch.masked_select, x(3, 5), mask(3, 5))
fn("nonzero", "nonzero", torch.nonzero, x(3, 5), dtypes=(BOOL,))
fn("select.int", "select.int", lambda a: a[:, 2], x(3, 5, 2), dtypes=(F32, I64))
fn("select.negative", "select.int", lambda a: a[-1], x(3, 5))
fn("select_scatter", "select_scatter", lambda a, s: torch.select_scatter(a, s, 1, 2), x(3, 5), x(3))
fn("slice_scatter", "slice_scatter", lambda a, s: torch.slice_scatter(a, s, 1, 1, 5, 2), x(3, 6), x(3, 2))
fn("diagonal_scatter", "diagonal_scatter", lambda a, s: torch.diagonal_scatter(a, s, 1), x(4, 5), x(4))
fn("diagonal_scatter.batched", "diagonal_scatter", lambda a, s: torch.diagonal_scatter(a, s, 0, 1, 2), x(2, 3, 3), x(2, 3))
fn("slice_scatter.step1", "slice_scatter", lambda a, s: torch.slice_scatter(a, s, 0, 1, 3), x(4, 3), x(2, 3))


def _set_columns(a: torch.Tensor, s: torch.Tensor) -> torch.Tensor:
    out = a.clone()
    out[:, 1:3] = s
    return out


fn("setitem.slice", "copy_", _set_columns, x(3, 5), x(3, 2))

# Slicing, joining and splitting.
fn("slice", "slice.Tensor", lambda a: a[1:, ::2], x(4, 7), dtypes=(F32, F16, I64, BOOL))
fn("slice.negative", "slice.Tensor", lambda a: a[..., -3:-1], x(2, 3, 6))
fn("narrow", "narrow", lambda a: a.narrow(1, 1, 3), x(3, 6))
fn("cat", "cat", lambda a, b: torch.cat((a, b)), x(2, 5), x(3, 5), dtypes=(F32, BF16, I64, BOOL))
fn("cat.dim1_three", "cat", lambda a, b, c: torch.cat((a, b, c), 1), x(2, 3), x(2, 1), x(2, 4))
fn("cat.promote", "cat", lambda a, b: torch.cat((a, b), -1), x(2, 3), typed(I64, 2, 2))
fn("stack", "stack", lambda a, b: torch.stack((a, b), 1), x(2, 5), x(2, 5), dtypes=(F32, I32))
fn("hstack", "hstack", lambda a, b: torch.hstack((a, b)), x(2, 3), x(2, 2))
fn("vstack", "vstack", lambda a, b: torch.vstack((a, b)), x(3), x(3))
fn("dstack", "dstack", lambda a, b: torch.dstack((a, b)), x(2, 3), x(2, 3))
fn("split", "split.Tensor", lambda a: a.split(2, 1), x(3, 7))
fn("split_with_sizes", "split_with_sizes", lambda a: a.split([1, 4, 2], 1), x(3, 7), dtypes=(F32, I64))
fn("chunk", "chunk", lambda a: a.chunk(3, 0), x(7, 2))
fn("tensor_split", "tensor_split.indices", lambda a: torch.tensor_split(a, [1, 4], dim=1), x(2, 6))
fn("unbind", "unbind.int", lambda a: a.unbind(1), x(2, 3, 4))
fn("flip", "flip", lambda a: a.flip(0, 2), x(2, 3, 4), dtypes=(F32, I64))
fn("roll", "roll", lambda a: a.roll(2, 1), x(3, 5))
fn("roll.multi", "roll", lambda a: a.roll((1, -2), (0, 1)), x(3, 5))
fn("rot90", "rot90", lambda a: torch.rot90(a, 1, (0, 1)), x(3, 4))
fn("repeat", "repeat", lambda a: a.repeat(2, 1, 3), x(2, 3), dtypes=(F32, I64))
fn("repeat_interleave", "repeat_interleave.self_int", lambda a: a.repeat_interleave(2, 1), x(2, 3))
fn("repeat_interleave.tensor", "repeat_interleave.self_Tensor", lambda a: a.repeat_interleave(torch.tensor([1, 2, 3]), dim=0), x(3, 2))
fn("tile", "tile", lambda a: a.tile((2, 2)), x(2, 3))
fn("expand", "expand", lambda a: a.expand(3, 4, 5), x(4, 1), dtypes=(F32, BOOL))
fn("broadcast_to", "broadcast_to", lambda a: torch.broadcast_to(a, (2, 3, 5)), x(3, 1))
fn("expand_as", "expand_as", lambda a, b: a.expand_as(b), x(1, 5), x(3, 5))
fn("meshgrid", "meshgrid.indexing", lambda a, b: torch.meshgrid(a, b, indexing="ij"), x(3), x(4))
fn("unfold", "unfold", lambda a: a.unfold(1, 3, 2), x(2, 7))
fn("unfold.dim0_3d", "unfold", lambda a: a.unfold(0, 2, 3), x(5, 2, 3))
fn("im2col", "im2col", lambda a: F.unfold(a, 2, stride=2), x(1, 2, 4, 4))
fn("col2im", "col2im", lambda a: F.fold(a, (4, 4), 2, stride=2), x(1, 8, 4))

# Views and permutes.
fn("view", "view", lambda a: a.view(4, 6), x(2, 3, 4), dtypes=(F32, I64))
fn("view.infer", "view", lambda a: a.view(-1, 4), x(2, 3, 4))
fn("reshape", "reshape", lambda a: a.transpose(0, 1).reshape(6, 4), x(2, 3, 4))
fn("flatten", "flatten.using_ints", lambda a: a.flatten(1), x(2, 3, 4))
fn("unflatten", "unflatten.int", lambda a: a.unflatten(1, (2, 3)), x(4, 6))
fn("squeeze", "squeeze", lambda a: a.squeeze(), x(2, 1, 3, 1))
fn("squeeze.dim", "squeeze.dim", lambda a: a.squeeze(1), x(2, 1, 3))
fn("unsqueeze", "unsqueeze", lambda a: a.unsqueeze(1), x(2, 3), dtypes=(F32, BOOL))
fn("permute", "permute", lambda a: a.permute(2, 0, 1), x(2, 3, 4), dtypes=(F32, F16, I32))
fn("transpose", "transpose.int", lambda a: a.transpose(1, 2), x(2, 3, 4))
fn("t", "t", lambda a: a.t(), x(3, 4))
fn("mT", "mT", lambda a: a.mT, x(2, 3, 4))
fn("movedim", "movedim.int", lambda a: a.movedim(0, -1), x(2, 3, 4))
fn("swapaxes", "swapaxes", lambda a: a.swapaxes(0, 2), x(2, 3, 4))
fn("contiguous", "contiguous", lambda a: a.t().contiguous(), x(3, 4))
fn("diagonal", "diagonal", lambda a: a.diagonal(1), x(4, 5))
fn("diagonal.below_3d", "diagonal", lambda a: a.diagonal(-1, 0, 2), x(3, 2, 4))
fn("diag", "diag", torch.diag, x(4))
fn("diag_embed", "diag_embed", torch.diag_embed, x(2, 3))
fn("tril", "tril", lambda a: a.tril(), x(4, 5))
fn("triu", "triu", lambda a: a.triu(1), x(4, 5), dtypes=(F32, I64))
fn("as_strided", "as_strided", lambda a: a.as_strided((3, 3), (1, 3)), x(3, 4))
fn("view_as", "view_as", lambda a, b: a.view_as(b), x(6), x(2, 3))
fn("alias_detach", "detach", lambda a: a.detach() * 2, x(3))

# Padding modes.
fn("pad.constant", "pad", lambda a: F.pad(a, (1, 2), value=0.5), x(2, 3, 4), dtypes=(F32, F16, I64))
fn("pad.constant_2d", "pad", lambda a: F.pad(a, (1, 1, 2, 0)), x(1, 2, 3, 4))
fn("pad.constant_negative", "pad", lambda a: F.pad(a, (-1, 2, 0, -1)), x(2, 4, 5))
fn("pad.crop_only", "pad", lambda a: F.pad(a, (-1, -2)), x(2, 6), dtypes=(F32, I64))
fn("pad.reflect_1d", "pad", lambda a: F.pad(a, (2, 1), mode="reflect"), x(2, 3, 5))
fn("pad.reflect_2d", "pad", lambda a: F.pad(a, (1, 2, 2, 1), mode="reflect"), x(1, 2, 4, 5), dtypes=(F32, BF16))
fn("pad.reflect_3d", "pad", lambda a: F.pad(a, (1, 1, 1, 1, 1, 1), mode="reflect"), x(1, 2, 3, 4, 4))
fn("pad.replicate_1d", "pad", lambda a: F.pad(a, (2, 1), mode="replicate"), x(2, 3, 5))
fn("pad.replicate_2d", "pad", lambda a: F.pad(a, (1, 2, 2, 1), mode="replicate"), x(1, 2, 4, 5))
fn("pad.replicate_3d", "pad", lambda a: F.pad(a, (1, 0, 0, 1, 1, 1), mode="replicate"), x(1, 2, 3, 4, 4))
fn("pad.circular_1d", "pad", lambda a: F.pad(a, (2, 1), mode="circular"), x(2, 3, 5))
fn("pad.circular_2d", "pad", lambda a: F.pad(a, (1, 2, 2, 1), mode="circular"), x(1, 2, 4, 5))
fn("pad.circular_3d", "pad", lambda a: F.pad(a, (1, 1, 1, 0, 0, 1), mode="circular"), x(1, 2, 3, 4, 4))

# Interpolation and resampling.
fn("interpolate.nearest_1d", "upsample_nearest1d.vec", lambda a: F.interpolate(a, scale_factor=2), x(2, 3, 5))
fn("interpolate.nearest_2d", "upsample_nearest2d.vec", lambda a: F.interpolate(a, scale_factor=2), x(1, 3, 4, 5), dtypes=(F32, F16))
fn("interpolate.nearest_2d_size", "upsample_nearest2d.vec", lambda a: F.interpolate(a, size=(7, 3)), x(1, 2, 4, 5))
fn("interpolate.nearest_3d", "upsample_nearest3d.vec", lambda a: F.interpolate(a, scale_factor=2), x(1, 2, 2, 3, 3))
fn("interpolate.nearest_exact", "_upsample_nearest_exact2d.vec", lambda a: F.interpolate(a, size=(7, 3), mode="nearest-exact"), x(1, 2, 4, 5))
fn("interpolate.nearest_exact_scale", "_upsample_nearest_exact2d.vec", lambda a: F.interpolate(a, scale_factor=1.5, mode="nearest-exact"), x(1, 2, 4, 6))
fn("interpolate.nearest_2d_down", "upsample_nearest2d.vec", lambda a: F.interpolate(a, size=(3, 2)), x(1, 2, 7, 5))
fn("interpolate.linear", "upsample_linear1d.vec", lambda a: F.interpolate(a, scale_factor=2, mode="linear"), x(2, 3, 5))
fn("interpolate.bilinear", "upsample_bilinear2d.vec", lambda a: F.interpolate(a, scale_factor=2, mode="bilinear"), x(1, 3, 4, 5), dtypes=(F32, BF16))
fn("interpolate.bilinear_align", "upsample_bilinear2d.vec", lambda a: F.interpolate(a, size=(7, 9), mode="bilinear", align_corners=True), x(1, 2, 4, 5))
fn("interpolate.bilinear_down", "upsample_bilinear2d.vec", lambda a: F.interpolate(a, size=(3, 2), mode="bilinear"), x(1, 2, 6, 5))
fn("interpolate.bicubic", "upsample_bicubic2d.vec", lambda a: F.interpolate(a, scale_factor=2, mode="bicubic"), x(1, 2, 4, 4))
fn("interpolate.trilinear", "upsample_trilinear3d.vec", lambda a: F.interpolate(a, scale_factor=2, mode="trilinear"), x(1, 2, 2, 3, 3))
fn("interpolate.area", "adaptive_avg_pool2d", lambda a: F.interpolate(a, size=(2, 3), mode="area"), x(1, 2, 4, 6))
fn("pixel_shuffle", "pixel_shuffle", lambda a: F.pixel_shuffle(a, 2), x(1, 8, 3, 3))
fn("pixel_unshuffle", "pixel_unshuffle", lambda a: F.pixel_unshuffle(a, 2), x(1, 2, 4, 6))
fn("grid_sample", "grid_sampler", lambda a, g: F.grid_sample(a, g, align_corners=False), x(1, 2, 4, 5), unit(1, 3, 3, 2))
fn("grid_sample.nearest", "grid_sampler", lambda a, g: F.grid_sample(a, g, mode="nearest", align_corners=True), x(1, 2, 4, 5), unit(1, 3, 3, 2))
fn("affine_grid", "affine_grid_generator", lambda t: F.affine_grid(t, [1, 2, 3, 4], align_corners=False), x(1, 2, 3))

# Sorting, top-k, searching.
fn("sort", "sort", lambda a: a.sort(-1), x(3, 6), dtypes=(F32, F16))
fn("sort.descending_dim0", "sort", lambda a: a.sort(0, descending=True), x(5, 3))
fn("sort.stable_int", "sort.stable", lambda a: torch.sort(a, stable=True).values, typed(I64, 3, 8, high=100), dtypes=(I64,))
fn("argsort", "argsort", lambda a: a.argsort(1), x(3, 6))
fn("msort", "msort", torch.msort, x(5, 3))
fn("topk", "topk", lambda a: a.topk(3), x(3, 8), dtypes=(F32, BF16))
fn("topk.smallest_dim0", "topk", lambda a: a.topk(2, 0, largest=False), x(6, 3))
fn("kthvalue", "kthvalue", lambda a: a.kthvalue(2, 1), x(3, 6))
fn("searchsorted", "searchsorted.Tensor", torch.searchsorted, sorted_values(3, 6), x(3, 4))
fn("bucketize", "bucketize.Tensor", lambda a, b: torch.bucketize(a, b), x(3, 4), sorted_values(6))
fn("unique", "unique_dim", lambda a: torch.unique(a, dim=0), typed(I64, 6, 2, high=2), dtypes=(I64,))

# Embedding.
mod("embedding", "embedding", lambda: nn.Embedding(10, 4), idx(10, 2, 5), dtypes=(F32, F16, BF16))
mod("embedding.padding_idx", "embedding", lambda: nn.Embedding(10, 4, padding_idx=0), idx(10, 3, 4))
mod("embedding_bag.sum", "embedding_bag.padding_idx", lambda: nn.EmbeddingBag(10, 4, mode="sum"), idx(10, 3, 4))
mod("embedding_bag.mean", "embedding_bag.padding_idx", lambda: nn.EmbeddingBag(10, 4, mode="mean"), idx(10, 3, 4))
mod("embedding_bag.max", "embedding_bag.padding_idx", lambda: nn.EmbeddingBag(10, 4, mode="max"), idx(10, 3, 4))
mod(
    "embedding_bag.offsets_weighted",
    "embedding_bag.padding_idx",
    lambda: nn.EmbeddingBag(10, 4, mode="sum"),
    idx(10, 8),
    lambda g, d: torch.tensor([0, 3, 3, 6]),
    x(8),
)
mod("embedding_bag.mean_padding_idx", "embedding_bag.padding_idx", lambda: nn.EmbeddingBag(10, 4, mode="mean", padding_idx=2), idx(4, 3, 4))
fn("one_hot", "one_hot", lambda i: F.one_hot(i, 6), idx(6, 3, 4), dtypes=(I64,))

# Attention.
fn("sdpa", "scaled_dot_product_attention", F.scaled_dot_product_attention, x(2, 2, 5, 8), x(2, 2, 6, 8), x(2, 2, 6, 8), dtypes=HALVES)
fn("sdpa.causal", "scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True), x(1, 2, 6, 8), x(1, 2, 6, 8), x(1, 2, 6, 8), dtypes=(F32, F16))
fn("sdpa.bool_mask", "scaled_dot_product_attention", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), x(1, 2, 5, 8), x(1, 2, 6, 8), x(1, 2, 6, 8), lambda g, d: torch.rand(5, 6, generator=g) < 0.7)
fn("sdpa.float_mask", "scaled_dot_product_attention", lambda q, k, v, m: F.scaled_dot_product_attention(q, k, v, attn_mask=m), x(1, 2, 5, 8), x(1, 2, 6, 8), x(1, 2, 6, 8), x(1, 1, 5, 6))
fn("sdpa.scale", "scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, scale=0.5), x(2, 4, 8), x(2, 6, 8), x(2, 6, 8))
fn("sdpa.gqa", "scaled_dot_product_attention", lambda q, k, v: F.scaled_dot_product_attention(q, k, v, enable_gqa=True), x(1, 4, 5, 8), x(1, 2, 5, 8), x(1, 2, 5, 8))


class _SelfAttention(nn.Module):
    """nn.MultiheadAttention as models call it: self-attention, batch first, no weights returned."""

    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(16, 2, batch_first=True)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return self.attention(a, a, a, need_weights=False)[0]


mod("multi_head_attention", "linear", _SelfAttention, x(2, 5, 16))

# Type conversions.
fn("to.f16", "to.dtype", lambda a: a.to(torch.float16), x(3, 5))
fn("to.bf16", "to.dtype", lambda a: a.to(torch.bfloat16), x(3, 5))
fn("to.f32", "to.dtype", lambda a: a.to(torch.float32), x(3, 5), dtypes=(F16, BF16, I64, BOOL))
fn("to.i32_truncate", "to.dtype", lambda a: (a * 10).to(torch.int32), x(3, 5))
fn("to.i64", "to.dtype", lambda a: a.to(torch.int64), x(3, 5), dtypes=(I32, BOOL))
fn("to.i8", "to.dtype", lambda a: a.to(torch.int8), x(3, 5), dtypes=(I32,))
fn("to.u8", "to.dtype", lambda a: a.to(torch.uint8), x(3, 5), dtypes=(I64, BOOL))
fn("to.bool", "to.dtype", lambda a: a.to(torch.bool), x(3, 5), dtypes=(F32, I64))
fn("to.f64", "to.dtype", lambda a: a.double() * 3, x(3, 5))
fn("type_as", "type_as", lambda a, b: a.type_as(b), x(3, 5), typed(I32, 3, 5))

# Creating tensors inside the model.
fn("arange", "arange.start_step", lambda a: a + torch.arange(1, 11, 2), x(3, 5))
fn("arange.float", "arange.start_step", lambda a: a * torch.arange(0.0, 1.0, 0.2), x(3, 5))
fn("zeros_like", "zeros_like", lambda a: torch.zeros_like(a) + a.sum(), x(3, 5))
fn("ones_like", "ones_like", lambda a: torch.ones_like(a, dtype=torch.int64), x(3, 5))
fn("full_like", "full_like", lambda a: torch.full_like(a, 7), x(3, 5), dtypes=(F32, I32))
fn("full", "full", lambda a: a * torch.full((3, 5), 2.5), x(3, 5))
fn("new_zeros", "new_zeros", lambda a: a.new_zeros((2, 5)) + a[0], x(3, 5))
fn("new_ones", "new_ones", lambda a: a.new_ones(5) + a, x(3, 5))
fn("eye", "eye", lambda a: a + torch.eye(4), x(4, 4))
fn("linspace", "linspace", lambda a: a * torch.linspace(-1, 1, 5), x(3, 5))
fn("scalar_tensor", "scalar_tensor", lambda a: a * torch.scalar_tensor(3.0), x(3, 5))
fn("fill_", "fill_.Scalar", lambda a: a.clone().fill_(1.5) + a, x(3, 5))
fn("zero_", "zero_", lambda a: a.clone().zero_() + 1, x(3, 5))
fn("tril_indices", "tril_indices", lambda a: a[tuple(torch.tril_indices(4, 4))], x(4, 4))
fn("dropout.eval", "dropout", lambda a: F.dropout(a, 0.5, training=False) * 2, x(3, 5))

# Losses.
fn("mse_loss", "mse_loss", F.mse_loss, x(3, 5), x(3, 5))
fn("l1_loss", "l1_loss", lambda a, b: F.l1_loss(a, b, reduction="sum"), x(3, 5), x(3, 5))
fn("smooth_l1_loss", "smooth_l1_loss", F.smooth_l1_loss, x(3, 5), x(3, 5))
fn("huber_loss", "huber_loss", lambda a, b: F.huber_loss(a, b, reduction="none", delta=0.5), x(3, 5), x(3, 5))
fn("nll_loss", "nll_loss_nd", F.nll_loss, x(4, 6), idx(6, 4))
fn("cross_entropy", "cross_entropy_loss", F.cross_entropy, x(4, 6), idx(6, 4))
fn("cross_entropy.label_smoothing", "cross_entropy_loss", lambda a, t: F.cross_entropy(a, t, label_smoothing=0.1), x(4, 6), idx(6, 4))
fn("cross_entropy.probabilities", "cross_entropy_loss", lambda a, t: F.cross_entropy(a, t.softmax(-1)), x(4, 6), x(4, 6))
fn("binary_cross_entropy", "binary_cross_entropy", F.binary_cross_entropy, prob(3, 5), prob(3, 5))
fn("binary_cross_entropy_with_logits", "binary_cross_entropy_with_logits", F.binary_cross_entropy_with_logits, x(3, 5), prob(3, 5))
fn("kl_div", "kl_div", lambda a, b: F.kl_div(a.log_softmax(-1), b.softmax(-1), reduction="batchmean"), x(3, 5), x(3, 5))

CASES: tuple[Case, ...] = tuple(_CASES)
