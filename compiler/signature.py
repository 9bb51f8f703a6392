"""The calling convention of a captured program: input and output names, shapes and dtypes.

Read off the ExportedProgram once, at import, and carried with the IR to the manifest. A dynamic
dimension is recorded as its symbol's name ("s0"); the symbol's bounds come from torch.export's
range constraints, and two inputs that share a symbol must agree on its size.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch
from torch.export import ExportedProgram

from kiln.runtime.manifest import Dim, TensorSpec
from kiln.runtime.tensors import dtype_name


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    symbols: dict[str, tuple[int, int | None]] = field(default_factory=dict)  # name -> (min, max or None)


def signature_of(program: ExportedProgram) -> Signature:
    nodes = {node.name: node for node in program.graph.nodes}
    graph_signature = program.graph_signature
    inputs = tuple(_spec(name, nodes[name].meta["val"]) for name in graph_signature.user_inputs)
    output_node = next(node for node in program.graph.nodes if node.op == "output")
    values = output_node.args[0][-len(graph_signature.user_outputs) :] if graph_signature.user_outputs else ()
    outputs = tuple(
        _spec(name or f"output{i}", node.meta["val"])
        for i, (name, node) in enumerate(zip(graph_signature.user_outputs, values, strict=True))
    )
    used = {dim for spec in inputs for dim in spec.shape if isinstance(dim, str)}
    symbols = {
        str(symbol): _bounds(bounds) for symbol, bounds in program.range_constraints.items() if str(symbol) in used
    }
    return Signature(inputs=inputs, outputs=outputs, symbols=symbols)


def _spec(name: str, value: torch.Tensor) -> TensorSpec:
    return TensorSpec(name=name, shape=tuple(_dim(d) for d in value.shape), dtype=dtype_name(value.dtype))


def _dim(size: int | torch.SymInt) -> Dim:
    if isinstance(size, torch.SymInt):
        expression = size.node.expr
        return int(expression) if expression.is_number else str(expression)
    return int(size)


def _bounds(ranges: object) -> tuple[int, int | None]:
    lower, upper = ranges.lower, ranges.upper  # type: ignore[attr-defined]
    return int(lower), (int(upper) if math.isfinite(float(upper)) else None)
