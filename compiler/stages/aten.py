"""The `aten` stage (`01-aten.mlir`): torch.export's programs imported as torch-dialect MLIR, with the
calling convention read off each one and kept on the module (CALLING_CONVENTION), so that a compile
can start again from any stage's dump (`--start-from`).
"""

from __future__ import annotations

import json
from dataclasses import asdict, replace
from pathlib import Path
from typing import TYPE_CHECKING

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.runtime.manifest import FunctionSpec, TensorSpec, function_spec, generation_spec

from ..boundary import apply_plan
from ..capture import Exported
from ..importer import import_program
from ..signature import Plan, Signature, plan_convention, shared_state
from . import Program, StageContext

if TYPE_CHECKING:
    from torch.export import ExportedProgram

CALLING_CONVENTION = "kiln.calling_convention"  # module attribute: the functions and precision, as JSON


def run(exported: Exported, context: StageContext) -> Program:
    assert context.spec is not None
    plans: dict[str, Plan] = {}
    programs = exported.programs
    state: frozenset[str] = frozenset()  # state one function mutates is read by every function from the artifact

    def share(decomposed: dict[str, ExportedProgram]) -> None:
        nonlocal state
        state = shared_state(decomposed)

    checkpoint = context.spec.weights  # weights kept in a checkpoint are external unless --params inline
    resolved = context.resolved
    module, parameters = import_program(
        programs,
        resolved.external_weights(context.spec.weight_bytes) or (checkpoint is not None and resolved.params != "inline"),
        keep_fused=resolved.handoff == "torch",
        fused_dtypes=resolved.target.fused_attention_dtypes,
        takes_attention=resolved.kernels.takes_attention if resolved.kernels is not None else None,
        prepare=lambda name, program: plans.setdefault(name, plan_convention(program, state, programs[name])),
        on_decomposed=share,
    )
    if parameters is not None and checkpoint is not None:
        parameters = replace(parameters, source=checkpoint)
    for name, plan in plans.items():
        apply_plan(module, name, plan)
    carried = resolved.target.carried_dtypes
    functions = tuple(_function_spec(name, plan.signature, carried) for name, plan in plans.items())
    generation = context.spec.generation
    convention = {
        "functions": [asdict(function) for function in functions],
        "precision": context.spec.precision,
        "generation": asdict(generation) if generation is not None else None,
        "quantized": context.spec.quantized,
    }
    with module.context:
        module.operation.attributes[CALLING_CONVENTION] = ir.StringAttr.get(json.dumps(convention))
    return Program(module, functions, context.spec.precision, parameters, generation, context.spec.quantized)


def _function_spec(name: str, signature: Signature, carried: dict[str, str]) -> FunctionSpec:
    """The manifest's entry for one function; a dtype the target lacks is carried as another one."""

    def boundary(specs: tuple[TensorSpec, ...]) -> tuple[TensorSpec, ...]:
        return tuple(replace(spec, carried_as=carried.get(spec.dtype)) for spec in specs)

    return FunctionSpec(
        name=name,
        inputs=boundary(signature.inputs),
        outputs=boundary(signature.outputs),
        symbols={symbol: list(bounds) for symbol, bounds in signature.symbols.items()},
        arguments=signature.arguments,
        results=signature.results,
        writes_back=signature.writes_back,
        state=signature.state,
    )


def program_from_dump(module: ir.Module, path: Path) -> Program:
    attribute = module.operation.attributes[CALLING_CONVENTION] if CALLING_CONVENTION in module.operation.attributes else None
    if attribute is None:
        raise KilnError(
            f"--start-from {path}: the module has no {CALLING_CONVENTION} attribute; only kiln's own stage dumps "
            "say how the artifact is called",
            stage="options",
        )
    convention = json.loads(ir.StringAttr(attribute).value)
    functions = tuple(function_spec(function) for function in convention["functions"])
    generation = convention.get("generation")
    generation_value = generation_spec(generation) if generation else None
    return Program(module, functions, convention.get("precision"), None, generation_value, convention.get("quantized"))
