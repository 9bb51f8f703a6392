"""The `vmfb` stage (`NN-vmfb.*`): iree-compile the hand-off into the artifact and its manifest.

The target's kernels (its KernelProvider, where they apply) are planned on the hand-off and put in,
spliced or as a lever; the target's levers (targets/levers.py) apply where the module has ops for
them; and where the target has them, the transient variants (compiler/transients.py), which like a
lever are left out should iree-compile fail with them. The manifest records what the artifact was
compiled with.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, replace
from pathlib import Path

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.runtime.manifest import Manifest
from kiln.targets.levers import Lever, compile_with_levers
from kiln.targets.target import KernelPlan, ResolvedTarget

from ..artifact import Compiled, versions
from ..iree_backend import iree_compile_with_workarounds
from ..out_variants import add_out_variants
from ..transients import add_transient_variants, remove_transient_variants
from ..weights import external_parameters
from ..written_inputs import overwritten_inputs
from . import Program, StageContext
from .pass_groups import mark_target


def run(program: Program, context: StageContext) -> Compiled:
    resolved = context.resolved
    names = tuple(function.name for function in program.functions)
    overwritten = overwritten_inputs(program.module, names)
    variants = add_out_variants(program.module, names)
    mark_target(program.module, resolved)
    if resolved.device_targets is not None:
        with program.module.context:  # IREE's attribute, opaque here: the context allows unregistered dialects
            program.module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(resolved.device_targets)
    transients = add_transient_variants(program.module, names) if resolved.target.transient_variants else {}
    try:
        build = _build(program, context)
    except KilnError as failure:
        if not transients:
            raise
        remove_transient_variants(program.module, transients)
        transients = {}
        build = _build(program, context)  # IREE's own failure, if any, is the user's error
        note = f"note: iree-compile failed with kiln's transient variants ({failure.message}); compiled without them"
        build = replace(build, notes=(*build.notes, note))
    for note in build.notes:
        context.say(note)
    functions = tuple(
        replace(
            function,
            out_variant=variants.get(function.name),
            transients_variant=transients.get(function.name),
            overwritten=overwritten.get(function.name, ()),
        )
        for function in program.functions
    )
    manifest = Manifest(
        functions=functions,
        target=resolved.target.name,
        driver=resolved.driver,
        target_details=_details(resolved, build.used),
        iree_flags=build.flags,
        versions=versions(),
        source=_source_of(context),
        precision=program.precision,
        parameters=_parameter_summary(program),
        kernels=build.kernels.records() if build.kernels_used else (),
        cpu_features=build.kernels.features if build.kernels_used else (),
    )
    return Compiled(build.vmfb, manifest, program.parameters)


@dataclass(frozen=True)
class _Build:
    """The hand-off compiled: the artifact, the levers it used, its flags, the kernels' plan and whether
    the artifact has them, and the notes for the user (said once the build is the one kept)."""

    vmfb: bytes
    used: tuple[tuple[Lever, int], ...]
    flags: tuple[str, ...]
    kernels: KernelPlan
    kernels_used: bool
    notes: tuple[str, ...]


def _build(program: Program, context: StageContext) -> _Build:
    """The module printed, the target's kernels planned on it and put in, and iree-compile run with the
    target's levers (targets/levers.py)."""
    resolved = context.resolved
    text = program.module.operation.get_asm(enable_debug_info=True)
    plan = resolved.kernels.plan(program.module, text) if resolved.kernels is not None else NO_KERNELS
    reproducer = _iree_input(program, plan, context)
    text = plan.splice(text)
    levers = tuple(lever for lever in resolved.levers if lever.applies_to(text))
    levers += (plan.lever,) if plan.lever is not None else ()
    lever_input = context.dump_stem.with_name(f"{context.dump_stem.name}.iree-input.mlir") if context.dump_stem else None
    flags: list[str] = []  # of the last compile that worked: the artifact's

    def compile_one(source: str, lever_flags: tuple[str, ...]) -> bytes:
        nonlocal flags
        vmfb, flags = iree_compile_with_workarounds(
            source, list(resolved.flags_with(lever_flags)), context.dump_stem, reproducer if source is text else lever_input
        )
        return vmfb

    outcome = compile_with_levers(text, levers, compile_one)
    used = outcome.used(levers)
    kernels_used = plan.lever is None or any(lever is plan.lever for lever, _ in used)
    return _Build(outcome.vmfb, used, tuple(flags), plan, kernels_used, (*plan.notes(), *outcome.notes))


class _NoKernels:
    """The plan of a compile without kernels."""

    lever = None
    splices = False
    features = ()

    def splice(self, text: str) -> str:
        return text

    def notes(self) -> tuple[str, ...]:
        return ()

    def records(self) -> tuple[dict[str, object], ...]:
        return ()

    def write(self, stem: Path) -> None:
        pass


NO_KERNELS = _NoKernels()


def _iree_input(program: Program, plan: KernelPlan, context: StageContext) -> Path | None:
    """The kernels' side dumps, and the dump iree-compile's input can be reproduced from: the previous
    stage's, or, where the backend changed the module (kernels spliced in, a `hal.device.targets`
    attribute), `<stem>.iree-input.mlir`."""
    stem = context.dump_stem
    if stem is None:
        return context.input_dump
    plan.write(stem)
    if not plan.splices and context.resolved.device_targets is None:
        return context.input_dump
    dump = stem.with_name(f"{stem.name}.iree-input.mlir")
    dump.write_text(plan.splice(str(program)))
    return dump


def _details(resolved: ResolvedTarget, used: tuple[tuple[Lever, int], ...]) -> dict[str, str]:
    """The target's details, and the levers the artifact was compiled with."""
    return {**resolved.details, "levers": ", ".join(lever.name for lever, _ in used) or "none"}


def _source_of(context: StageContext) -> dict[str, str]:
    """What the artifact was compiled from: the model file, or the dump a compile started from."""
    spec, start = context.spec, context.options.start_from
    if start is not None:
        return {"path": str(start), "sha256": hashlib.sha256(start.read_bytes()).hexdigest()}
    if spec is not None and spec.source is not None:
        return {"path": str(spec.source), "sha256": spec.source_sha256 or ""}
    return {}


def _parameter_summary(program: Program) -> dict[str, int] | None:
    if program.parameters is not None:
        return {"count": len(program.parameters.tensors), "bytes": program.parameters.nbytes}
    count, nbytes = external_parameters(program.module)  # a compile started from a dump: read the globals
    return {"count": count, "bytes": nbytes} if count else None
