"""What a row program's kernel computes, op by op: which torch ops are steps of a program over a shape
(elementwise arithmetic, casts, sums and maxima along the last dimension) and how each reads its
operands. Shared by outline-row-programs (a norm and the ops around it) and outline-contractions (the
elementwise ops after a matmul, its epilogue)."""

from __future__ import annotations

import math

from torch_mlir import ir

from kiln.passes.torch_build import constant_bool, constant_ints
from kiln.passes.torch_ir import defining_op, is_none, number, splat, tensor_type

STEP_OPS = {
    "torch.aten.add.Tensor": "add", "torch.aten.sub.Tensor": "sub", "torch.aten.mul.Tensor": "mul", "torch.aten.div.Tensor": "div",
    "torch.aten.add.Scalar": "add", "torch.aten.sub.Scalar": "sub", "torch.aten.mul.Scalar": "mul", "torch.aten.div.Scalar": "div",
    "torch.aten.neg": "neg", "torch.aten.reciprocal": "reciprocal", "torch.aten.relu": "relu", "torch.aten.rsqrt": "rsqrt",
    "torch.aten.sqrt": "sqrt", "torch.aten.exp": "exp", "torch.aten.erf": "erf", "torch.aten.tanh": "tanh",
    "torch.aten.to.dtype": "cast",
    "torch.aten.sum.dim_IntList": "sum", "torch.aten.amax": "amax", "torch.aten.max.dim": "amax",  # its indices unused
}  # fmt: skip
REDUCTIONS = ("sum", "amax")
FLOAT_DTYPES = ("f32", "bf16", "f16")
BINARY = ("add", "sub", "mul", "div")

def step_of(op: ir.Operation, shape: tuple[int, ...]) -> tuple[str, list[ir.Value | float]] | None:
    """(the kernel's op, its operands: values, or finite float constants) for an op the kernel computes
    in a program over `shape`, else None."""
    kind = STEP_OPS.get(op.name)
    if kind is None or role(op.results[0], shape) is None or any(list(result.uses) for result in op.results[1:]):
        return None
    x = op.operands[0]
    if kind in REDUCTIONS:
        if op.name == "torch.aten.max.dim":
            dim = number(op.operands[1])
            dims = [dim] if isinstance(dim, int) else None
        else:
            dims = constant_ints(op.operands[1])
        keepdim = constant_bool(op.operands[2])
        dtype_given = op.name == "torch.aten.sum.dim_IntList" and not is_none(op.operands[3])
        if dims not in ([len(shape) - 1], [-1]) or not keepdim or dtype_given or role(x, shape) != "full":
            return None
        return kind, [x]
    if kind not in BINARY:  # unary, a cast too
        return (kind, [x]) if role(x, shape) is not None else None
    operands = [_operand(value, shape) for value in op.operands[:2]]
    if any(operand is None for operand in operands):
        return None
    if kind in ("add", "sub"):
        alpha = number(op.operands[2])
        if alpha != 1:
            if alpha is None or not isinstance(operands[1], float):
                return None
            operands[1] = float(operands[1] * alpha)
    return kind, [operand for operand in operands if operand is not None]


def _operand(value: ir.Value, shape: tuple[int, ...]) -> ir.Value | float | None:
    """A binary op's operand as the program reads it: a value it spans, or a finite constant (a
    `torch.constant.int/float` or a one-element literal tensor)."""
    if tensor_type(value.type) is None:
        found = number(value)
    elif role(value, shape) is not None:
        return value
    else:
        found = _constant(value)
    return float(found) if isinstance(found, int | float) and math.isfinite(found) else None


def role(value: ir.Value, shape: tuple[int, ...]) -> str | None:
    """How `value` spans a program over `shape`: "full", "row" ([..., 1]), "column" ([H], or with leading 1s), or None."""
    described = tensor_type(value.type)
    if described is None or not described.static or described.dtype not in FLOAT_DTYPES:
        return None
    own = tuple(size for size in described.shape if size is not None)
    if own == shape:
        return "full"
    if own == (*shape[:-1], 1):
        return "row"
    if len(own) <= len(shape) and own[-1:] == shape[-1:] and all(size == 1 for size in own[:-1]):
        return "column"
    return None


def _constant(value: ir.Value) -> float | None:
    """A one-element literal tensor's value, taken as a constant of the program."""
    described = tensor_type(value.type)
    if described is None or not described.static or math.prod(size or 1 for size in described.shape) != 1:
        return None
    found = splat(value)
    return float(found) if isinstance(found, int | float) and math.isfinite(found) else None


def tensor_operands(op: ir.Operation) -> list[ir.Value]:
    return [value for value in op.operands if tensor_type(value.type) is not None]


def replay(ops: list[ir.Operation], mapping: dict[ir.Value, ir.Value]) -> dict[ir.Value, ir.Value]:
    """`ops` again at the insertion point, each reading `mapping`'s value where it read a key and a copy
    of the constant it read elsewhere; `mapping` extended by each op's first result, and returned."""
    for op in ops:
        operands = [mapping[value] if value in mapping else cloned_constant(value) for value in op.operands]
        attributes = {named.name: named.attr for named in op.attributes}
        results = [result.type for result in op.results]  # max.dim's unused indices too
        mapping[op.results[0]] = ir.Operation.create(op.name, results=results, operands=operands, attributes=attributes).results[0]
    return mapping


def cloned_constant(value: ir.Value) -> ir.Value:
    """A copy, at the insertion point, of the constant (or list of constants) `value` is."""
    op = defining_op(value)
    assert op is not None, f"a row program reads {value} from outside, which is not a constant"
    if op.name == "torch.prim.ListConstruct":
        items = [cloned_constant(item) for item in op.operands]
        return ir.Operation.create(op.name, results=[value.type], operands=items).results[0]
    return op.clone().results[0]
