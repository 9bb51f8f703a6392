"""Import: the ExportedProgram becomes torch-dialect MLIR made of `torch.aten.*` ops.

torch-mlir's FX importer does the work. Before it, the program is decomposed with torch-mlir's
own decomposition table (the ops its lowerings expect); weights are inlined as literals.
"""

from __future__ import annotations

from torch.export import ExportedProgram
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

from kiln.errors import KilnError

STAGE = "aten"
ENTRY = "main"


def import_program(program: ExportedProgram) -> ir.Module:
    context = ir.Context()
    torch_dialect.register_dialect(context)
    importer = FxImporter(context=context)
    try:
        decomposed = program.run_decompositions(get_decomposition_table())
        importer.import_frozen_program(decomposed, func_name=ENTRY)
    except NotImplementedError as exc:
        raise KilnError(
            f"the torch-mlir importer cannot import this program: {exc}",
            stage=STAGE,
            hint="an op or construct in the model has no MLIR import; --debug shows where",
        ) from exc
    return importer.module
