"""The compiler as data: an ordered tuple of named stages, and one loop that runs them.

Each stage maps the previous stage's value to the next (ModelSpec -> Exported -> Program
-> ... -> Compiled). Stage names are the IR each one produces; the loop times every stage, writes
its dump as `<index>-<name>.<suffix>`, and stops after `--stop-after`. It never names a stage.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.passes import PASSES, PassGroup, check_pipeline, without_passes
from kiln.passes.pass_api import PassFailure, run_pass
from kiln.runtime.manifest import FunctionSpec, Manifest

from .artifact import Compiled, versions
from .capture import Exported, capture
from .importer import import_program
from .iree_backend import iree_compile
from .model_file import ModelSpec
from .options import CompileOptions
from .signature import Signature, signature_of
from .targets import get_target, handoff_of
from .weights import Parameters, externalize


@dataclass
class Program:
    """MLIR on its way down, with the calling convention read off at import.

    Pass stages rewrite `module` in place: each stage's dump is the record of what it produced.
    """

    module: ir.Module
    signatures: dict[str, Signature]  # one function per entry point, in order
    parameters: Parameters | None  # weights lifted out of the IR, when externalized

    def __str__(self) -> str:
        """The dump text. Weights over DUMP_RESOURCE_LIMIT are elided: a dump stays readable and small
        (GPT-2's would be 1 GB a stage), and a small model's dump still reproduces the stage in full."""
        return self.module.operation.get_asm(large_resource_limit=DUMP_RESOURCE_LIMIT)


DUMP_RESOURCE_LIMIT = 1 << 20  # characters of hex: weights of about 512 KiB and more are elided in dumps


@dataclass
class StageContext:
    """What every stage may read: the model, the options, and where its dump goes."""

    spec: ModelSpec
    options: CompileOptions
    dump_stem: Path | None  # <dump_dir>/<index>-<name>, or None when not dumping
    input_dump: Path | None  # the previous stage's dump: the reproducer if this stage fails
    pass_times: dict[str, float] = field(default_factory=dict)


@dataclass(frozen=True)
class Stage:
    name: str
    run: Callable[[Any, StageContext], Any]
    suffix: str | None  # dump file suffix; None for a stage that writes its own dumps


@dataclass(frozen=True)
class StageReport:
    name: str
    seconds: float
    dump: Path | None
    pass_times: dict[str, float]


@dataclass(frozen=True)
class Compilation:
    """What a pipeline run made: the artifact (None after --stop-after) and how long each stage took."""

    compiled: Compiled | None
    stages: tuple[StageReport, ...]


def stages_for(options: CompileOptions) -> tuple[Stage, ...]:
    return (
        Stage("exported", _capture, ".txt"),
        Stage("aten", _import, ".mlir"),
        *(Stage(group.name, _pass_group(group), ".mlir") for group in _active_pipeline(options)),
        Stage("vmfb", _backend, None),
    )


def stage_names(options: CompileOptions | None = None) -> tuple[str, ...]:
    return tuple(stage.name for stage in stages_for(options or CompileOptions()))


def _active_pipeline(options: CompileOptions) -> tuple[PassGroup, ...]:
    check_pipeline(options.pipeline)
    pipeline = without_passes(_up_to_handoff(options), options.disable_passes)
    listed = {name for group in pipeline for name in group.passes}
    for name in options.print_after:
        if name not in listed:
            raise KilnError(f"--print-after {name}: no such pass in the pipeline", stage="options")
    return pipeline


def _up_to_handoff(options: CompileOptions) -> tuple[PassGroup, ...]:
    """The pipeline's groups that work above the hand-off: at "torch", those before the lowering to linalg."""
    if handoff_of(options) == "linalg":
        return options.pipeline
    groups: list[PassGroup] = []
    for group in options.pipeline:
        if any(PASSES[name].lowers_to == "linalg" for name in group.passes):
            break
        groups.append(group)
    return tuple(groups)


def run_pipeline(
    spec: ModelSpec, options: CompileOptions, progress: Callable[[str], None] = lambda line: None
) -> Compilation:
    get_target(options.target).flags(options)  # an unknown target or --gpu-arch fails before any work is done
    stages = stages_for(options)
    if options.stop_after is not None and options.stop_after not in stage_names(options):
        handed_off = handoff_of(options) == "torch" and options.stop_after in stage_names(replace(options, handoff="linalg"))
        raise KilnError(
            f"unknown stage '{options.stop_after}'; stages: {', '.join(stage_names(options))}",
            stage="options",
            hint="with --handoff torch, IREE lowers to linalg itself: its phases are in the vmfb stage's dumps"
            if handed_off
            else None,
        )
    if options.dump_dir is not None:
        options.dump_dir.mkdir(parents=True, exist_ok=True)
    value: Any = spec
    reports: list[StageReport] = []
    input_dump: Path | None = None
    for index, stage in enumerate(stages):
        stem = options.dump_dir / f"{index:02d}-{stage.name}" if options.dump_dir is not None else None
        context = StageContext(spec, options, stem, input_dump)
        progress(f"[{index + 1}/{len(stages)}] {stage.name} ...")
        start = time.perf_counter()
        try:
            value = stage.run(value, context)
        except KilnError as error:
            error.stage = error.stage or stage.name
            raise
        seconds = time.perf_counter() - start
        dump = stem.with_name(stem.name + stage.suffix) if stem is not None and stage.suffix else None
        if dump is not None:
            dump.write_text(str(value))
        input_dump = dump
        reports.append(StageReport(stage.name, seconds, dump, context.pass_times))
        progress(f"[{index + 1}/{len(stages)}] {stage.name} done in {seconds:.2f}s")
        if stage.name == options.stop_after:
            return Compilation(None, tuple(reports))
    return Compilation(value, tuple(reports))


def _capture(spec: ModelSpec, context: StageContext) -> Exported:
    return capture(spec)


def _import(exported: Exported, context: StageContext) -> Program:
    programs = exported.programs
    options = context.options
    module, parameters = import_program(
        programs, externalize(list(programs.values()), options.params), keep_fused=handoff_of(options) == "torch"
    )
    return Program(module, {name: signature_of(p) for name, p in programs.items()}, parameters)


def _pass_group(group: PassGroup) -> Callable[[Program, StageContext], Program]:
    def run_group(program: Program, context: StageContext) -> Program:
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
    detail = _shorten(first.message.splitlines()[0]) if first else "no diagnostic"
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


def _shorten(text: str, limit: int = 240) -> str:
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _backend(program: Program, context: StageContext) -> Compiled:
    options = context.options
    target = get_target(options.target)
    handoff = handoff_of(options)
    input_type = ["--iree-input-type=torch"] if handoff == "torch" else []
    flags = [*target.flags(options), *input_type, f"--iree-opt-level={options.opt_level}", *options.extra_iree_flags]
    text = program.module.operation.get_asm(enable_debug_info=True)
    vmfb = iree_compile(text, flags, context.dump_stem, context.input_dump)
    spec = context.spec
    functions = tuple(
        FunctionSpec(
            name=name,
            inputs=signature.inputs,
            outputs=signature.outputs,
            symbols={symbol: list(bounds) for symbol, bounds in signature.symbols.items()},
        )
        for name, signature in program.signatures.items()
    )
    manifest = Manifest(
        functions=functions,
        target=target.name,
        driver=target.driver,
        target_details={**target.details(options), "handoff": handoff},
        iree_flags=tuple(flags),
        versions=versions(),
        source={"path": str(spec.source), "sha256": spec.source_sha256 or ""} if spec.source else {},
        precision=spec.precision,
        parameters=_parameter_summary(program.parameters),
    )
    return Compiled(vmfb, manifest, program.parameters)


def _parameter_summary(parameters: Parameters | None) -> dict[str, int] | None:
    return None if parameters is None else {"count": len(parameters.tensors), "bytes": parameters.nbytes}
