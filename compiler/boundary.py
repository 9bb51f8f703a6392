"""The imported function made to take and return exactly what the calling convention says.

torch-mlir's frozen import gives each function the graph's placeholders as arguments (tensors,
specialized Python scalars, symbolic ints, and here the mutated state signature.py lifted into
inputs) and returns everything the functionalized graph returns (new state, mutated inputs, then
forward's leaves, constants included). This rewrites it, following signature.Plan:

- a specialized scalar argument is dropped (a constant stands in for any use of it);
- a symbolic int argument or result becomes a 0-d int64 tensor (`aten.Int.Tensor`, `prim.NumToTensor`);
- a state argument becomes a load of a mutable `ml_program.global` holding its initial value, and
  its new value is stored back before the return: the artifact keeps it across calls;
- the results become forward's tensor leaves, then each mutated input's new value; constants go.
"""

from __future__ import annotations

import numpy as np
import torch
from torch_mlir import ir

from kiln.errors import KilnError
from kiln.passes.pass_api import load_torch_conversion_dialect
from kiln.runtime.tensors import to_host_array

from .functions import functions_by_name
from .signature import Plan

STAGE = "aten"

# torch dtype -> the element type of the builtin tensor a global holds (torch's vtensors are signed).
ELEMENT_TYPES = {
    torch.float32: "f32", torch.float16: "f16", torch.bfloat16: "bf16", torch.float64: "f64",
    torch.int64: "i64", torch.int32: "i32", torch.int16: "i16", torch.int8: "i8", torch.uint8: "ui8",
    torch.bool: "i1", torch.complex64: "complex<f32>", torch.complex128: "complex<f64>",
}  # fmt: skip

INT_TENSOR = "!torch.vtensor<[],si64>"


def apply_plan(module: ir.Module, function_name: str, plan: Plan) -> None:
    """Rewrite `function_name` of `module` in place to the convention `plan` describes."""
    context = module.context
    if plan.state_values:
        load_torch_conversion_dialect(context)
    with context, ir.Location.unknown(context):
        function = _function(module, function_name)
        for name, value in plan.state_values.items():
            _declare_state(module, name, value)
        block = function.regions[0].blocks[0]
        _rewrite_arguments(block, plan, function_name)
        results = _rewrite_results(block, plan, function_name)
        function.attributes["function_type"] = ir.TypeAttr.get(
            ir.FunctionType.get([value.type for value in block.arguments], [value.type for value in results])
        )


def _rewrite_arguments(block: ir.Block, plan: Plan, function_name: str) -> None:
    """Fresh arguments, one per input of the convention and in its order; the imported ones then go."""
    arguments = list(block.arguments)
    if len(arguments) != len(plan.arguments):
        raise KilnError(
            f"function '{function_name}' was imported with {len(arguments)} arguments; its convention has "
            f"{len(plan.arguments)} (an importer change kiln does not know)",
            stage=STAGE,
        )
    pairs = list(zip(arguments, plan.arguments, strict=True))
    fresh: dict[int, ir.Value] = {}
    for argument, role in sorted((pair for pair in pairs if pair[1].kind in ("tensor", "scalar")), key=lambda pair: pair[1].index):
        type_ = ir.Type.parse(INT_TENSOR) if role.kind == "scalar" else argument.type
        fresh[role.index] = block.add_argument(type_, ir.Location.unknown())
    entry = ir.InsertionPoint.at_block_begin(block)
    for argument, role in pairs:
        if role.kind == "tensor":
            argument.replace_all_uses_with(fresh[role.index])
        elif role.kind == "scalar":
            argument.replace_all_uses_with(_create(entry, "torch.aten.Int.Tensor", [fresh[role.index]], argument.type))
        elif role.kind == "constant":
            if _has_uses(argument):
                argument.replace_all_uses_with(_constant_value(entry, role.value, argument))
        else:  # state: this call's value is the global's
            global_ = {"global": ir.FlatSymbolRefAttr.get(role.name)}
            loaded = _create(entry, "ml_program.global_load", [], _builtin_type(plan.state_values[role.name]), global_)
            argument.replace_all_uses_with(_create(entry, "torch_c.from_builtin_tensor", [loaded], argument.type))
    for index in reversed(range(len(arguments))):
        block.erase_argument(index)


def _rewrite_results(block: ir.Block, plan: Plan, function_name: str) -> list[ir.Value]:
    """The return made forward's tensor leaves then the written-back inputs; new state stored before it."""
    returned = block.operations[len(block.operations) - 1]
    values = list(returned.operands)
    if len(values) != len(plan.results):
        raise KilnError(f"function '{function_name}' returns {len(values)} values; its convention has {len(plan.results)}", stage=STAGE)
    before_return = ir.InsertionPoint(returned)
    outputs: dict[int, ir.Value] = {}
    written: dict[int, ir.Value] = {}
    for value, role in zip(values, plan.results, strict=True):
        if role.kind == "tensor":
            outputs[role.index] = value
        elif role.kind == "scalar":
            outputs[role.index] = _create(before_return, "torch.prim.NumToTensor.Scalar", [value], ir.Type.parse(INT_TENSOR))
        elif role.kind == "write_back":
            written[role.index] = value
        elif role.kind == "state":
            builtin = _create(before_return, "torch_c.to_builtin_tensor", [value], _builtin_type(plan.state_values[role.name]))
            _create(before_return, "ml_program.global_store", [builtin], None, {"global": ir.FlatSymbolRefAttr.get(role.name)})
    results = [outputs[index] for index in sorted(outputs)] + [written[index] for index in sorted(written)]
    ir.Operation.create("func.return", operands=results, ip=before_return)
    returned.erase()
    return results


def _function(module: ir.Module, name: str) -> ir.Operation:
    function = functions_by_name(module).get(name)
    if function is None:
        raise KilnError(f"the imported module has no function '{name}'", stage=STAGE)
    return function


def _has_uses(value: ir.Value) -> bool:
    return any(True for _ in value.uses)


def _create(
    ip: ir.InsertionPoint,
    name: str,
    operands: list[ir.Value],
    result: ir.Type | None,
    attributes: dict[str, ir.Attribute] | None = None,
) -> ir.Value | None:
    op = ir.Operation.create(name, results=[result] if result is not None else [], operands=operands, attributes=attributes, ip=ip)
    return op.result if result is not None else None


def _constant_value(ip: ir.InsertionPoint, value: object, argument: ir.Value) -> ir.Value:
    """A torch constant op for a specialized scalar that the imported function still reads."""
    if isinstance(value, bool):
        return _create(ip, "torch.constant.bool", [], argument.type, {"value": ir.BoolAttr.get(value)})
    if isinstance(value, int):
        return _create(ip, "torch.constant.int", [], argument.type, {"value": ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)})
    if isinstance(value, float):
        return _create(ip, "torch.constant.float", [], argument.type, {"value": ir.FloatAttr.get(ir.F64Type.get(), value)})
    if value is None:
        return _create(ip, "torch.constant.none", [], argument.type)
    raise KilnError(f"a specialized argument of type {type(value).__name__} is read by the program", stage=STAGE)


def _builtin_type(value: torch.Tensor) -> ir.RankedTensorType:
    if value.dtype not in ELEMENT_TYPES:
        raise KilnError(f"module state of dtype {value.dtype} cannot be kept in the artifact", stage=STAGE)
    return ir.RankedTensorType.get(list(value.shape), ir.Type.parse(ELEMENT_TYPES[value.dtype]))


def _declare_state(module: ir.Module, name: str, value: torch.Tensor) -> None:
    """`ml_program.global private mutable @name(<initial value>)`, at the top of the module after the
    state declared before it (once: the functions of one model share its state).

    In order, not each at the top: IREE packs the initial values in declaration order and a
    function's stores in state order; where the two differ, each state's offset is a global that
    changes, it reaches the dispatches as push constants, and IREE records every call's commands
    again instead of replaying them (a Llama-1B decode step: ~340 dispatches, 5 ms host-bound)."""
    declared = [op for op in module.body.operations if op.operation.name == "ml_program.global"]
    if any(ir.StringAttr(op.operation.attributes["sym_name"]).value == name for op in declared):
        return
    tensor_type = _builtin_type(value)
    array = to_host_array(value)
    if value.dtype == torch.bool:
        array = array.astype(np.uint8)  # one byte per i1 element, as MLIR's dense resources hold them
    initial = ir.DenseResourceElementsAttr.get_from_buffer(np.ascontiguousarray(array), f"kiln_state.{name}", tensor_type)
    with ir.InsertionPoint.after(declared[-1]) if declared else ir.InsertionPoint.at_block_begin(module.body):
        ir.Operation.create(
            "ml_program.global",
            attributes={
                "sym_name": ir.StringAttr.get(name),
                "sym_visibility": ir.StringAttr.get("private"),
                "type": ir.TypeAttr.get(tensor_type),
                "value": initial,
                "is_mutable": ir.UnitAttr.get(),
            },
        )

