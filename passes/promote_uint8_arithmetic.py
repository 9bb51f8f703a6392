"""promote-uint8-arithmetic: uint8 arithmetic with a scalar, or with a rounding division, runs in int32.

torch-to-linalg cannot convert a scalar to uint8 ("for conversion to byte or char type
dstOriginalDtype has to be passed"), and on `x * 3`, `x + 1`, `x // 3` of a uint8 tensor the
compiling process dies (SIGSEGV) rather than fail. uint8 arithmetic wraps modulo 256, so computing
in int32 from the zero-extended operands and truncating the result back to uint8 gives eager's
values: sums, differences and products agree modulo 256, and quotients and remainders of
non-negative values are the same in either type.
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


OPS = (
    "torch.aten.add.Scalar", "torch.aten.sub.Scalar", "torch.aten.rsub.Scalar", "torch.aten.mul.Scalar",
    "torch.aten.div.Tensor_mode", "torch.aten.div.Scalar_mode", "torch.aten.floor_divide",
    "torch.aten.remainder.Scalar", "torch.aten.remainder.Tensor",
)  # fmt: skip

PASS = pattern_pass(
    "promote-uint8-arithmetic",
    "uint8 arithmetic with a scalar, or a rounding division -> the same in int32, truncated back to uint8",
    dict.fromkeys(OPS, promote_uint8),
)
