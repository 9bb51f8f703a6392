"""The module suite: whole modules as users write them, compiled by kiln and compared with eager PyTorch.

The op suite (cases.py) asks whether kiln compiles an op; this one asks whether a module's call
comes back as eager's does: Python scalars in and out, inputs and buffers mutated in place, every
dtype at the boundary, nested results, zero-size tensors, constants, and ops outside kiln's
primitive set that the stack beneath it lowers. Each case says which of these it exercises (its
`op`, the topic), and every result is compared with eager's on nesting, dtype, shape and values,
and so are the inputs after the call. A case with `calls` > 1 also checks state the module keeps
between calls. `kiln ops --suite modules --plain` runs the same cases through plain torch-mlir and
IREE as well (plain.py) and lists first the cases only kiln fails.

Cases are written from the failure classes of issue 13 and from what real models do; the held-out
suite that measured those classes is not here.
"""

from __future__ import annotations

import collections
import math
from collections.abc import Callable
from typing import Any, NamedTuple

import torch
import torch.ao.quantization.fx._decomposed  # registers torch.ops.quantized_decomposed
from torch import nn

from .cases import Fn
from .runner import Arg, Case, Input

F = nn.functional
F32, F64, F16, BF16 = torch.float32, torch.float64, torch.float16, torch.bfloat16
I8, U8, I16, I32, I64, BOOL = torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64, torch.bool
C64 = torch.complex64

# The topics, in the order the table shows them.
TOPICS = ("primitives", "dtypes", "mutation", "state", "scalars", "nesting", "zero-size", "complex", "constants", "models")

_CASES: list[Case] = []


def mod(
    name: str, topic: str, build: Callable[[], nn.Module], *args: Input, tol: tuple[float, float] | None = None, calls: int = 1
) -> None:
    """A case for the module `build()` makes, called with `args` (its weights drawn from the case's seed)."""
    assert topic in TOPICS, topic
    _CASES.append(Case(name, topic, build, tuple(args), None, tol, calls))


def fn(name: str, topic: str, function: Callable[..., Any], *args: Input, tol: tuple[float, float] | None = None) -> None:
    """A case for `function(*args)` as a module."""
    mod(name, topic, lambda: Fn(function), *args, tol=tol)


def x(*shape: int, dtype: torch.dtype = F32) -> Arg:
    return Arg(shape, dtype=dtype)


def pos(*shape: int, dtype: torch.dtype = F32) -> Arg:
    return Arg(shape, "positive", dtype=dtype)


def ints(*shape: int, dtype: torch.dtype = I64, high: int = 4) -> Arg:
    return Arg(shape, high=high, dtype=dtype)


def idx(high: int, *shape: int) -> Arg:
    return Arg(shape, "index", high)


def mask(*shape: int) -> Arg:
    return Arg(shape, "mask")


def values(*items: Any, dtype: torch.dtype = F32) -> Input:
    """A tensor of exactly these values."""
    return lambda generator, case_dtype: torch.tensor(items, dtype=dtype)


def randn(*shape: int, dtype: torch.dtype = F32) -> Input:
    return lambda generator, case_dtype: torch.randn(shape, generator=generator).to(dtype)


def complex_randn(*shape: int) -> Input:
    return lambda generator, case_dtype: torch.complex(torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))


def bytes_(*shape: int) -> Input:
    """uint8 values over the whole range, as images hold them."""
    return lambda generator, case_dtype: torch.randint(0, 256, shape, generator=generator).to(U8)


def pair(*shape: int) -> Input:
    return lambda generator, case_dtype: (torch.randn(shape, generator=generator), torch.randn(shape, generator=generator))


# ---------------------------------------------------------------------------------------------
# Ops outside kiln's primitive set that the stack beneath it lowers (the primitive gate).
# ---------------------------------------------------------------------------------------------

fn("vector_norm.ord3", "primitives", lambda a: torch.linalg.vector_norm(a, ord=3, dim=-1), x(3, 5))
fn("vector_norm.inf_keepdim", "primitives", lambda a: torch.linalg.vector_norm(a, ord=math.inf, dim=(0, 1), keepdim=True), x(2, 3, 4))
fn("norm.p0", "primitives", lambda a: torch.norm(a, p=0), x(3, 5))
fn("norm.frobenius_dims", "primitives", lambda a: torch.norm(a, dim=(1, 2)), x(2, 3, 4))
fn("normalize.l1", "primitives", lambda a: F.normalize(a, p=1.0, dim=0), x(3, 5))
fn("slice_scatter.step2", "primitives", lambda a, b: torch.slice_scatter(a, b, dim=1, start=0, end=6, step=2), x(3, 6), x(3, 3))
fn("slice_scatter.dim0", "primitives", lambda a, b: torch.slice_scatter(a, b, dim=0, start=1, end=3), x(4, 5), x(2, 5))
fn("select_scatter", "primitives", lambda a, b: torch.select_scatter(a, b, 1, 2), x(3, 4), x(3))
fn("diagonal.offset_3d", "primitives", lambda a: torch.diagonal(a, offset=1, dim1=0, dim2=2), x(4, 3, 5))
fn("diag_embed", "primitives", torch.diag_embed, x(2, 4))
fn("unfold.overlapping", "primitives", lambda a: a.unfold(1, 3, 1), x(2, 7))
fn("unfold.last_dim_step", "primitives", lambda a: a.unfold(-1, 2, 3), x(3, 4, 8))
fn("isclose.equal_nan", "primitives", lambda a, b: torch.isclose(a, b, rtol=0.1, atol=0.1, equal_nan=True), x(3, 5), x(3, 5))
fn("any.dims", "primitives", lambda a: (a > 0.5).any(dim=(0, 2)), x(3, 4, 5))
fn("all.dims", "primitives", lambda a: (a > -2).all(dim=(1, 2)), x(3, 4, 5))
fn("bitwise_and.scalar", "primitives", lambda a: a & 3, ints(3, 5, high=100))
fn("rshift.scalar", "primitives", lambda a: a >> 2, ints(3, 5, high=100))
fn("lshift.scalar", "primitives", lambda a: a << 1, ints(3, 5, dtype=I32, high=100))
fn("matmul.vector_batch", "primitives", torch.matmul, x(4), x(2, 4, 3))
fn("matmul.batch_vector", "primitives", torch.matmul, x(2, 3, 4), x(4))
fn("transpose.negative", "primitives", lambda a: a.transpose(-1, -3).contiguous() * 2, x(2, 3, 4))
fn("adaptive_max_pool3d", "primitives", lambda a: F.adaptive_max_pool3d(a, 2), x(1, 2, 4, 4, 4))
fn("linalg_det", "primitives", torch.linalg.det, x(2, 3, 3))
fn("uniform.bounded", "primitives", lambda a: a + (torch.rand_like(a) < 2.0).float(), x(3, 5))
fn("quantize_dequantize.per_tensor", "primitives",
   lambda a: torch.ops.quantized_decomposed.dequantize_per_tensor(
       torch.ops.quantized_decomposed.quantize_per_tensor(a, 0.05, 3, -128, 127, torch.int8), 0.05, 3, -128, 127, torch.int8),
   x(3, 5))  # fmt: skip
fn("fake_quantize.per_tensor", "primitives", lambda a: torch.fake_quantize_per_tensor_affine(a, 0.1, 0, -128, 127), x(3, 5))
fn("embedding_bag.max", "primitives", lambda i, w: F.embedding_bag(i, w, mode="max"), idx(10, 3, 4), x(10, 4))
fn("embedding_bag.per_sample_weights", "primitives",
   lambda i, w, o, s: F.embedding_bag(i, w, o, mode="sum", per_sample_weights=s), idx(10, 8), x(10, 4), values(0, 3, 5, dtype=I64), x(8))  # fmt: skip
fn("upsample_nearest2d_backward", "primitives",
   lambda g: torch.ops.aten.upsample_nearest2d_backward(g, [4, 4], [1, 1, 2, 2], None, None), x(1, 1, 4, 4))  # fmt: skip
fn("convolution_backward.input", "primitives",
   lambda g, a, w: torch.ops.aten.convolution_backward(g, a, w, None, [1, 1], [0, 0], [1, 1], False, [0, 0], 1, [True, False, False])[0],
   x(1, 2, 3, 3), x(1, 3, 5, 5), x(2, 3, 3, 3))  # fmt: skip
fn("max_pool2d_with_indices_backward", "primitives",
   lambda g, a: torch.ops.aten.max_pool2d_with_indices_backward(g, a, [2, 2], [2, 2], [0, 0], [1, 1], False,
                                                                F.max_pool2d(a, 2, return_indices=True)[1]),
   x(1, 1, 2, 2), x(1, 1, 4, 4))  # fmt: skip
fn("pixel_shuffle", "primitives", lambda a: F.pixel_shuffle(a, 2), x(1, 8, 3, 3))
fn("flatten.middle", "primitives", lambda a: a.permute(0, 2, 1, 3).flatten(1, 2), x(2, 3, 4, 5))
fn("logsumexp", "primitives", lambda a: torch.logsumexp(a, dim=1), x(3, 5))
fn("cumsum.reverse", "primitives", lambda a: a.flip(-1).cumsum(-1).flip(-1), x(3, 5))
fn("trace", "primitives", torch.trace, x(4, 4))
fn("tril.offset", "primitives", lambda a: torch.tril(a, diagonal=-1), x(4, 5))
fn("roll", "primitives", lambda a: torch.roll(a, shifts=(1, -2), dims=(0, 1)), x(3, 5))
fn("var.unbiased", "primitives", lambda a: torch.var(a, dim=1, unbiased=True), x(3, 5))
fn("std_mean", "primitives", lambda a: torch.std_mean(a, dim=0), x(4, 5))
fn("glu", "primitives", lambda a: F.glu(a, dim=-1), x(3, 6))
fn("logcumsumexp", "primitives", lambda a: torch.logcumsumexp(a, dim=1), x(3, 5))
fn("renorm", "primitives", lambda a: torch.renorm(a, p=2, dim=0, maxnorm=1.0), x(3, 5))
fn("bucketize", "primitives", lambda a: torch.bucketize(a, torch.tensor([-1.0, 0.0, 1.0])), x(3, 5))

# ---------------------------------------------------------------------------------------------
# Every dtype at the boundary: what goes in comes back as eager gives it.
# ---------------------------------------------------------------------------------------------


class F64Offset(nn.Module):
    """A float64 buffer added to a float32 input: the result is float64, as type promotion says."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("offset", torch.linspace(0, 1, 4, dtype=torch.float64))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        return a + self.offset


fn("f64.elementwise", "dtypes", lambda a: (a * 3).exp() - 1, x(3, 5, dtype=F64))
fn("f64.third", "dtypes", lambda a: a * (1 / 3), x(3, 5, dtype=F64), tol=(0.0, 0.0))
mod("f64.linear", "dtypes", lambda: nn.Linear(5, 4).double(), x(3, 5, dtype=F64))
fn("f64.reductions", "dtypes", lambda a: (a.sum(1), a.mean(), a.amax(0)), x(3, 5, dtype=F64))
fn("f64.from_f32", "dtypes", lambda a: a.double() / 7, x(3, 5))
fn("f64.to_f32", "dtypes", lambda a: (a * 1e-3).float(), x(3, 5, dtype=F64))
fn("f64.softmax", "dtypes", lambda a: a.softmax(-1), x(3, 5, dtype=F64))
fn("u8.add_wraps", "dtypes", lambda a, b: a + b, bytes_(3, 5), bytes_(3, 5))
fn("u8.compare", "dtypes", lambda a: a > 100, bytes_(3, 5))
fn("u8.identity", "dtypes", lambda a: a.clone(), bytes_(3, 5))
fn("u8.to_float", "dtypes", lambda a: a.float() / 255, bytes_(2, 3, 4))
fn("u8.from_float", "dtypes", lambda a: (a.sigmoid() * 255).to(U8), x(3, 5))
fn("u8.max", "dtypes", lambda a: a.max(dim=1).values, bytes_(3, 5))
fn("u8.floor_divide", "dtypes", lambda a: a // 3, bytes_(3, 5))
fn("i8.roundtrip", "dtypes", lambda a: (a.to(I32) * 2).to(I8), ints(3, 5, dtype=I8, high=100))
fn("i8.add", "dtypes", lambda a, b: a + b, ints(3, 5, dtype=I8, high=60), ints(3, 5, dtype=I8, high=60))
fn("i16.mul", "dtypes", lambda a: a * 7, ints(3, 5, dtype=I16, high=1000))
fn("i32.to_f16", "dtypes", lambda a: a.half() / 4, ints(3, 5, dtype=I32, high=100))
fn("bool.in_out", "dtypes", lambda m, a: (m & (a > 0), ~m), mask(3, 5), x(3, 5))
fn("bool.where", "dtypes", lambda m, a, b: torch.where(m, a, b), mask(3, 5), x(3, 5), x(3, 5))
fn("bool.sum", "dtypes", lambda m: m.sum(1), mask(3, 5))
fn("bf16.mixed_out", "dtypes", lambda a: (a.bfloat16() * 2, a.half(), a.argmax(-1)), x(3, 5))
mod("f64.buffer_f32_input", "dtypes", lambda: F64Offset(), x(3, 4))
fn("u8.bitwise", "dtypes", lambda a, b: (a & b, a | b, a ^ 0x0F), bytes_(3, 5), bytes_(3, 5))
fn("i16.to_u8", "dtypes", lambda a: a.to(U8), ints(3, 5, dtype=I16, high=300))
fn("u8.from_float_high", "dtypes", lambda a: (a.to(U8), a.double().byte()),
   values(0.0, 0.7, 127.5, 128.0, 129.9, 200.7, 254.99, 255.0))  # fmt: skip  (128..255: not 127, issue 33)
fn("mixed.f64_i64_bool", "dtypes", lambda a, i: (a.double() * 2, i * 3, a > 0), x(3, 5), idx(9, 3, 5))

# ---------------------------------------------------------------------------------------------
# Inputs mutated in place: the caller's tensors change as in eager, the result is forward's.
# ---------------------------------------------------------------------------------------------


def _add_(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.add_(b)
    return a * 2


def _add_return_input(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return a.add_(b)


def _mul_no_return(a: torch.Tensor) -> torch.Tensor:
    a.mul_(3)
    return a.sum()


def _index_put(a: torch.Tensor, i: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
    a.index_put_((i,), v)
    return a + 1


def _setitem(a: torch.Tensor) -> torch.Tensor:
    a[0] = 1.0
    a[:, -1] = -1.0
    return a.clone()


def _copy(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    a.copy_(b * 2)
    return b - a


def _fill(a: torch.Tensor) -> torch.Tensor:
    out = a * 2
    a.fill_(0.5)
    return out


def _two_inputs(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    a.clamp_(min=0)
    b.sub_(a)
    return a.sum(), b.mean()


def _relu_inplace(a: torch.Tensor) -> torch.Tensor:
    return F.relu(a, inplace=True) + 1


def _int_inplace(a: torch.Tensor) -> torch.Tensor:
    a += 5
    return a % 3


def _view_mutation(a: torch.Tensor) -> torch.Tensor:
    a.view(-1)[2] = 7.0
    return a.t()


fn("add_", "mutation", _add_, x(3, 5), x(3, 5))
fn("add_.returns_input", "mutation", _add_return_input, x(3, 5), x(3, 5))
fn("mul_.not_returned", "mutation", _mul_no_return, x(3, 5))
fn("index_put_", "mutation", _index_put, x(5, 3), values(0, 3, dtype=I64), x(2, 3))
fn("setitem", "mutation", _setitem, x(3, 4))
fn("copy_", "mutation", _copy, x(3, 5), x(3, 5))
fn("fill_", "mutation", _fill, x(3, 5))
fn("two_inputs", "mutation", _two_inputs, x(3, 5), x(3, 5))
fn("relu.inplace", "mutation", _relu_inplace, x(3, 5))
fn("int.iadd", "mutation", _int_inplace, ints(3, 5, high=50))
fn("through_view", "mutation", _view_mutation, x(3, 4))
fn("index_put_.accumulate", "mutation", lambda a, i, v: a.index_put_((i,), v, accumulate=True).sum(0), ints(5, 3), values(1, 1, 4, dtype=I64), ints(3, 3))
fn("u8.inplace", "mutation", lambda a: a.mul_(3).add_(1).to(I32), bytes_(3, 5))
fn("f64.inplace", "mutation", lambda a, b: a.addcmul_(b, b, value=0.5) * 1, x(3, 5, dtype=F64), x(3, 5, dtype=F64))

# ---------------------------------------------------------------------------------------------
# State: buffers and parameters a module changes as it runs (checked over several calls).
# ---------------------------------------------------------------------------------------------


class Counter(nn.Module):
    """A running count of calls, read by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("count", torch.zeros((), dtype=torch.int64))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.count += 1
        return a * self.count


class RunningMean(nn.Module):
    """An exponential moving average of its inputs, as normalizers keep in eval mode."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.zeros(5))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.mean.mul_(0.9).add_(a.mean(0), alpha=0.1)
        return a - self.mean


class Cache(nn.Module):
    """A key/value cache written at a position given as a tensor, as decoders keep one."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("keys", torch.zeros(1, 8, 4))

    def forward(self, key: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        self.keys.index_copy_(1, position, key)
        return self.keys.sum(1)


class Rescaled(nn.Module):
    """Weights rescaled in place by forward, on every call, as RWKV rescales its layers."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(4, 4)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        with torch.no_grad():
            self.linear.weight.div_(2)
        return self.linear(a)


class NonPersistent(nn.Module):
    """A buffer left out of the state dict, overwritten by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("last", torch.zeros(3, 5), persistent=False)

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        previous = self.last.clone()
        self.last.copy_(a)
        return a + previous


class Flag(nn.Module):
    """A bool buffer set by forward."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("seen", torch.zeros(5, dtype=torch.bool))

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        self.seen |= a > 0.5
        return self.seen.clone(), a * self.seen


class ReturnsBuffer(nn.Module):
    """A buffer updated and returned itself (an alias of the module's state)."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("total", torch.zeros(4, dtype=torch.float64))

    def forward(self, a: torch.Tensor) -> torch.Tensor:
        self.total += a
        return self.total


class Ring(nn.Module):
    """A ring buffer written by item assignment at a position given as a tensor."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("ring", torch.zeros(3, 2))

    def forward(self, a: torch.Tensor, position: torch.Tensor) -> torch.Tensor:
        self.ring[position] = a
        self.ring.mul_(0.5)
        return self.ring.sum(0)


mod("counter", "state", Counter, x(3, 5), calls=3)
mod("running_mean", "state", RunningMean, x(4, 5), calls=3)
mod("kv_cache", "state", Cache, x(1, 2, 4), values(1, 5, dtype=I64), calls=2)
mod("rescaled_weights", "state", Rescaled, x(2, 4), calls=3)
mod("non_persistent", "state", NonPersistent, x(3, 5), calls=2)
mod("bool_flag", "state", Flag, x(5), calls=2)
mod("returns_buffer", "state", lambda: ReturnsBuffer(), x(4), calls=2)
mod("setitem_buffer", "state", lambda: Ring(), x(2), values(1, dtype=I64), calls=3)

# ---------------------------------------------------------------------------------------------
# Arguments and results that are not tensors.
# ---------------------------------------------------------------------------------------------


class Scaled(nn.Module):
    def forward(self, a: torch.Tensor, factor: float, offset: int, negate: bool) -> torch.Tensor:
        y = a * factor + offset
        return -y if negate else y


class Mode(nn.Module):
    def forward(self, a: torch.Tensor, mode: str, bias: torch.Tensor | None) -> torch.Tensor:
        y = a.relu() if mode == "relu" else a.tanh()
        return y if bias is None else y + bias


class Reshaped(nn.Module):
    def forward(self, a: torch.Tensor, shape: list[int]) -> torch.Tensor:
        return a.reshape(shape)


class Pair(nn.Module):
    def forward(self, ab: tuple[torch.Tensor, torch.Tensor]) -> torch.Tensor:
        return ab[0] * ab[1]


class Named(nn.Module):
    def forward(self, inputs: dict[str, torch.Tensor]) -> torch.Tensor:
        return inputs["a"] - inputs["b"].sum()


class Listed(nn.Module):
    def forward(self, items: list[torch.Tensor], scale: float) -> torch.Tensor:
        return torch.stack(items).sum(0) * scale


mod("float_int_bool", "scalars", Scaled, x(3, 5), 1.5, 2, True)
mod("str_and_none", "scalars", Mode, x(3, 5), "relu", None)
mod("int_list", "scalars", Reshaped, x(3, 4), [2, 6])
mod("tuple_arg", "scalars", Pair, pair(3, 5))
mod("dict_arg", "scalars", Named, lambda g, d: {"a": torch.randn(3, 5, generator=g), "b": torch.randn(3, generator=g)})
mod("list_arg", "scalars", Listed, lambda g, d: [torch.randn(2, 3, generator=g) for _ in range(3)], 0.5)
mod("float_in_full", "scalars", lambda: Fn(lambda a, fill: a + torch.full((5,), fill)), x(3, 5), -2.5)
mod("negative_dim", "scalars", lambda: Fn(lambda a, dim: a.softmax(dim)), x(3, 5), -1)
fn("returns_int", "scalars", lambda a: a.shape[0] * 2, x(3, 5))
fn("returns_size", "scalars", lambda a: (a * 2, a.shape, a.dim()), x(3, 5))
fn("returns_float", "scalars", lambda a: (a.sum(), 0.5), x(3, 5))
fn("returns_bool", "scalars", lambda a: (a, a.is_floating_point()), x(3, 5))
fn("returns_none", "scalars", lambda a: (a + 1, None), x(3, 5))
fn("returns_str", "scalars", lambda a: (a + 1, "done"), x(3, 5))
fn("returns_dtype_size", "scalars", lambda a: (a.numel(), a.element_size()), x(3, 5))

# ---------------------------------------------------------------------------------------------
# Nested results keep their structure.
# ---------------------------------------------------------------------------------------------


class Point(NamedTuple):
    x: torch.Tensor
    y: torch.Tensor


fn("single_tuple", "nesting", lambda a: (a * 2,), x(3, 5))
fn("single_list", "nesting", lambda a: [a * 2], x(3, 5))
fn("tuple_of_lists", "nesting", lambda a: ([a, a + 1], [a * 2]), x(3, 5))
fn("dict", "nesting", lambda a: {"sum": a.sum(0), "max": a.amax(0)}, x(3, 5))
fn("dict_nested", "nesting", lambda a: {"outer": {"inner": [a, (a * 2, a * 3)]}, "n": 4}, x(3, 5))
fn("dict_int_keys", "nesting", lambda a: {0: a, 1: a.t()}, x(3, 5))
fn("ordered_dict", "nesting", lambda a: collections.OrderedDict(b=a * 2, a=a), x(3, 5))
fn("namedtuple", "nesting", lambda a: Point(a, a * 2), x(3, 5))
fn("return_types.max", "nesting", lambda a: torch.max(a, dim=1), x(3, 5))
fn("return_types.topk", "nesting", lambda a: a.topk(2), x(3, 5))
fn("duplicate_outputs", "nesting", lambda a: (a * 2,) * 2, x(3, 5))
fn("list_of_tuples", "nesting", lambda a: [(a[i], a[i].sum()) for i in range(2)], x(3, 5))

# ---------------------------------------------------------------------------------------------
# Zero-size tensors.
# ---------------------------------------------------------------------------------------------

fn("sum.empty_dim", "zero-size", lambda a: a.sum(1), x(3, 0))
fn("mean.empty", "zero-size", lambda a: a.mean(0), x(0, 4))
fn("prod.empty", "zero-size", lambda a: a.prod(1), x(3, 0))
fn("norm.empty", "zero-size", lambda a: torch.linalg.vector_norm(a, dim=1), x(3, 0))
fn("norm.empty_all", "zero-size", lambda a: a.norm(), x(0, 3))
fn("slice.empty", "zero-size", lambda a: a[:, 2:2] * 2, x(3, 5))
fn("narrow.empty", "zero-size", lambda a: a.narrow(0, 1, 0), x(3, 5))
fn("cat.with_empty", "zero-size", lambda a, b: torch.cat([a, b]), x(0, 5), x(2, 5))
fn("matmul.k0", "zero-size", torch.matmul, x(3, 0), x(0, 4))
fn("linear.empty_batch", "zero-size", F.linear, x(0, 5), x(4, 5))
fn("softmax.empty", "zero-size", lambda a: a.softmax(-1), x(0, 5))
fn("index_select.empty", "zero-size", lambda a, i: a.index_select(0, i), x(3, 5), lambda g, d: torch.zeros(0, dtype=I64))
fn("zeros.created", "zero-size", lambda a: (a + 1, torch.zeros(0, 3)), x(2))
fn("repeat.zero", "zero-size", lambda a: a.repeat(0, 2), x(3, 5))
fn("input.empty", "zero-size", lambda a: a * 2 + 1, x(0,))
fn("amax.nonempty_of_empty_batch", "zero-size", lambda a: a.amax(1), x(0, 5))
fn("mean.empty_dim", "zero-size", lambda a: a.mean(1), x(3, 0))
fn("std.empty", "zero-size", lambda a: a.std(0), x(0, 4))
fn("norm.scalar", "zero-size", lambda a: torch.linalg.vector_norm(a.sum(), dim=0), x(3))
fn("f64.empty", "zero-size", lambda a: (a * 2).sum(0), x(0, 3, dtype=F64))
fn("u8.empty", "zero-size", lambda a: a + 1, lambda g, d: torch.zeros(2, 0, dtype=U8))
fn("conv.empty_batch", "zero-size", lambda a, w: F.conv2d(a, w), x(0, 2, 5, 5), x(3, 2, 3, 3))
fn("all.empty_dim", "zero-size", lambda a: ((a > 0).all(dim=1), a.all(dim=-1, keepdim=True)), x(3, 0))
fn("any.empty_dim", "zero-size", lambda a: ((a > 0).any(dim=1), torch.any(a, 1, keepdim=True)), x(3, 0))
fn("all_any.empty_whole", "zero-size", lambda a: (a.all(), a.any(), torch.all(a, dim=(0, 1)), (a > 0).any(dim=(0, 1))), x(3, 0))
fn("all_any.empty_int", "zero-size", lambda i: (i.all(dim=0), i.any(dim=0)), lambda g, d: torch.zeros(0, 4, dtype=I64))

# ---------------------------------------------------------------------------------------------
# Complex numbers.
# ---------------------------------------------------------------------------------------------

fn("view_as_real.rotary", "complex",
   lambda a, f: torch.view_as_real(torch.view_as_complex(a.reshape(2, 4, 2)) * torch.polar(torch.ones_like(f), f)).flatten(1),
   x(2, 8), x(2, 4))  # fmt: skip
fn("complex.from_parts", "complex", lambda a, b: torch.view_as_real(torch.complex(a, b) * torch.complex(b, a)), x(3, 4), x(3, 4))
fn("complex.abs_angle", "complex", lambda a, b: (torch.complex(a, b).abs(), torch.complex(a, b).angle()), x(3, 4), x(3, 4))
fn("complex.input_output", "complex", lambda c: c * 2 + 1, complex_randn(3, 4))
fn("complex.real_imag", "complex", lambda c: (c.real * 2, c.imag.sum()), complex_randn(3, 4))
fn("complex.abs_in", "complex", torch.abs, complex_randn(3, 4))
fn("complex.matmul_real", "complex", lambda a, b: torch.view_as_real(torch.complex(a, a) @ torch.complex(b, -b)), x(3, 4), x(4, 2))
fn("complex.result_from_parts", "complex", torch.complex, x(3, 4), x(3, 4))
fn("complex.result_view_as_complex", "complex", lambda a: (torch.view_as_complex(a), a.sum(-1)), x(3, 4, 2))
fn("complex.result_rfft", "complex", lambda a: torch.fft.rfft(a, dim=0), x(4, 3))
fn("complex.result_polar", "complex", torch.polar, pos(3, 4), x(3, 4))
fn("complex.result_c128", "complex", lambda a, b: torch.complex(a, b) * torch.complex(b, a), x(3, 4, dtype=F64), x(3, 4, dtype=F64))
fn("complex.conj_mul", "complex", lambda a, b: torch.view_as_real(torch.complex(a, b) * torch.complex(a, b).conj()), x(3, 4), x(3, 4))

# ---------------------------------------------------------------------------------------------
# Constants and aliases: results that do not depend on the inputs, or are views of them.
# ---------------------------------------------------------------------------------------------


class Weight(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.linear = nn.Linear(5, 3)

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        return self.linear(a), self.linear.weight


fn("constant_tensor", "constants", lambda a: (a, torch.ones(2, 3)), x(3, 5))
fn("constant_only", "constants", lambda a: torch.arange(6).reshape(2, 3), x(3, 5))
fn("identity", "constants", lambda a: a, x(3, 5))
fn("view_output", "constants", lambda a: a.view(-1), x(3, 5))
fn("expand_output", "constants", lambda a: a.expand(4, 3, 5), x(3, 5))
fn("transpose_output", "constants", lambda a: a.t(), x(3, 5))
mod("returns_weight", "constants", Weight, x(2, 5))
fn("full_like_int", "constants", lambda a: torch.full_like(a, 3, dtype=I64), x(3, 5))

# ---------------------------------------------------------------------------------------------
# Shapes of real models: recurrent states, optional outputs, preprocessing.
# ---------------------------------------------------------------------------------------------


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.attention(a, a, a, need_weights=False)


class AttentionWeights(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.attention = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, a: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor | None]:
        return self.attention(a, a, a)


class Preprocess(nn.Module):
    """uint8 image in, normalized float out, and the mean it subtracted."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("mean", torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1))

    def forward(self, image: torch.Tensor) -> dict[str, torch.Tensor]:
        pixels = image.permute(0, 3, 1, 2).float() / 255
        return {"pixels": pixels - self.mean, "mean": self.mean}


class Detector(nn.Module):
    """Scores and boxes as a detector returns them: a list of dicts, one per image."""

    def __init__(self) -> None:
        super().__init__()
        self.head = nn.Linear(4, 5)

    def forward(self, features: torch.Tensor) -> list[dict[str, torch.Tensor]]:
        out = self.head(features)
        return [{"boxes": out[i, :, :4], "scores": out[i, :, 4].sigmoid(), "labels": out[i, :, 4].argmax(-1)} for i in range(2)]


class Rotary(nn.Module):
    """Rotary position embedding with complex frequencies, as Llama applies it."""

    def __init__(self) -> None:
        super().__init__()
        freqs = 1.0 / (10000 ** (torch.arange(0, 8, 2).float() / 8))
        angles = torch.outer(torch.arange(6).float(), freqs)
        self.register_buffer("freqs_cis", torch.polar(torch.ones_like(angles), angles))

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        q_ = torch.view_as_complex(q.float().reshape(*q.shape[:-1], -1, 2))
        return torch.view_as_real(q_ * self.freqs_cis).flatten(-2).type_as(q)


mod("lstm", "models", lambda: nn.LSTM(4, 6, batch_first=True), x(2, 3, 4))
mod("gru.with_state", "models", lambda: nn.GRU(4, 6), x(3, 2, 4), x(1, 2, 6))
mod("attention.no_weights", "models", Attention, x(2, 5, 8))
mod("attention.weights", "models", AttentionWeights, x(2, 5, 8))
mod("preprocess.uint8", "models", Preprocess, bytes_(1, 4, 4, 3))
mod("detector.list_of_dicts", "models", Detector, x(2, 3, 4))
mod("rotary.complex_buffer", "models", Rotary, x(1, 6, 8))
mod("batchnorm.eval_f64", "models", lambda: nn.Sequential(nn.Conv2d(2, 3, 3), nn.BatchNorm2d(3)).double(), x(1, 2, 5, 5, dtype=F64))
mod("embedding.int32_ids", "models", lambda: nn.Embedding(10, 4), lambda g, d: torch.randint(0, 10, (2, 3), generator=g, dtype=I32))
mod("transformer_layer", "models", lambda: nn.TransformerEncoderLayer(8, 2, 16, batch_first=True), x(2, 4, 8))

MODULE_CASES: tuple[Case, ...] = tuple(_CASES)
