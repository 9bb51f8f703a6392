"""check-static-shapes: fails, naming the op, where a result's size depends on tensor values.

`x[mask]`, masked_select, nonzero, unique and repeat_interleave with a tensor of repeats make
tensors whose size is only known once the values are: torch.export records such a size as an
unbacked symbol, and kiln compiles programs whose shapes are fixed by the inputs'. torch-mlir
does not reject them: on `x[mask]` its backend contract never returns while its memory grows by
~100 MB/s. So this runs first in the `prims` stage and names the op, with the usual rewrite.

An op is rejected when it is one of DATA_DEPENDENT (whatever the shapes), or when its function's
inputs all have static shapes and one of its results does not: with fixed inputs, a size torch
could not compute from them comes from values.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Pass, PassRun
from .torch_ir import producer, tensor_type

DATA_DEPENDENT = frozenset(
    {
        "torch.aten.nonzero",
        "torch.aten.masked_select",
        "torch.aten.unique_dim",
        "torch.aten._unique2",
        "torch.aten.unique_consecutive",
    }
)


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for function in _ops_in(module):
        if function.name != "func.func":
            continue
        body = function.regions[0].blocks[0]
        static_inputs = all(_static(argument.type) for argument in body.arguments)
        for op in _ops_in(function):
            reason = _why_data_dependent(op, static_inputs)
            if reason is not None:
                pass_run.fail(op, f"'{op.name}' op {reason}; kiln compiles programs whose shapes are fixed by the inputs'")
                return


def _ops_in(op: ir.Operation) -> list[ir.Operation]:
    """The ops directly inside `op`'s first region (a module's functions, a function's body)."""
    return [inner.operation for block in op.regions[0].blocks for inner in block.operations]


def _why_data_dependent(op: ir.Operation, static_inputs: bool) -> str | None:
    if op.name in DATA_DEPENDENT:
        return "makes a tensor whose size depends on its input's values"
    if op.name in ("torch.aten.index.Tensor", "torch.aten.index.Tensor_hacked_twin") and _has_bool_index(op):
        return "indexes with a boolean mask: the result's size is the number of True values"
    if static_inputs and any(not _static(result.type) for result in op.results if tensor_type(result.type)):
        return "has a result whose size depends on tensor values, not on the input shapes"
    return None


def _has_bool_index(op: ir.Operation) -> bool:
    indices = producer(op.operands[1], "torch.prim.ListConstruct")
    return indices is not None and any(
        (described := tensor_type(index.type)) is not None and described.dtype == "i1" for index in indices.operands
    )


def _static(type_: ir.Type) -> bool:
    described = tensor_type(type_)
    return described is None or described.static


PASS = Pass(
    name="check-static-shapes",
    summary="fail, naming the op, where a tensor's size depends on values (x[mask], nonzero, ...)",
    level="torch",
    run=run,
    hint=(
        "keep shapes fixed: instead of x[mask] or masked_select, use torch.where(mask, x, 0) or "
        "x.masked_fill(~mask, 0) (and sum or count with the mask); instead of nonzero or unique, work on "
        "the mask itself; give repeat_interleave an int"
    ),
)
