"""What kiln's kernel rewrites share: the linalg hand-off as they read and edit it, and what they decide.

A Decision says what computes one op of the module (kiln's kernel or IREE's code, and why); the
Substitution is the rewritten text with a Decision per op. HandOff is the module being rewritten:
each family (gemm.py, pooling.py, softmax.py, layer_norm.py) puts a private function at its start
and a call to it in place of the op it matched, and appends its decisions. The rest reads the
module: shapes, element types, producers and users, the indexing maps of kiln's generics, and
Rows, a static tensor as the row kernels see it ([rows][cols]).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from iree.compiler import ir
from iree.compiler.dialects import func

from . import mlir
from .features import F32_FEATURES, KernelIsa
from .geometry import Call


@dataclass(frozen=True)
class Decision:
    """What computes one contraction of the module: kiln's kernel or IREE's code, and why."""

    op: str  # e.g. "linalg.conv_2d_nchw_fchw"
    label: str  # the shapes, e.g. "32x64x58x58 * 64x64x3x3 stride 1"
    code: str  # "kiln" or "iree"
    why: str
    call: Call | None = None  # the kernel's geometry and tiling, for "kiln"
    element: str = "bf16"  # the kernel path's input element type, for "kiln"

    def record(self) -> dict[str, Any]:
        """The manifest's entry for it (the same fields as kiln's GPU kernels', where they apply)."""
        record: dict[str, Any] = {"contraction": f"{self.op} {self.label}", "code": self.code, "why": self.why}
        if self.call is not None:
            record.update(
                kernel=f"{mlir.EXECUTABLE}::{mlir.export(self.element)}",
                tiles=self.call.tiles,
                grid=list(self.call.grid),
                gflop=round(self.call.flops / 1e9, 3),
            )
        return record


@dataclass(frozen=True)
class Substitution:
    """The rewritten module text and a Decision per contraction of the model's element type."""

    text: str
    decisions: tuple[Decision, ...]

    @property
    def taken(self) -> int:
        return sum(decision.code == "kiln" for decision in self.decisions)

    def features(self, isa: KernelIsa) -> tuple[str, ...]:
        """The CPU features the kernel paths taken need, on a CPU with `isa`."""
        elements = {decision.element for decision in self.decisions if decision.code == "kiln"}
        return (*(isa.features if "bf16" in elements else ()), *(F32_FEATURES if "f32" in elements else ()))

    def records(self) -> tuple[dict[str, Any], ...]:
        return tuple(decision.record() for decision in self.decisions)

    def report(self) -> str:
        """A markdown table: every contraction, what computes it, why."""
        lines = ["| contraction | code | tiles | grid | GFLOP | why |", "|---|---|---|---|---|---|"]
        for record in self.records():
            lines.append(
                f"| {record['contraction']} | {record['code']} | {record.get('tiles', '')} | "
                f"{record.get('grid', '')} | {record.get('gflop', '')} | {record['why']} |"
            )
        return "\n".join(lines) + "\n"


class HandOff:
    """The module being rewritten for a CPU with `isa`, and what the rewrites decided in it so far;
    `attention`: attention's batch matmuls go to the kernel too in a bf16 model (--cpu-attention bf16)."""

    def __init__(self, module: ir.Module, isa: KernelIsa, attention: bool) -> None:
        self.module = module
        self.isa = isa
        self.attention = attention
        self.decisions: list[Decision] = []
        self.taken = 0  # contractions routed to the kernel, for their functions' names
        self.poolings = 0  # poolings moved to NHWC, for their functions' names
        self.row_kernels = 0  # layer norms and moments routed, for their functions' names
        self.element = "bf16"  # the model's: f32 where no contraction involves bf16

    def add(self, text: str) -> None:
        """Put the ops of `text` (module-level) at the start of the module."""
        snippet = ir.Module.parse(f"module {{\n{text}\n}}", self.module.context)
        first = self.module.body.operations[0]
        for child in list(snippet.body.operations):
            child.operation.move_before(first)

    def replace(self, op: ir.Operation, name: str, operands: list[ir.Value], definition: str, narrow: str | None = None) -> None:
        """Define private function `name` and call it with `operands` in place of `op`; where the
        function returns `narrow` (a bf16 type of op's shape), its result widened to op's type."""
        self.add(definition)
        with ir.InsertionPoint(op), op.location:
            call = func.CallOp([ir.Type.parse(narrow) if narrow else op.results[0].type], ir.FlatSymbolRefAttr.get(name), operands)
        value = call.results[0]
        if narrow:
            value = self._widen(value, op)
        op.results[0].replace_all_uses_with(value)
        op.erase()

    def _widen(self, value: ir.Value, before: ir.Operation) -> ir.Value:
        """A generic widening bf16 `value` to f32, put before `before`: a plain extf, which the
        contractions' rewrite sees through (gemm.py's _widened_from_bf16)."""
        shape = shape_of(value)
        lines = mlir.converted("%v", "%w", shape, "bf16", "f32")
        snippet = ir.Module.parse(
            f"func.func @widen(%v: {value.type}) -> tensor<{mlir.dims(shape)}xf32> {{\n" + "\n".join(lines) + "\nreturn %w : " + f"tensor<{mlir.dims(shape)}xf32>\n}}",
            self.module.context,
        )
        block = snippet.body.operations[0].regions[0].blocks[0]
        ops = list(block.operations)
        ops[-1].erase()  # the return
        block.arguments[0].replace_all_uses_with(value)
        for op in ops[:-1]:
            op.move_before(before)
        return ops[-2].results[0]


# -- reading the module ---------------------------------------------------------------------------


def shape_of(value: ir.Value) -> list[int]:
    return list(ir.RankedTensorType(value.type).shape)


def element_of(value: ir.Value) -> str:
    return str(ir.RankedTensorType(value.type).element_type)


def is_static(value: ir.Value) -> bool:
    return isinstance(value.type, ir.RankedTensorType) and value.type.has_static_shape


def producer_of(value: ir.Value) -> ir.Operation | None:
    owner = value.owner
    if isinstance(owner, ir.Block):
        return None
    return owner if isinstance(owner, ir.Operation) else owner.operation


def name_of(op: ir.Operation | None) -> str:
    return op.name if op is not None else ""


def body_of(generic: ir.Operation) -> list[ir.Operation]:
    return [op.operation for op in generic.regions[0].blocks[0].operations]


def user_of(use: Any) -> ir.Operation:
    owner = use.owner
    return owner if isinstance(owner, ir.Operation) else owner.operation


def block_argument(op: ir.Operation, number: int) -> ir.Value:
    return op.regions[0].blocks[0].arguments[number]


def argument_number(value: ir.Value) -> int | None:
    return ir.BlockArgument(value).arg_number if isinstance(value.owner, ir.Block) else None


def float_constant(value: ir.Value) -> float | None:
    constant = producer_of(value)
    if name_of(constant) != "arith.constant" or not isinstance(constant.attributes["value"], ir.FloatAttr):
        return None
    return ir.FloatAttr(constant.attributes["value"]).value


def identity_map(rank: int) -> str:
    dims = ", ".join(f"d{i}" for i in range(rank))
    return f"({dims}) -> ({dims})"


def row_maps(rank: int) -> tuple[str, str]:
    """The maps of a per-row value broadcast along the last dimension: kept as size 1, or dropped."""
    dims = ", ".join(f"d{i}" for i in range(rank))
    lead = ", ".join(f"d{i}" for i in range(rank - 1))
    return f"({dims}) -> ({lead}, 0)", f"({dims}) -> ({lead})"


def identities(op: ir.Operation, rank: int) -> bool:
    return all(str(ir.AffineMapAttr(m).value) == identity_map(rank) for m in op.attributes["indexing_maps"])


def reading(op: ir.Operation, x: ir.Value) -> tuple[list[ir.Operation], ir.Value | None, int]:
    """(the rest of the body, the value standing for f32 `x`, the inputs read for it) of a generic
    whose first input is `x`, or whose first inputs are those of x's elementwise producer, with the
    producer's body cloned at the start of its own (kiln's fusion computes a residual add, or a bf16
    model's widening, again in each consumer); (the body, None, 0) otherwise."""
    steps = body_of(op)
    if op.operands[0] == x:
        return steps, block_argument(op, 0), 1
    producer = producer_of(x)
    if name_of(producer) != "linalg.generic" or len(producer.results) != 1:
        return steps, None, 0
    inputs = list(producer.operands)[: len(producer.operands) - 1]
    theirs = body_of(producer)
    rank = len(shape_of(x))
    maps = [str(ir.AffineMapAttr(m).value) for m in producer.attributes["indexing_maps"]]
    ours = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]][: len(inputs)]
    if list(op.operands)[: len(inputs)] != inputs or ours != maps[: len(inputs)] or maps[-1] != identity_map(rank):
        return steps, None, 0
    if any("reduction" in str(t) for t in producer.attributes["iterator_types"]) or len(steps) < len(theirs):
        return steps, None, 0
    clone = len(theirs) - 1
    same = {block_argument(producer, i): block_argument(op, i) for i in range(len(inputs))}
    for mine, original in zip(steps[:clone], theirs[:clone], strict=True):
        if mine.name != original.name or len(mine.results) != 1 or mine.results[0].type != original.results[0].type:
            return steps, None, 0
        if attributes(mine) != attributes(original) or list(mine.operands) != [same.get(v, v) for v in original.operands]:
            return steps, None, 0
        same[original.results[0]] = mine.results[0]
    return steps[clone:], same.get(theirs[-1].operands[0]), len(inputs)


def attributes(op: ir.Operation) -> list[tuple[str, str]]:
    """An op's attributes as (name, printed value) pairs, to compare two ops by."""
    return [(name, str(op.attributes[name])) for name in op.attributes]


def row_reduction(value: ir.Value, source: ir.Value, combine: str, zero: bool = False) -> bool:
    """Whether `value` is a result of a generic reducing `source` over its last dimension with
    `combine`(element, accumulator), from a zero fill (`zero`) or a -inf one."""
    op = producer_of(value)
    if name_of(op) != "linalg.generic" or op.operands[0] != source or not is_static(source):
        return False
    rank = len(shape_of(source))
    iterators = [str(t) for t in op.attributes["iterator_types"]]
    if len(iterators) != rank or "reduction" not in iterators[-1] or any("reduction" in t for t in iterators[:-1]):
        return False
    inputs = len(op.operands) - len(op.results)
    if inputs != 1 or str(ir.AffineMapAttr(op.attributes["indexing_maps"][0]).value) != identity_map(rank):
        return False
    index = next(i for i, result in enumerate(op.results) if result == value)
    yielded = body_of(op)[-1].operands[index]
    combined = producer_of(yielded)
    if name_of(combined) != combine or sorted(argument_number(v) for v in combined.operands) != [0, 1 + index]:
        return False
    fill = producer_of(op.operands[inputs + index])
    if name_of(fill) != "linalg.fill" or name_of(producer_of(fill.operands[0])) != "arith.constant":
        return False
    initial = producer_of(fill.operands[0]).attributes["value"]
    wanted = 0.0 if zero else float("-inf")
    return isinstance(initial, ir.FloatAttr) and initial.value == wanted


def padded_by_constant(x: ir.Value) -> tuple[ir.Value, list[int], list[int], ir.Attribute | None]:
    """The NCHW tensor `x` pads in height and width with a constant, the low and high padding and the
    constant; else `x`, 0s and None."""
    pad = producer_of(x)
    none = (x, [0, 0], [0, 0], None)
    if name_of(pad) != "tensor.pad" or len(pad.operands) != 1 or not is_static(pad.operands[0]):
        return none
    low = list(ir.DenseI64ArrayAttr(pad.attributes["static_low"]))
    high = list(ir.DenseI64ArrayAttr(pad.attributes["static_high"]))
    constant = producer_of(body_of(pad)[-1].operands[0])
    if name_of(constant) != "arith.constant" or low[:2] != [0, 0] or high[:2] != [0, 0] or min(low + high) < 0:
        return none
    return pad.operands[0], low[2:], high[2:], constant.attributes["value"]


@dataclass(frozen=True)
class Rows:
    """A static tensor (`value`) as the row kernels see it: rows of its last dimension, [rows][cols]."""

    value: ir.Value

    @property
    def shape(self) -> list[int]:
        return shape_of(self.value)

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def cols(self) -> int:
        return self.shape[-1]

    def _collapse(self) -> list[list[int]]:
        rank = len(self.shape)
        return [list(range(rank - 1)), [rank - 1]]

    def collapsed(self, name: str) -> str:
        """The line making `%x2`, the tensor `name` (of the value's type) as [rows][cols]."""
        return f"%x2 = tensor.collapse_shape {name} {self._collapse()} : {self.value.type} into tensor<{self.rows}x{self.cols}xf32>"

    def expanded(self, flat: str, element: str, result: str) -> str:
        """The line making `%r`, the [rows][cols] `flat` of `element` in the value's shape, typed `result`."""
        return (
            f"%r = tensor.expand_shape {flat} {self._collapse()} output_shape {self.shape} : "
            f"tensor<{self.rows}x{self.cols}x{element}> into {result}"
        )


def private_function(name: str, arguments: str, result: str, body: list[str]) -> str:
    """The text of private function `name` (module-level, for HandOff.add or .replace)."""
    lines = "\n    ".join(body)
    return f"  func.func private @{name}({arguments}) -> {result} {{\n    {lines}\n  }}"
