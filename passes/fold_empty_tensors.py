"""fold-empty-tensors: a tensor op whose every result holds no elements becomes a literal of that type.

A tensor with a dimension of size 0 has no values to compute: `x.repeat(0, 2)`, `x[:, 2:2]`,
`x.narrow(0, 1, 0)` and whatever is computed from them only carry a shape. torch-mlir's lowering
is not always ready for them: a `view` of a zero-size tensor with a -1 in its sizes divides by
zero inside torch-to-linalg (the compiling process dies of SIGFPE). So every torch op (no regions)
whose results all have a static shape with a zero in it is replaced by an empty
`torch.vtensor.literal` of its result type, and removed. Runs after the backend contract, once
shapes are refined.
"""

from __future__ import annotations

import numpy as np
from torch_mlir import ir

from .pass_api import Pass, PassRun
from .torch_ir import tensor_type

# numpy's dtype for each element type a literal can hold (a zero-size literal holds no bytes anyway).
# Not ui8: torch-mlir types a literal of ui8 elements as si8.
_NUMPY = {
    "f16": np.float16, "f32": np.float32, "f64": np.float64, "bf16": np.float16,
    "si8": np.int8, "si16": np.int16, "si32": np.int32, "si64": np.int64, "i1": np.bool_,
}  # fmt: skip


def run(module: ir.Operation, pass_run: PassRun) -> None:
    empty: list[ir.Operation] = []

    def visit(op: ir.Operation) -> ir.WalkResult:
        if _all_results_empty(op):
            empty.append(op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    for op in empty:
        for result in op.results:
            literal = ir.Operation.create(
                "torch.vtensor.literal",
                results=[result.type],
                attributes={"value": _empty_attribute(result.type)},
                loc=op.location,
                ip=ir.InsertionPoint(op),
            )
            result.replace_all_uses_with(literal.result)
        op.erase()


def _all_results_empty(op: ir.Operation) -> bool:
    if not op.name.startswith(("torch.aten.", "torch.prims.")) or len(op.regions) or not len(op.results):
        return False
    for result in op.results:
        described = tensor_type(result.type)
        if described is None or not described.static or 0 not in described.shape or described.dtype not in _NUMPY:
            return False
    return True


def _empty_attribute(type_: ir.Type) -> ir.Attribute:
    described = tensor_type(type_)
    assert described is not None
    builtin = ir.RankedTensorType.get(list(described.shape), ir.Type.parse(described.dtype))  # si64, ui8, i1, f32, ...
    return ir.DenseElementsAttr.get(np.zeros(described.shape, _NUMPY[described.dtype]), type=builtin)


PASS = Pass(
    name="fold-empty-tensors",
    summary="a tensor op whose results all have no elements -> an empty literal",
    level="torch",
    run=run,
)
