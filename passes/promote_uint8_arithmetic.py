"""promote-uint8-arithmetic: uint8 arithmetic with a scalar or a rounding division, and float -> uint8, run in int32.

torch-to-linalg cannot convert a scalar to uint8 ("for conversion to byte or char type
dstOriginalDtype has to be passed"), and on `x * 3`, `x + 1`, `x // 3` of a uint8 tensor the
compiling process dies (SIGSEGV) rather than fail. uint8 arithmetic wraps modulo 256, so computing
in int32 from the zero-extended operands and truncating the result back to uint8 gives eager's
values: sums, differences and products agree modulo 256, and quotients and remainders of
non-negative values are the same in either type.

A float tensor converted to uint8 goes through int32 too. torch-to-linalg lowers `x.to(uint8)` of a
float `x` as a signed conversion to i8 (arith.fptosi), which has no i8 for 128..255: IREE's
llvm-cpu answered 127 for them, silently. Eager truncates toward zero, and on the CPU wraps what
lies outside 0..255 modulo 256 (-1.5 -> 255, 300.5 -> 44), as int32 truncated to uint8 does; so
does this, for every float within int32's range.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import tensor_type, to_dtype, vtensor


def promote_uint8(op: ir.OpView, rewriter: Rewriter) -> None:
    result = tensor_type(op.result.type)
    if result is None or result.dtype != "ui8":
        return
    operands = []
    for operand in op.operands:
        described = tensor_type(operand.type)
        if described is not None and described.dtype == "ui8":
            operand = to_dtype(rewriter, operand, "si32")
        operands.append(operand)
    wide = rewriter.create(op.name, operands, vtensor(result.shape, "si32"))
    rewriter.replace(to_dtype(rewriter, wide, "ui8"))


def float_to_uint8(op: ir.OpView, rewriter: Rewriter) -> None:
    source, result = tensor_type(op.operands[0].type), tensor_type(op.result.type)
    if source is None or result is None or not source.is_float or result.dtype != "ui8":
        return
    rewriter.replace(to_dtype(rewriter, to_dtype(rewriter, op.operands[0], "si32"), "ui8"))


OPS = (
    "torch.aten.add.Scalar", "torch.aten.sub.Scalar", "torch.aten.rsub.Scalar", "torch.aten.mul.Scalar",
    "torch.aten.div.Tensor_mode", "torch.aten.div.Scalar_mode", "torch.aten.floor_divide",
    "torch.aten.remainder.Scalar", "torch.aten.remainder.Tensor",
)  # fmt: skip

PASS = pattern_pass(
    "promote-uint8-arithmetic",
    "uint8 arithmetic with a scalar, a rounding division, or a float's conversion -> in int32, truncated to uint8",
    dict.fromkeys(OPS, promote_uint8) | {"torch.aten.to.dtype": float_to_uint8},
)
