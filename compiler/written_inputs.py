"""Which inputs the compiled code may write into: the runtime copies those before each call.

kiln hands IREE the caller's own tensors (zero-copy calls), so IREE must never write into them. It
does, though, where an op updates a tensor in place and that tensor is a function argument: IREE
3.13 bufferizes a scatter, a sort or a slice update "into" its destination, and when the
destination is an argument it elides the copy that would protect the caller's buffer
(iree-org/iree#16168, #24665). `x.scatter_add(0, idx, src)` then returned the right result and
changed `x`.

So the backend looks, in the module it hands to IREE, for arguments that reach a destination
operand (an op's `outs`, `tensor.insert_slice`'s destination, a loop's initial value) through
nothing but views and casts, and the manifest lists them (`FunctionSpec.overwritten`). At the
torch hand-off the in-place forms are IREE's to choose, so every tensor argument of a function
that has an op IREE may compute in place is listed. The runtime copies a listed input once per
call; inputs not listed go to IREE as they are.
"""

from __future__ import annotations

from torch_mlir import ir

from .functions import functions_by_name

# Ops whose result is a view of (or the same buffer as) their first operand.
_VIEWS = frozenset(
    {"tensor.cast", "tensor.expand_shape", "tensor.collapse_shape", "tensor.extract_slice", "tensor.reshape"}
)
# Ops whose destination is an operand at a fixed position (others: by their ins/outs segments).
_DESTINATION_OPERANDS = {"tensor.insert_slice": 1, "tensor.insert": 1, "tensor.parallel_insert_slice": 1}
# torch-level ops that IREE's torch input conversion may compute in place on an operand.
_IN_PLACE_TORCH_OPS = (
    "scatter", "index_put", "index_add", "index_copy", "index_fill", "sort", "topk", "slice_scatter",
    "select_scatter", "diagonal_scatter", "masked_scatter", "overwrite.tensor.contents", "copy_",
)  # fmt: skip


def overwritten_inputs(module: ir.Module, names: tuple[str, ...]) -> dict[str, tuple[int, ...]]:
    """For each public function in `names`: the indices of the arguments IREE may write into."""
    functions = functions_by_name(module)
    return {
        name: _written(functions[name].regions[0].blocks[0])
        for name in names
        if name in functions and functions[name].regions[0].blocks
    }


def _written(body: ir.Block) -> tuple[int, ...]:
    arguments = list(body.arguments)
    torch_ops = [op.name for op in _walk(body) if op.name.startswith("torch.")]
    if any(fragment in name for name in torch_ops for fragment in _IN_PLACE_TORCH_OPS):
        return tuple(index for index, argument in enumerate(arguments) if _is_tensor(argument.type))
    return tuple(index for index, argument in enumerate(arguments) if _reaches_destination(argument))


def _reaches_destination(value: ir.Value) -> bool:
    pending = [value]  # SSA: views of views never lead back, so nothing is visited twice
    while pending:
        current = pending.pop()
        for use in current.uses:
            owner = use.owner
            operation = owner.operation if hasattr(owner, "operation") else owner
            if _is_destination(operation, use.operand_number):
                return True
            if operation.name in _VIEWS and use.operand_number == 0:
                pending.extend(operation.results)
    return False


def _is_destination(operation: ir.Operation, index: int) -> bool:
    if operation.name in _DESTINATION_OPERANDS:
        return index == _DESTINATION_OPERANDS[operation.name]
    if operation.name == "scf.for":
        return index >= 3  # lower bound, upper bound, step, then the loop-carried initial values
    if "operandSegmentSizes" in operation.attributes:  # ins/outs ops: linalg, tm_tensor
        segments = list(ir.DenseI32ArrayAttr(operation.attributes["operandSegmentSizes"]))
        return len(segments) == 2 and index >= segments[0]
    return False


def _walk(block: ir.Block):  # type: ignore[no-untyped-def]
    for op in block.operations:
        yield op.operation
        for region in op.operation.regions:
            for inner in region.blocks:
                yield from _walk(inner)


def _is_tensor(type_: ir.Type) -> bool:
    text = str(type_)
    return text.startswith(("tensor<", "!torch.vtensor", "!torch.tensor"))
