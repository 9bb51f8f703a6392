"""expand-pow-int: `pow(x, n)` of an integer tensor and a constant 0 <= n <= 64 becomes multiplications.

torch-to-linalg lowers pow on floats only ("unimplemented: non-floating point dtype"). Integer
powers are exact as repeated squaring: x^5 = (x^2)^2 * x, with the same wrap-around on overflow
as PyTorch's integer pow. (expand-pow-small already turns x^2 and x^3 of any dtype into products.)
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import elementwise, none_constant, number, tensor_type

MAX_EXPONENT = 64


def expand_pow_int(op: ir.OpView, rewriter: Rewriter) -> None:
    x, exponent_value = op.operands
    described, exponent = tensor_type(x.type), number(exponent_value)
    if described is None or not described.is_integer or str(x.type) != str(op.result.type):
        return
    if not isinstance(exponent, int) or not 0 <= exponent <= MAX_EXPONENT:
        return
    if exponent == 0:
        nones = [none_constant(rewriter) for _ in range(5)]  # dtype, layout, device, pin_memory, memory_format
        rewriter.replace(rewriter.create("torch.aten.ones_like", [x, *nones], x.type))
        return
    result: ir.Value | None = None
    square = x
    while exponent:
        if exponent & 1:
            result = square if result is None else elementwise(rewriter, "torch.aten.mul.Tensor", result, square)
        exponent >>= 1
        if exponent:
            square = elementwise(rewriter, "torch.aten.mul.Tensor", square, square)
    assert result is not None
    rewriter.replace(result)


PASS = pattern_pass(
    "expand-pow-int",
    "pow(x, n) of integers, 0 <= n <= 64 -> repeated squaring",
    {"torch.aten.pow.Tensor_Scalar": expand_pow_int},
)
