"""The elementwise ops after a matmul that its kernel computes on its output tile: a matmul's epilogue
(contraction.Matmul.epilogue).

A GELU after a Linear layer is otherwise a pass of its own over the product: written by the matmul,
read back, written again (ConvNeXt's GELUs, about 0.5 ms of its 4.5 ms call at batch 32 on the
H200). The epilogue is the region of ops that reads nothing but the products (one, or in a decode
step two with the same A: SwiGLU's gate and up, contract.gated_outlined) and constants, each op a
row-program step (row_steps.py) other than a sum or maximum, every value but the last read inside the
region only. Views between the product and the region that keep its columns (nn.Linear on
[batch, seq, features] flattens and restores the leading dims) are moved past the region, so that it
computes on the [M, N] products and the kernel's tile is its input.

Not an epilogue: ops whose result only an elementwise op with another matmul's product reads (the
SiLU of SwiGLU's gate with more rows than a decode step's). outline-row-programs then computes the
SiLU and the product in one pass reading each product once; with the SiLU in the gate's kernel the
product was an IREE dispatch of its own. Nor the product itself with the up's tile read in the gate's
epilogue: kiln_matmul's epilogue loads are not overlapped with its tensor cores' work, and that
kernel ran as long as the gate and the row program apart (results/ptx-matmuls-other-h200.json).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from kiln.passes.torch_build import dtype_of, static_type
from kiln.passes.torch_ir import defining_op, user_op, vtensor

from .row_steps import BINARY, REDUCTIONS, STEP_OPS, step_of


@dataclass
class Epilogue:
    """The region's ops in block order, on the [M, N] products (the last one's result is what the
    kernel stores), and their row-program steps over v0 and v1, the products."""

    ops: list[ir.Operation]
    steps: list[tuple[Any, ...]]
    stale: list[ir.Operation]  # the views the region was moved past, unused now: the caller erases them


def find(products: list[ir.Value]) -> Epilogue | None:
    """The epilogue reading every one of `products` (matmul results of one shape [M, N]), or None.
    Where the region computes on views of them, it is rebuilt on the products first (the IR changes)."""
    described = [static_type(value) for value in products]
    if any(found is None or len(found.shape) != 2 for found in described) or len({found.shape for found in described}) != 1:  # type: ignore[union-attr]
        return None
    entries = [_entry(value) for value in products]
    shapes = {static_type(value).shape for value in entries}  # type: ignore[union-attr]
    if len(shapes) != 1:
        return None
    region = _region(entries, shapes.pop())
    if region is None or (len(products) == 1 and _gates_a_product(region[-1])):
        return None
    stale = [defining_op(entry) for entry in entries if entry not in products]
    if stale:
        region = _flattened(region, dict(zip(entries, products, strict=True)), described[0].shape)  # type: ignore[union-attr]
    numbers: dict[ir.Value, int] = {value: index for index, value in enumerate(products)}
    steps = []
    for op in region:
        kind, operands = step_of(op, tuple(static_type(op.results[0]).shape))  # type: ignore[misc, union-attr]
        steps.append((kind, dtype_of(op.results[0]), *(numbers[x] if isinstance(x, ir.Value) else x for x in operands)))
        numbers[op.results[0]] = 2 + len(steps) - 1  # v0 and v1 are the products, then the steps
    return Epilogue(region, steps, stale)  # type: ignore[arg-type]


def _entry(product: ir.Value) -> ir.Value:
    """Where the region starts: the product, or its one user where that is a view keeping its columns."""
    uses = list(product.uses)
    if len(uses) != 1 or uses[0].owner.name != "torch.aten.view":
        return product
    view = uses[0].owner.results[0]
    rows, cols = static_type(product).shape  # type: ignore[union-attr]
    shape = static_type(view).shape if static_type(view) is not None else ()  # type: ignore[union-attr]
    return view if len(shape) >= 2 and shape[-1] == cols and math.prod(shape) == rows * cols else product


def _region(entries: list[ir.Value], shape: tuple[int, ...]) -> list[ir.Operation] | None:
    """The ops after `entries` that compute from them and constants alone, trimmed from the end until
    only the last one is read outside and every entry is read inside only; None if none is left."""
    block = defining_op(entries[0]).operation.block  # type: ignore[union-attr]
    ops = [op.operation for op in block.operations]
    position = {op: index for index, op in enumerate(ops)}
    index = min(position[defining_op(value)] for value in entries)  # type: ignore[index]
    values = set(entries)
    last_use = max(_last_user(value, position) for value in entries)
    region: list[ir.Operation] = []
    while index < last_use:
        index += 1
        op = ops[index]
        found = step_of(op, shape)
        if found is None or found[0] in REDUCTIONS:
            continue
        read = [x for x in found[1] if isinstance(x, ir.Value)]  # the others are constants
        if read and all(value in values for value in read):
            region.append(op)
            values.add(op.results[0])
            last_use = max(last_use, _last_user(op.results[0], position))
    while region:
        inside = set(region)
        exits = [op for op in region if any(user_op(use) not in inside for use in op.results[0].uses)]
        entries_inside = all(
            list(value.uses) and all(user_op(use) in inside for use in value.uses) for value in entries
        )
        if exits == [region[-1]] and entries_inside and not _widens(region[-1]):
            return region
        region.pop()
    return None


def _widens(op: ir.Operation) -> bool:
    """Whether `op` casts to a wider float. The region stops before it: its reader widens a 16-bit
    tile itself (a matmul's A, whose kernel then stays a 16-bit one), and the kernel stores half the
    bytes. Ended by the next Linear's widening of its A, the suite's bf16 MLP stored f32 and ran its
    middle matmul in IREE's f32 code (mlp-bf16-large 0.15 -> 1.43 ms on the H200)."""
    if STEP_OPS.get(op.name) != "cast":
        return False
    return _FLOAT_BITS.get(dtype_of(op.results[0]), 0) > _FLOAT_BITS.get(dtype_of(op.operands[0]), 64)


_FLOAT_BITS = {"f16": 16, "bf16": 16, "f32": 32, "f64": 64}


def _gates_a_product(sink: ir.Operation) -> bool:
    """Whether the one reader of `sink`'s result is an elementwise op that also reads another matmul's
    product (torch's mm, or an outlined kiln_mm call; through a view)."""
    uses = list(sink.results[0].uses)
    if len(uses) != 1 or STEP_OPS.get(user_op(uses[0]).name) not in BINARY:
        return False
    for operand in user_op(uses[0]).operands:
        op = defining_op(operand)
        if op is not None and op.name == "torch.aten.view":
            op = defining_op(op.operands[0])
        if op is not None and (op.name == "torch.aten.mm" or (op.name == "func.call" and op.attributes["callee"].value.startswith("kiln_mm_"))):
            return True
    return False


def _flattened(region: list[ir.Operation], products: dict[ir.Value, ir.Value], shape: tuple[int, ...]) -> list[ir.Operation]:
    """The region again on the [M, N] products (its entries are views of them), before its last op;
    a view of the new last result takes the old one's uses; the old ops are erased."""
    mapping = dict(products)
    sink = region[-1]
    copies = []
    with sink.location, ir.InsertionPoint(sink):
        for op in region:
            operands = [mapping.get(value, value) for value in op.operands]
            attributes = {named.name: named.attr for named in op.attributes}
            copy = ir.Operation.create(op.name, results=[vtensor(list(shape), dtype_of(op.results[0]))], operands=operands, attributes=attributes)
            mapping[op.results[0]] = copy.results[0]
            copies.append(copy)
        viewed = static_type(sink.results[0]).shape  # type: ignore[union-attr]
        sizes = [_int(size) for size in viewed]
        listed = ir.Operation.create("torch.prim.ListConstruct", results=[ir.Type.parse("!torch.list<int>")], operands=sizes).results[0]
        view = ir.Operation.create("torch.aten.view", results=[sink.results[0].type], operands=[copies[-1].results[0], listed])
    sink.results[0].replace_all_uses_with(view.results[0])
    for op in reversed(region):
        op.erase()
    return copies


def _int(value: int) -> ir.Value:
    attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    return ir.Operation.create("torch.constant.int", results=[ir.Type.parse("!torch.int")], attributes={"value": attribute}).results[0]


def _last_user(value: ir.Value, position: dict[ir.Operation, int]) -> int:
    return max((position.get(user_op(use), -1) for use in value.uses), default=-1)
