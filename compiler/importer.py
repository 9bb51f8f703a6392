"""Import: the ExportedProgram becomes torch-dialect MLIR made of `torch.aten.*` ops.

torch-mlir's FX importer does the work. Before it, the program is decomposed with torch-mlir's
own decomposition table (the ops its lowerings expect) and kiln's additions (decompositions.py). Weights are inlined as literals, or, when
externalized, lifted into named parameters (see weights.py).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
from torch.export import ExportedProgram
from torch_mlir import ir
from torch_mlir.dialects import torch as torch_dialect
from torch_mlir.extras.fx_decomp_util import get_decomposition_table
from torch_mlir.extras.fx_importer import FxImporter

from kiln.errors import KilnError

from .decompositions import KILN_DECOMPOSITIONS
from .weights import Parameters, WeightHooks

STAGE = "aten"


# Ops IREE's torch input pipeline lowers whole, to one fused op (attention: iree_linalg_ext.attention).
# Kept out of the decomposition table when kiln hands IREE the torch dialect.
FUSED_IN_IREE = (
    torch.ops.aten.scaled_dot_product_attention.default,
    torch.ops.aten._scaled_dot_product_flash_attention_for_cpu.default,
)


def decomposition_table(keep_fused: bool) -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    table = {**get_decomposition_table(), **KILN_DECOMPOSITIONS}
    return {op: fn for op, fn in table.items() if not (keep_fused and op in FUSED_IN_IREE)}


def import_program(
    programs: dict[str, ExportedProgram],
    external_weights: bool,
    keep_fused: bool = False,
    prepare: Callable[[str, ExportedProgram], Any] = lambda name, program: None,
) -> tuple[ir.Module, Parameters | None]:
    """Import each program as the function of its name into one module; weights are shared.

    `keep_fused`: leave the ops in FUSED_IN_IREE whole, for IREE's torch input pipeline.
    `prepare(name, program)` sees each program as it is imported, decomposed (functional).
    """
    context = ir.Context()
    torch_dialect.register_dialect(context)
    context.allow_unregistered_dialects = True  # the `#stream.parameter.named` attribute is IREE's
    module = ir.Module.create(ir.Location.unknown(context))
    hooks = WeightHooks(module, external=external_weights)
    for name, program in programs.items():
        try:
            decomposed = program.run_decompositions(decomposition_table(keep_fused))
            prepare(name, decomposed)
            # The frozen import looks up every buffer in the state dict, but torch.export keeps
            # non-persistent buffers (e.g. BERT's position_ids) among the constants.
            for buffer in decomposed.graph_signature.non_persistent_buffers:
                decomposed.state_dict[buffer] = decomposed.constants[buffer]
            hooks.name_weights(decomposed)
            FxImporter(module=module, hooks=hooks).import_frozen_program(decomposed, func_name=name)
        except NotImplementedError as exc:
            raise KilnError(
                f"the torch-mlir importer cannot import this program: {exc}",
                stage=STAGE,
                hint="an op or construct in the model has no MLIR import; --debug shows where",
            ) from exc
    return module, Parameters(hooks.lifted) if external_weights else None
