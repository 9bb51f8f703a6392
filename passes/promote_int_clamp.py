"""promote-int-clamp: `clamp` of an integer tensor with float bounds converts the tensor first.

PyTorch promotes `clamp(int_tensor, -0.5, 0.5)` to a float result; torch-to-linalg lowers it by
comparing the integers with float compares ("'arith.cmpf' op operand #0 must be floating-point-
like, but got 'i64'"). Converting x to the result's dtype first is the promotion PyTorch does.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import tensor_type, to_dtype


def promote_int_clamp(op: ir.OpView, rewriter: Rewriter) -> None:
    x, *bounds = op.operands
    source, result = tensor_type(x.type), tensor_type(op.result.type)
    if source is None or result is None or source.is_float or not result.is_float:
        return
    converted = to_dtype(rewriter, x, result.dtype)
    rewriter.replace(rewriter.create(op.name, [converted, *bounds], op.result.type))


PASS = pattern_pass(
    "promote-int-clamp",
    "clamp(int x, float bounds) -> clamp(x.to(float), bounds), PyTorch's promotion",
    {"torch.aten.clamp": promote_int_clamp, "torch.aten.clamp.Tensor": promote_int_clamp},
)
