"""The functions of an imported module by name: what the steps that change the module look up."""

from __future__ import annotations

from torch_mlir import ir


def functions_by_name(module: ir.Module) -> dict[str, ir.Operation]:
    """Every `func.func` of `module`, by its symbol name."""
    return {
        ir.StringAttr(op.operation.attributes["sym_name"]).value: op.operation
        for op in module.body.operations
        if op.operation.name == "func.func"
    }
