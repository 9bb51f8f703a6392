"""The pass-group stages (`02-prims.mlir`, `03-simplified.mlir`, ...): each group of the pipeline in use
runs its passes on the module in place, and its dump is the record of what it produced.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.passes import (
    PASSES,
    PassGroup,
    check_pipeline,
    with_placements,
    with_strict_primitives,
    without_passes,
)
from kiln.passes.pass_api import PassFailure, run_pass
from kiln.targets.target import ResolvedTarget

from ..options import CompileOptions
from . import Program, StageContext, shorten


def active_pipeline(options: CompileOptions, resolved: ResolvedTarget) -> tuple[PassGroup, ...]:
    """The pass groups a compile runs: the pipeline asked for, with the target's passes placed in it, up to
    the hand-off, less the passes disabled."""
    check_pipeline(options.pipeline)
    pipeline = with_strict_primitives(options.pipeline) if options.strict_primitives else options.pipeline
    pipeline = with_placements(pipeline, resolved.passes)
    pipeline = without_passes(_up_to_handoff(pipeline, resolved.handoff), options.disable_passes)
    listed = {name for group in pipeline for name in group.passes}
    for name in options.print_after:
        if name not in listed:
            raise KilnError(f"--print-after {name}: no such pass in the pipeline", stage="options")
    return pipeline


def _up_to_handoff(pipeline: tuple[PassGroup, ...], handoff: str) -> tuple[PassGroup, ...]:
    """The pipeline's groups that work above the hand-off: at "torch", those before the lowering to linalg."""
    if handoff == "linalg":
        return pipeline
    groups: list[PassGroup] = []
    for group in pipeline:
        if any(PASSES[name].lowers_to == "linalg" for name in group.passes):
            break
        groups.append(group)
    return tuple(groups)


def stage(group: PassGroup) -> Callable[[Program, StageContext], Program]:
    def run_group(program: Program, context: StageContext) -> Program:
        mark_target(program.module, context.resolved)
        for name in group.passes:
            start = time.perf_counter()
            try:
                run_pass(program.module, PASSES[name], context.dump_stem)
            except PassFailure as failure:
                raise _lowering_error(failure, group, context) from failure
            context.pass_times[name] = context.pass_times.get(name, 0.0) + time.perf_counter() - start
            if context.dump_stem is not None and (context.options.print_after_all or name in context.options.print_after):
                context.dump_stem.with_name(f"{context.dump_stem.name}.after-{name}.mlir").write_text(str(program))
        return program

    return run_group


def _lowering_error(failure: PassFailure, group: PassGroup, context: StageContext) -> KilnError:
    first = failure.diagnostics[0] if failure.diagnostics else None
    source = _SOURCE_LOCATION.search(first.location) if first else None
    where = f" at {source.group(1)}:{source.group(2)}" if source else ""
    subject = f"op {failure.op_name}" if failure.op_name else "the module"
    detail = shorten(first.message.splitlines()[0]) if first else "no diagnostic"
    rerun = None
    if context.input_dump is not None:
        passes = group.passes[: group.passes.index(failure.pass_name) + 1]
        rerun = f"kiln opt {context.input_dump} --pass {','.join(passes)}"
    return KilnError(
        f"{subject}{where} failed in pass '{failure.pass_name}': {detail}",
        stage=group.name,
        file=context.input_dump,
        hint=(
            (PASSES[failure.pass_name].hint or f"kiln's pass {failure.pass_name} rejected the module")
            + (f"; reproduce with: {rerun}" if rerun else "")
        ),
    )


# MLIR's file location, e.g. loc("/path/model.py":6:0); torch-mlir keeps the model's source lines.


_SOURCE_LOCATION = re.compile(r'"([^"]+)":(\d+):\d+')


def mark_target(module: ir.Module, resolved: ResolvedTarget) -> None:
    """Say on the module what the passes may ask about the target (ResolvedTarget.module_attributes)."""
    with module.context:
        for name, value in resolved.module_attributes.items():
            module.operation.attributes[name] = ir.StringAttr.get(value)
