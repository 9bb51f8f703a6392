"""round-float-scalars: a Python float combined with an f32 tensor is rounded to f32 here, to nearest.

PyTorch converts the scalar of `x * (1/3)` (and of `x + 0.1`, `x.clamp(0, 0.7)`, `x > 0.1`, ...)
to the f32 the tensor computes in, rounding to nearest. torch-mlir keeps it an f64 constant, and
IREE 3.13 demotes f64 constants to f32 by truncation: `x * (1/3)` multiplies by 0.33333331
instead of 0.33333334, so `3 * (1/3)` is 0.99999994, and an index computed from it (nearest-exact
interpolation) is off by one. Rounding the constant first makes it an exact f32 value, which any
conversion keeps. Scalars of other dtypes' ops are left alone.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import float_constant, producer, tensor_type

# Ops whose float scalars join the arithmetic of their f32 tensor operand, in f32.
SCALAR_OPS = tuple(
    f"torch.aten.{name}"
    for name in (
        "add.Scalar", "sub.Scalar", "rsub.Scalar", "mul.Scalar", "div.Scalar", "add.Tensor", "sub.Tensor",
        "remainder.Scalar", "clamp", "clamp_min", "clamp_max", "masked_fill.Scalar", "fill.Scalar",
        "eq.Scalar", "ne.Scalar", "lt.Scalar", "le.Scalar", "gt.Scalar", "ge.Scalar",
        "where.Scalar", "where.ScalarSelf", "where.ScalarOther", "leaky_relu", "hardtanh", "threshold",
    )
)  # fmt: skip


def round_float_scalars(op: ir.OpView, rewriter: Rewriter) -> None:
    if not any((described := tensor_type(value.type)) is not None and described.dtype == "f32" for value in op.operands):
        return
    operands, changed = [], False
    for value in op.operands:
        constant = producer(value, "torch.constant.float")
        exact = constant.attributes["value"].value if constant is not None else None
        with np.errstate(over="ignore"):  # beyond f32's range: inf, as PyTorch converts it
            rounded = float(np.float32(exact)) if exact is not None else None
        if rounded is not None and rounded != exact and not np.isnan(exact):
            operands.append(float_constant(rewriter, rounded))
            changed = True
        else:
            operands.append(value)
    if not changed:
        return
    rewriter.replace(rewriter.create(op.name, operands, op.result.type))


PASS = pattern_pass(
    "round-float-scalars",
    "float scalars of f32 ops rounded to f32 (to nearest, as PyTorch; IREE truncates f64)",
    dict.fromkeys(SCALAR_OPS, round_float_scalars),
)
