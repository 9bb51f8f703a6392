"""The calling convention of a captured program: input and output names, shapes and dtypes.

Read off the ExportedProgram once, at import, and carried with the IR to the manifest.
"""

from __future__ import annotations

from dataclasses import dataclass

import torch
from torch.export import ExportedProgram

from kiln.runtime.manifest import TensorSpec
from kiln.runtime.tensors import dtype_name


@dataclass(frozen=True)
class Signature:
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]


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
    return Signature(inputs=inputs, outputs=outputs)


def _spec(name: str, value: torch.Tensor) -> TensorSpec:
    return TensorSpec(name=name, shape=tuple(int(d) for d in value.shape), dtype=dtype_name(value.dtype))
