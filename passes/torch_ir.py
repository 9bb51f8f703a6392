"""Reading and building torch-dialect IR: the small vocabulary kiln's torch-level passes share.

Reading: `producer` (the op that made a value, if it is the one asked for), `number` (a
`torch.constant.int/float`), `splat` (a literal tensor with one repeated value), `tensor_type`
(shape and dtype of a `!torch.vtensor`), `same_type`. Building: `vtensor` (the type), and through a
pattern's Rewriter constants, `int_list`, `splat_literal`, `elementwise` and `to_dtype`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from .pass_api import Rewriter

# The 16-bit floats PyTorch computes in f32 (its opmath type) and rounds once.
HALF_TYPES = ("f16", "bf16")


@dataclass(frozen=True)
class TensorType:
    shape: tuple[int | None, ...]  # None: a dynamic dimension
    dtype: str  # the element type as MLIR spells it: f32, bf16, si64, i1, ...

    @property
    def static(self) -> bool:
        return all(size is not None for size in self.shape)

    @property
    def is_float(self) -> bool:
        return self.dtype in ("f16", "bf16", "f32", "f64")

    @property
    def is_integer(self) -> bool:
        return re.fullmatch(r"[su]i\d+", self.dtype) is not None


_VTENSOR = re.compile(r"!torch\.vtensor<\[([^\]]*)\],(\w+(?:<\w+>)?)>")  # complex<f32> too


def tensor_type(type_: ir.Type) -> TensorType | None:
    """The shape and dtype of a `!torch.vtensor<[2,?],f32>`; None for anything else."""
    match = _VTENSOR.fullmatch(str(type_))
    if match is None:
        return None
    sizes, dtype = match.groups()
    shape = tuple(None if size == "?" else int(size) for size in sizes.split(",")) if sizes else ()
    return TensorType(shape, dtype)


def vtensor(shape: Sequence[int | None], dtype: str) -> ir.Type:
    """`!torch.vtensor<[shape],dtype>`; a None size is a dynamic dimension (`?`)."""
    sizes = ",".join("?" if size is None else str(size) for size in shape)
    return ir.Type.parse(f"!torch.vtensor<[{sizes}],{dtype}>")


# Ops that change only a tensor's shape, not its elements or their order.
RESHAPES = (
    "torch.aten.view",
    "torch.aten.reshape",
    "torch.aten._unsafe_view",
    "torch.aten.unsqueeze",
    "torch.aten.squeeze",
    "torch.aten.squeeze.dim",
    "torch.aten.flatten.using_ints",
    "torch.aten.unflatten.int",
)


def producer(value: ir.Value, *op_names: str) -> ir.Operation | None:
    """The op that defines `value`, if its name is one of `op_names`."""
    op = defining_op(value)
    return op if op is not None and op.name in op_names else None


def defining_op(value: ir.Value) -> ir.Operation | None:
    """The op whose result `value` is; None for a block argument."""
    owner = value.owner
    return owner.operation if isinstance(owner, (ir.Operation, ir.OpView)) else None


def user_op(use: Any) -> ir.Operation:
    """The op that reads a value through `use` (one of its `uses`), as an Operation."""
    owner = use.owner
    return owner.operation if isinstance(owner, ir.OpView) else owner


def is_none(value: ir.Value) -> bool:
    """Whether `value` is a `!torch.none` (an optional operand left out)."""
    return str(value.type).startswith("!torch.none")


def number(value: ir.Value) -> int | float | None:
    """The value of a `torch.constant.int` or `torch.constant.float`; None for anything else."""
    op = producer(value, "torch.constant.int", "torch.constant.float")
    return op.attributes["value"].value if op is not None else None


def string(value: ir.Value) -> str | None:
    """The value of a `torch.constant.str`; None for anything else."""
    op = producer(value, "torch.constant.str")
    return op.attributes["value"].value if op is not None else None


def splat(value: ir.Value) -> int | float | None:
    """The repeated element of a literal tensor whose elements are all equal; None otherwise."""
    op = producer(value, "torch.vtensor.literal")
    if op is None:
        return None
    attribute = op.attributes["value"]
    if not isinstance(attribute, ir.DenseElementsAttr) or not attribute.is_splat:
        return None
    return attribute.get_splat_value().value


def same_type(a: ir.Value, b: ir.Value) -> bool:
    """Same static shape and same dtype: what a fold that replaces an op by an operand must check.

    A dynamic size is never the same: `[?,4]` may be 2x4 on one side and a broadcast 1x4, or a
    regrouped 8x4, on the other.
    """
    described = tensor_type(a.type)
    return described is not None and described.static and str(a.type) == str(b.type)


def int_constant(rewriter: Rewriter, value: int) -> ir.Value:
    attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    return rewriter.create("torch.constant.int", [], ir.Type.parse("!torch.int"), {"value": attribute})


def float_constant(rewriter: Rewriter, value: float) -> ir.Value:
    attribute = ir.FloatAttr.get(ir.F64Type.get(), value)
    return rewriter.create("torch.constant.float", [], ir.Type.parse("!torch.float"), {"value": attribute})


def int_list(rewriter: Rewriter, values: list[int]) -> ir.Value:
    items = [int_constant(rewriter, value) for value in values]
    return rewriter.create("torch.prim.ListConstruct", items, ir.Type.parse("!torch.list<int>"))


def splat_literal(rewriter: Rewriter, result_type: ir.Type, value: int | float) -> ir.Value:
    """A literal tensor of `result_type` (static shape) whose every element is `value`."""
    described = tensor_type(result_type)
    assert described is not None and described.static, f"splat_literal needs a static shape, got {result_type}"
    element_type = ir.Type.parse(described.dtype)
    builtin_type = ir.RankedTensorType.get(list(described.shape), element_type)
    if described.is_float:
        element = ir.FloatAttr.get(element_type, float(value))
    else:
        element = ir.IntegerAttr.get(element_type, int(value))
    attribute = ir.DenseElementsAttr.get_splat(builtin_type, element)
    return rewriter.create("torch.vtensor.literal", [], result_type, {"value": attribute})


def bool_constant(rewriter: Rewriter, value: bool) -> ir.Value:
    attribute = ir.BoolAttr.get(value)
    return rewriter.create("torch.constant.bool", [], ir.Type.parse("!torch.bool"), {"value": attribute})


def none_constant(rewriter: Rewriter) -> ir.Value:
    return rewriter.create("torch.constant.none", [], ir.Type.parse("!torch.none"))


def elementwise(rewriter: Rewriter, op_name: str, x: ir.Value, *rest: ir.Value) -> ir.Value:
    """`op_name(x, *rest)` typed like x: for elementwise ops that keep x's shape and dtype."""
    return rewriter.create(op_name, [x, *rest], x.type)


# torch's ScalarType codes, which `aten.to.dtype` takes, for the types kiln converts between.
_DTYPE_CODES = {"ui8": 0, "si8": 1, "si16": 2, "si32": 3, "si64": 4, "f16": 5, "f32": 6, "f64": 7, "i1": 11, "bf16": 15}


def to_dtype(rewriter: Rewriter, x: ir.Value, dtype: str) -> ir.Value:
    """`x.to(dtype)`, for a dtype spelled as MLIR does (f16, bf16, f32, f64, ui8, si32, ...)."""
    described = tensor_type(x.type)
    assert described is not None, f"to_dtype needs a !torch.vtensor, got {x.type}"
    result_type = vtensor(described.shape, dtype)
    no = bool_constant(rewriter, False)
    operands = [x, int_constant(rewriter, _DTYPE_CODES[dtype]), no, no, none_constant(rewriter)]
    return rewriter.create("torch.aten.to.dtype", operands, result_type)
