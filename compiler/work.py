"""How much work a call of each function does, roughly: for the runtime's choice of CPU driver.

IREE's `local-task` driver spreads a call over a pool of threads and waking them costs 25-40 us on a
16-core host; `local-sync` runs it on the caller's thread for ~6 us (benchmarks/NOTES.md). Which is
faster depends on how much work the call does, which kiln knows at the hand-off. The estimate is in
element operations: per op, the largest tensor it reads or writes, times the reduction length for a
contraction (K of a matmul, cin x kh x kw of a convolution, the reduced sizes of a generic), summed
over the function's ops and the functions it calls. A dynamic size makes it unknown (None).
"""

from __future__ import annotations

import math
import re

from torch_mlir import ir

_TENSOR = re.compile(r"^tensor<((?:[0-9?]+x)*)[^x>]*>$")
_VTENSOR = re.compile(r"^!torch\.vtensor<\[([^\]]*)\],")
# Contractions and the reduction length their result elements each take, from their operand shapes.
_MATMULS = ("linalg.matmul", "linalg.batch_matmul", "torch.aten.mm", "torch.aten.bmm", "torch.aten.matmul", "torch.aten.linear")
_CONVS = ("linalg.conv_2d_nchw_fchw", "torch.aten.convolution")


class _Dynamic(Exception):
    pass


def function_work(module: ir.Module, names: tuple[str, ...]) -> dict[str, int | None]:
    """The estimate for each function of `names` in `module` (None where a size is dynamic)."""
    functions = {
        op.operation.attributes["sym_name"].value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
    memo: dict[str, int] = {}

    def of(name: str) -> int:
        if name not in memo:
            memo[name] = 0  # a recursive call adds nothing more
            memo[name] = _function(functions[name], of, functions)
        return memo[name]

    work: dict[str, int | None] = {}
    for name in names:
        try:
            work[name] = of(name) if name in functions else None
        except _Dynamic:
            work[name] = None
    return work


def _function(function: ir.Operation, of, functions: dict[str, ir.Operation]) -> int:
    ops: list[ir.Operation] = []

    def collect(op: ir.Operation) -> ir.WalkResult:
        ops.append(op)
        return ir.WalkResult.ADVANCE

    function.walk(collect)
    total = 0
    for op in ops:
        if op.name == "func.call":
            callee = op.attributes["callee"].value
            total += of(callee) if callee in functions else 0
        else:
            total += _op_work(op)
    return total


# Ops that compute nothing: results, allocations, constants, weights, reshapes (views).
_FREE = (
    "func.return", "tensor.empty", "arith.constant", "torch.vtensor.literal", "ml_program.global_load",
    "util.global.load", "tensor.expand_shape", "tensor.collapse_shape", "torch.aten.view", "torch.aten.reshape",
    "torch.aten.unsqueeze", "torch.aten.squeeze", "torch.aten.squeeze.dim", "torch.aten.flatten.using_ints",
)  # fmt: skip


def _op_work(op: ir.Operation) -> int:
    if op.name in _FREE:
        return 0
    shapes = [_shape(value.type) for value in (*op.operands, *op.results)]
    shapes = [shape for shape in shapes if shape is not None]
    if not shapes:
        return 0
    elements = max(math.prod(shape) for shape in shapes)
    operands = [_shape(value.type) for value in op.operands]
    if op.name in _MATMULS and operands and operands[0]:
        return elements * operands[0][-1]
    if op.name in _CONVS and len(operands) > 1 and operands[1]:
        weight = operands[1]
        return elements * math.prod(weight[1:])
    if op.name == "linalg.generic":
        return max(elements, _domain(op))
    return elements


def _domain(generic: ir.Operation) -> int:
    """The product of a linalg.generic's loop ranges, read off its operands' shapes and indexing maps."""
    ranges: dict[int, int] = {}
    for value, mapping in zip(generic.operands, generic.attributes["indexing_maps"], strict=False):
        shape = _shape(value.type)
        if shape is None:
            continue
        for size, expression in zip(shape, ir.AffineMapAttr(mapping).value.results, strict=False):
            match = re.fullmatch(r"d(\d+)", str(expression))
            if match:
                ranges[int(match.group(1))] = size
    return math.prod(ranges.values()) if ranges else 0


def _shape(type_: ir.Type) -> list[int] | None:
    """A tensor type's static shape; None for a non-tensor; _Dynamic for a dynamic size."""
    text = str(type_)
    match = _TENSOR.match(text)
    if match:
        dims = [d for d in match.group(1).split("x") if d]
    else:
        match = _VTENSOR.match(text)
        if not match:
            return None
        dims = [d.strip() for d in match.group(1).split(",") if d.strip()]
    if any(not d.isdigit() for d in dims):
        raise _Dynamic
    return [int(d) for d in dims]
