"""The `vmfb` stage (`NN-vmfb.*`): iree-compile the hand-off into the artifact and its manifest.

The target's kernels (its KernelProvider, where they apply) are planned on the hand-off and put in,
spliced or as a lever; the target's levers (targets/levers.py) apply where the module has ops for
them; and where the target has them, the transient variants (compiler/transients.py), which like a
lever are left out should iree-compile fail with them. The manifest records what the artifact was
compiled with.
"""

from __future__ import annotations

import glob
import hashlib
import os
import re
import shutil
import time
from collections.abc import Iterator
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, replace
from pathlib import Path

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.runtime.manifest import Manifest
from kiln.targets.levers import Lever, compile_with_levers
from kiln.targets.target import KernelPlan, ResolvedTarget

from ..artifact import Compiled, versions
from ..iree_backend import iree_compile_with_workarounds, recorded_runs
from ..out_variants import add_out_variants
from ..transients import TRANSIENTS_SUFFIX, add_transient_variants, remove_transient_variants
from ..written_inputs import overwritten_inputs
from . import Program, StageContext
from .pass_groups import mark_target


def run(program: Program, context: StageContext) -> Compiled:
    resolved = context.resolved
    names = tuple(function.name for function in program.functions)
    overwritten = overwritten_inputs(program.module, names)
    variants = add_out_variants(program.module, names) if resolved.target.out_variants else {}
    mark_target(program.module, resolved)
    if resolved.device_targets is not None:
        with program.module.context:  # IREE's attribute, opaque here: the context allows unregistered dialects
            program.module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(resolved.device_targets)
    smallest = resolved.target.transient_variants
    transients = add_transient_variants(program.module, names, smallest) if smallest is not None else {}
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
        quantized=program.quantized,
        parameters=_parameter_summary(program),
        kernels=build.kernels.records() if build.kernels_used else (),
        cpu_features=build.kernels.features if build.kernels_used else (),
        generation=program.generation,
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
    with _timed(context, "print the hand-off"):
        text = program.module.operation.get_asm(enable_debug_info=True)
    plan: KernelPlan = NO_KERNELS
    if resolved.kernels is not None:
        with _timed(context, "kernels: plan and rewrite"):
            plan = resolved.kernels.plan(program.module, text)
    with _timed(context, "side dumps") if context.dump_stem is not None else nullcontext():
        reproducer = _iree_input(program, plan, context)
    text = plan.splice(text)
    levers = tuple(lever for lever in resolved.levers if lever.applies_to(text))
    levers += (plan.lever,) if plan.lever is not None else ()
    lever_input = context.dump_stem.with_name(f"{context.dump_stem.name}.iree-input.mlir") if context.dump_stem else None
    flags: list[str] = []  # of the last compile that worked: the artifact's
    kept = _KeptCompiles(context.dump_stem)

    def compile_one(source: str, lever_flags: tuple[str, ...]) -> bytes:
        nonlocal flags
        again = kept.get(source, lever_flags)
        if again is not None:  # asked again (compile_with_levers wants its dumps back): no second run
            vmfb, flags = again
            return vmfb
        label = _run_label(levers, lever_flags, source)
        with recorded_runs() as runs:
            try:
                vmfb, flags = iree_compile_with_workarounds(
                    source, list(resolved.flags_with(lever_flags)), context.dump_stem, reproducer if source is text else lever_input
                )
            finally:
                context.iree_runs.extend(replace(run, label=label) for run in runs)
        kept.add(source, lever_flags, vmfb, flags)
        return vmfb

    with kept:
        outcome = compile_with_levers(text, levers, compile_one)
    used = outcome.used(levers)
    kernels_used = plan.lever is None or any(lever is plan.lever for lever, _ in used)
    return _Build(outcome.vmfb, used, tuple(flags), plan, kernels_used, (*plan.notes(), *outcome.notes))


def _run_label(levers: tuple[Lever, ...], lever_flags: tuple[str, ...], source: str) -> str:
    """What one iree-compile run has on, for --timing: the levers (a fallback choice named by its
    flags) and whether the transient variants are in the text."""
    on = []
    for lever in levers:
        for index, choice in enumerate(lever.choices):
            flags_on = all(flag in lever_flags for flag in choice)
            if (lever.text is None or source is lever.text) and (choice or lever.text is not None) and flags_on:
                on.append(lever.name if index == 0 else f"{lever.name} ({lever.describe(index)})")
                break
    variants = " + transient variants" if TRANSIENTS_SUFFIX in source else ""
    return f"levers: {', '.join(on) or 'none'}{variants}"


class _KeptCompiles:
    """The compiles that worked, by input text and lever flags, so that one asked for again (where every
    lever's fallback failed, compile_with_levers takes the compile without levers, which it ran first)
    is not run twice: its artifact and flags are kept, and its phase dumps (IREE's `<stem>-NN-<phase>.mlir`,
    which later runs overwrote) as hard links in a folder beside them, put back when it is asked for and
    removed when the stage is done. iree-compile is deterministic: the artifact is the one a second run makes."""

    def __init__(self, stem: Path | None) -> None:
        self.stem = stem
        self.compiles: list[tuple[str, tuple[str, ...], bytes, list[str], Path | None]] = []

    def add(self, source: str, lever_flags: tuple[str, ...], vmfb: bytes, flags: list[str]) -> None:
        folder = None
        if self.stem is not None:
            folder = self.stem.with_name(f".{self.stem.name}.kept-{len(self.compiles)}")
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir()
            for file in self._phase_files():
                _link_or_copy(file, folder / file.name)
        self.compiles.append((source, lever_flags, vmfb, flags, folder))

    def get(self, source: str, lever_flags: tuple[str, ...]) -> tuple[bytes, list[str]] | None:
        for kept_source, kept_flags, vmfb, flags, folder in self.compiles:
            if kept_source is source and kept_flags == lever_flags:
                if folder is not None and self.stem is not None:
                    for file in self._phase_files():
                        file.unlink()
                    for file in folder.iterdir():
                        _link_or_copy(file, self.stem.with_name(file.name))
                return vmfb, flags
        return None

    def _phase_files(self) -> list[Path]:
        assert self.stem is not None
        return [file for file in self.stem.parent.glob(f"{glob.escape(self.stem.name)}-*.mlir") if _PHASE_DUMP.match(file.name)]

    def __enter__(self) -> _KeptCompiles:
        return self

    def __exit__(self, *exc: object) -> None:
        for *_, folder in self.compiles:
            if folder is not None:
                shutil.rmtree(folder, ignore_errors=True)


_PHASE_DUMP = re.compile(r"^.+-\d\d-[\w-]+\.mlir$")


def _link_or_copy(source: Path, target: Path) -> None:
    target.unlink(missing_ok=True)
    try:
        os.link(source, target)
    except OSError:  # a file system without hard links
        shutil.copy2(source, target)


@contextmanager
def _timed(context: StageContext, step: str) -> Iterator[None]:
    """Adds the block's seconds to the stage's step times (--timing lists them under the stage)."""
    start = time.perf_counter()
    try:
        yield
    finally:
        context.pass_times[step] = context.pass_times.get(step, 0.0) + time.perf_counter() - start


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
    if program.parameters is None:  # inline weights (a dump with external ones is refused by --start-from)
        return None
    return {"count": len(program.parameters.tensors), "bytes": program.parameters.nbytes}
