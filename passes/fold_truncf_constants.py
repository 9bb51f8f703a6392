"""fold-truncf-constants: `arith.truncf` of an f64 constant becomes the f32 constant, rounded to nearest.

torch-to-linalg keeps the float scalars of the torch ops it lowers (`torch.arange(0.0, 1.0, 0.2)`'s
step) as f64 constants and truncates them to f32 with `arith.truncf`, outside any dispatch. MLIR
folds that only when it is exact, and IREE's llvm-cpu backend, which keeps float64 (kiln turns
IREE's demotion off there), cannot compile the truncation left on the host ("failed to legalize
operation 'arith.truncf'"). Folding it here computes what the truncation would: the nearest f32
value, as IEEE rounding and PyTorch's conversion of a Python float do.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass


def fold_truncf_constant(op: ir.OpView, rewriter: Rewriter) -> None:
    source = op.operands[0].owner
    if not isinstance(source, (ir.Operation, ir.OpView)) or source.operation.name != "arith.constant":
        return
    if str(op.operands[0].type) != "f64" or str(op.result.type) != "f32":
        return
    value = ir.FloatAttr(source.operation.attributes["value"]).value
    with np.errstate(over="ignore"):  # beyond f32's range: inf, as the conversion gives
        rounded = float(np.float32(value))
    attribute = ir.FloatAttr.get(ir.F32Type.get(), rounded)
    rewriter.replace(rewriter.create("arith.constant", [], ir.F32Type.get(), {"value": attribute}))


PASS = pattern_pass(
    "fold-truncf-constants",
    "arith.truncf of an f64 constant -> the f32 constant, rounded to nearest",
    {"arith.truncf": fold_truncf_constant},
    level="linalg",
)
