"""expand-pow-square: `pow(x, 2)` becomes `x * x`.

Matches `aten.pow.Tensor_Scalar(x, 2)` (int or float 2) whose result has x's type; an int
tensor raised to 2.0 is a float tensor, and is kept. PyTorch itself computes a square as `x * x`,
so results are bit-identical, and a multiply is cheaper than `math.fpowi`.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number


def expand_pow_square(power: ir.OpView, rewriter: Rewriter) -> None:
    x, exponent = power.operands
    if number(exponent) != 2 or x.type != power.result.type:  # a scalar exponent: no broadcast
        return
    rewriter.replace(rewriter.create("torch.aten.mul.Tensor", [x, x], power.result.type))


PASS = pattern_pass(
    "expand-pow-square",
    "pow(x, 2) -> x * x",
    {"torch.aten.pow.Tensor_Scalar": expand_pow_square},
)
