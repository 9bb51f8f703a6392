"""fmod-scalar-to-tensor: `fmod(x, s)` with a scalar `s` becomes `fmod(x, tensor(s))`.

torch-mlir decomposes `fmod.Tensor` (into trunc-division) but neither decomposes nor lowers
`fmod.Scalar`, which then fails in torch-to-linalg ("failed to legalize operation
'torch.constant.float'"). Giving it the scalar as a 0-d literal tensor of x's dtype makes it the
op torch-mlir handles; PyTorch computes both in x's dtype. So this runs before
torch-backend-contract. Float x only (an integer x with a float s is promoted; left alone).
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import vtensor
from .torch_ir import number, splat_literal, tensor_type


def fmod_scalar_to_tensor(op: ir.OpView, rewriter: Rewriter) -> None:
    x, scalar = op.operands
    described, divisor = tensor_type(x.type), number(scalar)
    if described is None or not described.is_float or divisor is None or str(x.type) != str(op.result.type):
        return
    literal = splat_literal(rewriter, vtensor([], described.dtype), float(divisor))
    rewriter.replace(rewriter.create("torch.aten.fmod.Tensor", [x, literal], op.result.type))


PASS = pattern_pass(
    "fmod-scalar-to-tensor",
    "fmod(x, scalar) -> fmod(x, 0-d literal tensor), which torch-mlir decomposes",
    {"torch.aten.fmod.Scalar": fmod_scalar_to_tensor},
)
