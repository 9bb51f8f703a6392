"""expand-pow-small: `pow(x, 2)` becomes `x * x`, `pow(x, 3)` becomes `(x * x) * x`.

Matches `aten.pow.Tensor_Scalar(x, n)` for n = 2 or 3 (int or float) whose result has x's type; an
int tensor raised to 2.0 is a float tensor, and is kept. PyTorch itself computes these powers as
products (a bf16 cube rounds after each product), so results are bit-identical, and products are
cheaper than `math.fpowi`. They also keep a tanh-approximated GELU (GPT-2's `0.044715 * x^3`)
within the elementwise ops that the row programs and IREE's fusions take whole.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import number


def expand_pow_small(power: ir.OpView, rewriter: Rewriter) -> None:
    x, exponent = power.operands
    n = number(exponent)
    if n not in (2, 3) or x.type != power.result.type:  # a scalar exponent: no broadcast
        return
    product = rewriter.create("torch.aten.mul.Tensor", [x, x], power.result.type)
    if n == 3:
        product = rewriter.create("torch.aten.mul.Tensor", [product, x], power.result.type)
    rewriter.replace(product)


PASS = pattern_pass(
    "expand-pow-small",
    "pow(x, 2) -> x * x, pow(x, 3) -> (x * x) * x",
    {"torch.aten.pow.Tensor_Scalar": expand_pow_small},
)
