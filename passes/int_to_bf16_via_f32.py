"""int-to-bf16-via-f32: an integer or bool tensor converted to bfloat16 goes through float32.

IREE's llvm-cpu backend cannot compile `arith.sitofp`/`arith.uitofp` to bf16 whose result is stored
as it is (not first used in bf16 arithmetic, which IREE widens to f32): on a CPU without AVX512-BF16
LLVM lowers the conversion to a call of compiler-rt's `__truncsfbf2`, which IREE's embedded linker
does not have ("iree-lld: error: undefined symbol: __truncsfbf2"). The cuda target meets it too:
IREE evaluates constant expressions at compile time on the host CPU, and transformers' Swin builds
its shifted-window mask as `(h_region * 3 + w_region).to(dtype)` from integer ranges, a constant.

Converting to f32 first and then truncating to bf16 (which IREE lowers with integer ops) is also
exactly what eager PyTorch computes: its int -> bfloat16 cast is `BFloat16(float(x))`, rounding
twice; a direct conversion rounds once and differs from eager beyond 2**24 (2**31 + 2**23 + 1 is
2**31 in eager, 2**31 + 2**24 when rounded once). MLIR folds `truncf(sitofp(x))` back into the
direct conversion, so the f32 value is halved before the truncation and the bf16 value doubled
after it: both are exact for every integer (no subnormal, no overflow), and scaling by a power of
two commutes with rounding, so the result is eager's bit for bit.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import float_constant, tensor_type, to_dtype


def int_to_bf16_via_f32(op: ir.OpView, rewriter: Rewriter) -> None:
    source, result = tensor_type(op.operands[0].type), tensor_type(op.result.type)
    if source is None or result is None or result.dtype != "bf16":
        return
    if not (source.is_integer or source.dtype == "i1"):
        return
    wide = to_dtype(rewriter, op.operands[0], "f32")
    half = rewriter.create("torch.aten.mul.Scalar", [wide, float_constant(rewriter, 0.5)], wide.type)
    rounded = to_dtype(rewriter, half, "bf16")
    rewriter.replace(rewriter.create("torch.aten.mul.Scalar", [rounded, float_constant(rewriter, 2.0)], op.result.type))


PASS = pattern_pass(
    "int-to-bf16-via-f32",
    "x.to(bfloat16) of an integer or bool x -> (x.to(float32) * 0.5).to(bfloat16) * 2, eager's rounding",
    {"torch.aten.to.dtype": int_to_bf16_via_f32},
)
