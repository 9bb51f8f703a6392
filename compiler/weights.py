"""How weights enter the IR: inlined as literals, or lifted into named external parameters.

torch-mlir's importer inlines every parameter and buffer as a `torch.vtensor.literal`, after which
nothing can be externalized. With `external`, an importer hook instead declares each large weight
as `ml_program.global @"<fqn>"(#stream.parameter.named<"model"::"<fqn>">)` and loads it with
`ml_program.global_load_const`: torch-mlir's linalg contract allows ml_program, and IREE turns
the global into a parameter read from an `.irpa` archive at load time. The archive holds the
weights under their PyTorch names, so it can be inspected or replaced without recompiling.

A model built without its weights (parameters on the meta device, weights in a checkpoint) goes
the same way: the hook needs only a weight's name, shape and dtype, so every meta tensor becomes a
parameter global, whatever its size, and its bytes are first read when the archive is written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
import torch
from torch.export import ExportedProgram
from torch_mlir import ir
from torch_mlir.extras.fx_importer import FxImporterHooks, GraphNodeImporter

from kiln.errors import KilnError
from kiln.passes.pass_api import load_torch_conversion_dialect
from kiln.runtime.manifest import PARAMETER_SCOPE
from kiln.runtime.tensors import to_host_array

from .checkpoint import BoundWeights, is_weightless
from .parameter_archive import ArchiveEntry, write_parameter_archive

MIN_EXTERNAL_BYTES = 1024  # smaller tensors stay inline, where IREE can fold them

# torch dtype -> MLIR element type of the builtin tensor a parameter global holds.
_ELEMENT_TYPES = {
    torch.float32: "f32",
    torch.float16: "f16",
    torch.bfloat16: "bf16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.int8: "i8",
    torch.uint8: "ui8",
}


@dataclass(frozen=True)
class Parameters:
    """Weights lifted out of the IR: PyTorch name -> tensor, served to the artifact under PARAMETER_SCOPE.

    A meta tensor stands for a weight that `source` holds (a checkpoint), in the tensor's dtype.
    """

    tensors: dict[str, torch.Tensor]
    source: BoundWeights | None = None

    @property
    def nbytes(self) -> int:
        return sum(t.numel() * t.element_size() for t in self.tensors.values())

    def arrays(self) -> dict[str, np.ndarray]:
        """Each weight's bytes as a host array (bf16 as its int16 bits: the archive holds raw bytes).
        All of them in memory at once: `save` writes an archive without that."""
        return {name: to_host_array(self._tensor(name, tensor)) for name, tensor in self.tensors.items()}

    def save(self, path: Path) -> None:
        """Write the `.irpa` archive one weight at a time: from memory, or streamed from the checkpoint."""
        write_parameter_archive(
            path,
            [ArchiveEntry(name, t.numel() * t.element_size(), self._writer(name, t)) for name, t in self.tensors.items()],
        )

    def _tensor(self, name: str, tensor: torch.Tensor) -> torch.Tensor:
        if tensor.device.type != "meta":
            return tensor
        assert self.source is not None, f"weight '{name}' is on the meta device and no checkpoint holds it"
        return self.source.tensor(name, tensor.dtype)

    def _writer(self, name: str, tensor: torch.Tensor) -> Callable[[BinaryIO], None]:
        def write(file: BinaryIO) -> None:
            if tensor.device.type == "meta":
                assert self.source is not None, f"weight '{name}' is on the meta device and no checkpoint holds it"
                self.source.write(name, tensor.dtype, file)
            else:
                file.write(memoryview(to_host_array(tensor)))

        return write


def external_parameters(module: ir.Module) -> int:
    """How many weights `module` reads from a parameter archive (its `ml_program.global`s naming one)."""
    return sum(
        op.operation.name == "ml_program.global" and "stream.parameter.named" in str(op.operation.attributes["value"])
        for op in module.body.operations
    )


class WeightHooks(FxImporterHooks):
    """Importer hook for every weight of at least MIN_EXTERNAL_BYTES: a named parameter global when
    `external`, else an inline literal built straight from the tensor's memory (torch-mlir's own
    path goes through `tensor.tolist()`, which takes minutes for a 100M-parameter model)."""

    def __init__(self, module: ir.Module, external: bool) -> None:
        self._names: dict[int, str] = {}
        self._module = module
        self._external = external
        self._literals: dict[str, ir.Attribute] = {}  # one copy of each weight, however many functions use it
        self.lifted: dict[str, torch.Tensor] = {}
        if external:
            load_torch_conversion_dialect(module.context)

    def name_weights(self, program: ExportedProgram) -> None:
        """Learn the names of `program`'s weights (by identity) before it is imported."""
        for name, tensor in [*program.state_dict.items(), *program.constants.items()]:
            self._names.setdefault(id(tensor), name)  # a tied weight keeps its first name

    def resolve_literal(self, gni: GraphNodeImporter, literal: object, info: object) -> ir.Value | None:
        if not isinstance(literal, torch.Tensor) or id(literal) not in self._names:
            return None
        name = self._names[id(literal)]
        if is_weightless(literal):
            self._check_weightless(name, literal)  # its bytes are in a checkpoint: it can only be a parameter
        elif literal.numel() * literal.element_size() < MIN_EXTERNAL_BYTES or literal.dtype not in _ELEMENT_TYPES:
            return None
        context = self._module.context
        tensor_type = ir.RankedTensorType.get(list(literal.shape), ir.Type.parse(_ELEMENT_TYPES[literal.dtype], context))
        vtensor_type = gni._cc.tensor_to_vtensor_type(literal)
        location = ir.Location.unknown(context)
        if not self._external:
            if name not in self._literals:
                self._literals[name] = ir.DenseResourceElementsAttr.get_from_buffer(
                    to_host_array(literal.detach()), f"torch_tensor.{name}", tensor_type, context=context
                )
            data = self._literals[name]
            literal_op = ir.Operation.create(
                "torch.vtensor.literal", results=[vtensor_type], attributes={"value": data}, loc=location
            )
            return literal_op.result
        if name not in self.lifted:
            self._declare_global(name, tensor_type)
            self.lifted[name] = literal.detach() if not is_weightless(literal) else _meta_like(literal)
        load = ir.Operation.create(
            "ml_program.global_load_const",
            results=[tensor_type],
            attributes={"global": ir.FlatSymbolRefAttr.get(name, context)},
            loc=location,
        )
        return ir.Operation.create(
            "torch_c.from_builtin_tensor", results=[vtensor_type], operands=[load.result], loc=location
        ).result

    def _check_weightless(self, name: str, tensor: torch.Tensor) -> None:
        if not self._external:
            raise KilnError(
                f"weight '{name}' comes from a checkpoint and cannot be inlined in the .vmfb", stage="aten",
                hint="weights from a checkpoint stay in the .irpa: use --params external (or auto)",
            )
        if tensor.dtype not in _ELEMENT_TYPES:
            raise KilnError(f"weight '{name}' is {tensor.dtype}, which a parameter archive cannot hold here", stage="aten")

    def _declare_global(self, name: str, tensor_type: ir.RankedTensorType) -> None:
        context = self._module.context
        parameter = ir.Attribute.parse(f'#stream.parameter.named<"{PARAMETER_SCOPE}"::"{name}"> : {tensor_type}', context)
        with ir.InsertionPoint.at_block_begin(self._module.body), ir.Location.unknown(context):
            ir.Operation.create(
                "ml_program.global",
                attributes={
                    "sym_name": ir.StringAttr.get(name),
                    "sym_visibility": ir.StringAttr.get("private"),
                    "type": ir.TypeAttr.get(tensor_type),
                    "value": parameter,
                },
            )


def _meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor of `tensor`'s shape and dtype: what Parameters keeps of a weight a checkpoint holds."""
    return torch.empty(tensor.shape, dtype=tensor.dtype, device="meta")
