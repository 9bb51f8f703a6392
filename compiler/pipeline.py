"""The compiler as data: an ordered tuple of named stages, and one loop that runs them.

Each stage maps the previous stage's value to the next (ModelSpec -> Exported -> Program
-> ... -> Compiled). Stage names are the IR each one produces; the loop times every stage, writes
its dump as `<index>-<name>.<suffix>`, and stops after `--stop-after`. It never names a stage.
"""

from __future__ import annotations

import hashlib
import json
import re
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from torch_mlir import ir

from kiln.errors import KilnError
from kiln.passes import PASSES, PassGroup, check_pipeline, with_strict_primitives, without_passes
from kiln.passes.pass_api import PassFailure, parse_module, run_pass
from kiln.runtime.manifest import FunctionSpec, Manifest, TensorSpec, function_spec

from .artifact import Compiled, versions
from .boundary import apply_plan
from .capture import Exported, capture
from .cpu_kernels.plan import Plan as CpuKernelPlan
from .cpu_kernels.plan import plan as plan_cpu_kernels
from .importer import import_program
from .iree_backend import iree_compile_with_workarounds
from .kernels.substitute import Substitution
from .kernels.substitute import plan as plan_kernels
from .levers import Lever, compile_with_levers
from .model_file import ModelSource, ModelSpec
from .options import CompileOptions
from .out_variants import add_out_variants
from .signature import Plan, Signature, plan_convention, shared_state
from .targets import ResolvedTarget, resolve
from .transients import add_transient_variants, remove_transient_variants
from .usage import Usage, measured
from .weights import Parameters, external_parameters
from .written_inputs import overwritten_inputs


@dataclass
class Program:
    """MLIR on its way down, with the calling convention read off at import.

    Pass stages rewrite `module` in place: each stage's dump is the record of what it produced. The
    calling convention also rides in the module itself (CALLING_CONVENTION), so that a compile can
    start again from any stage's dump (`--start-from`).
    """

    module: ir.Module
    functions: tuple[FunctionSpec, ...]  # one per entry point, in order
    precision: str | None  # "bf16"/"f16" when kiln converted an f32 model
    parameters: Parameters | None  # weights lifted out of the IR, when externalized

    def __str__(self) -> str:
        """The dump text. Weights over DUMP_RESOURCE_LIMIT are elided: a dump stays readable and small
        (GPT-2's would be 1 GB a stage), and a small model's dump still reproduces the stage in full."""
        return self.module.operation.get_asm(large_resource_limit=DUMP_RESOURCE_LIMIT)


DUMP_RESOURCE_LIMIT = 1 << 20  # characters of hex: weights of about 512 KiB and more are elided in dumps
CALLING_CONVENTION = "kiln.calling_convention"  # module attribute: the functions and precision, as JSON


@dataclass
class StageContext:
    """What every stage may read: the model, the options as given and as resolved, and where its dump goes."""

    spec: ModelSpec | None  # None when the compile starts from a dump
    options: CompileOptions
    resolved: ResolvedTarget
    dump_stem: Path | None  # <dump_dir>/<index>-<name>, or None when not dumping
    input_dump: Path | None  # the previous stage's dump: the reproducer if this stage fails
    pass_times: dict[str, float] = field(default_factory=dict)
    say: Callable[[str], None] = lambda line: None  # a line the user sees even when quiet (notes)


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
    usage: Usage | None = None  # CPU time, and peak memory of kiln and of iree-compile, during the stage


@dataclass(frozen=True)
class Compilation:
    """What a pipeline run made: the artifact (None after --stop-after), how each stage went, and the
    target as resolved."""

    compiled: Compiled | None
    stages: tuple[StageReport, ...]
    resolved: ResolvedTarget
    spec: ModelSpec | None  # the model compiled (None when started from a dump)


def stages_for(options: CompileOptions, resolved: ResolvedTarget) -> tuple[Stage, ...]:
    return (
        Stage("exported", _capture, ".txt"),
        Stage("aten", _import, ".mlir"),
        *(Stage(group.name, _pass_group(group), ".mlir") for group in _active_pipeline(options, resolved)),
        Stage("vmfb", _backend, None),
    )


def stage_names(options: CompileOptions | None = None) -> tuple[str, ...]:
    """The stages a compile with `options` runs, in order: the vocabulary of --stop-after and --start-from."""
    options = options or CompileOptions()
    return tuple(stage.name for stage in stages_for(options, resolve(options)))


def _active_pipeline(options: CompileOptions, resolved: ResolvedTarget) -> tuple[PassGroup, ...]:
    check_pipeline(options.pipeline)
    pipeline = with_strict_primitives(options.pipeline) if options.strict_primitives else options.pipeline
    pipeline = without_passes(_up_to_handoff(pipeline, resolved.handoff), options.disable_passes)
    listed = {name for group in pipeline for name in group.passes}
    pipeline = without_passes(pipeline, tuple(name for name in resolved.target.passes_off if name in listed))
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


def run_pipeline(
    model: ModelSpec | ModelSource | None,
    options: CompileOptions,
    progress: Callable[[str], None] = lambda line: None,
    say: Callable[[str], None] = lambda line: None,
) -> Compilation:
    """Run the stages for `options` on `model`, or on the dump `options.start_from` (then `model` is None).

    The options are resolved first, so a bad one fails before a model file is even loaded.
    `progress` gets a line as each stage starts and ends; `say` the note on what a GPU artifact is
    built for, when that is not simply what was asked.
    """
    resolved = resolve(options)
    if resolved.note is not None:
        say(f"note: {resolved.note}")
    spec = model.load() if isinstance(model, ModelSource) else model
    stages = stages_for(options, resolved)
    names = [stage.name for stage in stages]
    if options.stop_after is not None and options.stop_after not in names:
        raise _unknown_stage("--stop-after", options.stop_after, names, options, resolved)
    first, value = _starting_point(spec, options, stages, resolved)
    if options.stop_after is not None and names.index(options.stop_after) < first:
        raise KilnError(f"--stop-after {options.stop_after} comes before --start-from's stage", stage="options")
    if options.dump_dir is not None:
        options.dump_dir.mkdir(parents=True, exist_ok=True)
    reports: list[StageReport] = []
    input_dump: Path | None = options.start_from
    for index, stage in enumerate(stages[first:], start=first):
        stem = options.dump_dir / f"{index:02d}-{stage.name}" if options.dump_dir is not None else None
        context = StageContext(spec, options, resolved, stem, input_dump, say=say)
        progress(f"[{index + 1}/{len(stages)}] {stage.name} ...")
        start = time.perf_counter()
        try:
            with measured() as usage:
                value = stage.run(value, context)
        except KilnError as error:
            error.stage = error.stage or stage.name
            raise
        except Exception as error:  # a kiln bug or a library's: still one KilnError, with the stage
            raise _internal_error(error, stage.name, input_dump) from error
        seconds = time.perf_counter() - start
        dump = stem.with_name(stem.name + stage.suffix) if stem is not None and stage.suffix else None
        if dump is not None:
            dump.write_text(str(value))
        input_dump = dump
        reports.append(StageReport(stage.name, seconds, dump, context.pass_times, usage))
        progress(f"[{index + 1}/{len(stages)}] {stage.name} done in {seconds:.2f}s")
        if stage.name == options.stop_after:
            return Compilation(None, tuple(reports), resolved, spec)
    return Compilation(value, tuple(reports), resolved, spec)


def _internal_error(error: Exception, stage: str, input_dump: Path | None) -> KilnError:
    text = str(error).strip()
    first = text.splitlines()[0] if text else "(no message)"
    return KilnError(
        f"internal error: {type(error).__name__}: {_shorten(first)}",
        stage=stage,
        file=input_dump,
        hint="a kiln bug, not the model's: --debug shows the traceback; the file above is the stage's input",
    )


def _unknown_stage(
    flag: str, name: str, names: list[str], options: CompileOptions, resolved: ResolvedTarget
) -> KilnError:
    handed_off = resolved.handoff == "torch" and name in stage_names(replace(options, handoff="linalg"))
    return KilnError(
        f"{flag}: unknown stage '{name}'; stages: {', '.join(names)}",
        stage="options",
        hint="with --handoff torch, IREE lowers to linalg itself: its phases are in the vmfb stage's dumps"
        if handed_off
        else None,
    )


# A stage's dump: <index>-<stage>.mlir, as the loop above names them.
_DUMP_NAME = re.compile(r"^\d+-([\w-]+)\.mlir$")


def _starting_point(
    spec: ModelSpec | None, options: CompileOptions, stages: tuple[Stage, ...], resolved: ResolvedTarget
) -> tuple[int, Any]:
    """The index of the first stage to run, and the value it starts from."""
    if options.start_from is None:
        if spec is None:
            raise ValueError("run_pipeline needs a model spec, or options.start_from")
        return 0, spec
    path = options.start_from
    names = [stage.name for stage in stages]
    match = _DUMP_NAME.match(path.name)
    resumable = names[1:-1]  # the stages whose dump is MLIR the next stage takes
    if match is None or match.group(1) not in resumable:
        raise KilnError(
            f"--start-from {path}: not a stage dump; expected <NN>-<stage>.mlir with a stage of {', '.join(resumable)}",
            stage="options",
            hint="the pipeline in use decides the stages: give the same --pipeline/--handoff as the compile that wrote it",
        )
    if not path.is_file():
        raise KilnError(f"--start-from {path}: no such file", stage="options")
    text = path.read_text()
    if "__elided__" in text:
        raise KilnError(
            f"--start-from {path}: this dump leaves out large weights (over {DUMP_RESOURCE_LIMIT // 2 >> 10} KiB), "
            "so it cannot be compiled",
            stage="options",
            hint="compile with --params external: weights then stay out of the IR, in the .irpa",
        )
    try:
        module = parse_module(text)
    except PassFailure as failure:
        detail = failure.diagnostics[0].message if failure.diagnostics else "unreadable"
        raise KilnError(f"--start-from {path}: not valid MLIR: {detail}", stage="options") from failure
    return names.index(match.group(1)) + 1, _program_from_dump(module, path)


def _program_from_dump(module: ir.Module, path: Path) -> Program:
    attribute = module.operation.attributes[CALLING_CONVENTION] if CALLING_CONVENTION in module.operation.attributes else None
    if attribute is None:
        raise KilnError(
            f"--start-from {path}: the module has no {CALLING_CONVENTION} attribute; only kiln's own stage dumps "
            "say how the artifact is called",
            stage="options",
        )
    convention = json.loads(ir.StringAttr(attribute).value)
    functions = tuple(function_spec(function) for function in convention["functions"])
    return Program(module, functions, convention.get("precision"), None)


def _capture(spec: ModelSpec, context: StageContext) -> Exported:
    return capture(spec)


def _import(exported: Exported, context: StageContext) -> Program:
    assert context.spec is not None
    plans: dict[str, Plan] = {}
    programs = exported.programs
    state = shared_state(programs)  # state one function mutates is read by every function from the artifact
    checkpoint = context.spec.weights  # weights kept in a checkpoint are external unless --params inline
    resolved = context.resolved
    module, parameters = import_program(
        programs,
        resolved.external_weights(context.spec.weight_bytes) or (checkpoint is not None and resolved.params != "inline"),
        keep_fused=resolved.handoff == "torch",
        fused_dtypes=resolved.target.fused_attention_dtypes,
        kernels=resolved.kernels,
        prepare=lambda name, program: plans.setdefault(name, plan_convention(program, state, programs[name])),
    )
    if parameters is not None and checkpoint is not None:
        parameters = replace(parameters, source=checkpoint)
    for name, plan in plans.items():
        apply_plan(module, name, plan)
    carried = resolved.target.carried_dtypes
    functions = tuple(_function_spec(name, plan.signature, carried) for name, plan in plans.items())
    convention = {"functions": [asdict(function) for function in functions], "precision": context.spec.precision}
    with module.context:
        module.operation.attributes[CALLING_CONVENTION] = ir.StringAttr.get(json.dumps(convention))
    return Program(module, functions, context.spec.precision, parameters)


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


def _pass_group(group: PassGroup) -> Callable[[Program, StageContext], Program]:
    def run_group(program: Program, context: StageContext) -> Program:
        _mark_target(program.module, context.resolved)
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


def _mark_target(module: ir.Module, resolved: ResolvedTarget) -> None:
    """Say on the module what the passes may ask about the target (ResolvedTarget.module_attributes)."""
    with module.context:
        for name, value in resolved.module_attributes.items():
            module.operation.attributes[name] = ir.StringAttr.get(value)


def _backend(program: Program, context: StageContext) -> Compiled:
    """iree-compile the hand-off: kiln's GPU kernels spliced in where the target has them (cuda on
    Hopper), the target's levers (levers.py) where the module has ops for them, kiln's CPU kernel
    among them, and on the CPU the transient variants (compiler/transients.py), which like a lever
    are left out should iree-compile fail with them; the manifest records what the artifact was
    compiled with."""
    resolved = context.resolved
    names = tuple(function.name for function in program.functions)
    overwritten = overwritten_inputs(program.module, names)
    variants = add_out_variants(program.module, names)
    _mark_target(program.module, resolved)
    if resolved.device_targets is not None:
        with program.module.context:  # IREE's attribute, opaque here: the context allows unregistered dialects
            program.module.operation.attributes["hal.device.targets"] = ir.Attribute.parse(resolved.device_targets)
    gpu_kernels = plan_kernels(program.module) if resolved.kernels else Substitution(())
    for note in gpu_kernels.notes():
        context.say(note)
    iree_input = _iree_input(program, gpu_kernels, context)
    transients = add_transient_variants(program.module, names) if resolved.target.name == "llvm-cpu" else {}

    def handoff() -> str:  # printed once; again only where the variants must go
        return gpu_kernels.splice(program.module.operation.get_asm(enable_debug_info=True))

    try:
        build = _compile_handoff(handoff(), iree_input, context)
    except KilnError as failure:
        if not transients:
            raise
        remove_transient_variants(program.module, transients)
        transients = {}
        build = _compile_handoff(handoff(), iree_input, context)  # IREE's own failure, if any, is the user's error
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
    kernels = build.kernels
    manifest = Manifest(
        functions=functions,
        target=resolved.target.name,
        driver=_driver(resolved),
        target_details=_details(resolved, build.used),
        iree_flags=build.flags,
        versions=versions(),
        source=_source_of(context),
        precision=program.precision,
        parameters=_parameter_summary(program),
        kernels=gpu_kernels.records()
        or (kernels.substitution.records() if build.kernels_used and kernels.substitution is not None else ()),
        cpu_features=kernels.features if build.kernels_used else (),
    )
    return Compiled(build.vmfb, manifest, program.parameters)


@dataclass(frozen=True)
class _Build:
    """One hand-off text compiled: the artifact, the levers it used, its flags, kiln's CPU kernel plan,
    and the notes for the user (said once the build is the one kept)."""

    vmfb: bytes
    used: tuple[tuple[Lever, int], ...]
    flags: tuple[str, ...]
    kernels: CpuKernelPlan
    kernels_used: bool
    notes: tuple[str, ...]


def _compile_handoff(text: str, iree_input: Path | None, context: StageContext) -> _Build:
    """`text` through kiln's CPU kernel rewrite and iree-compile, with the target's levers (levers.py)."""
    resolved = context.resolved
    kernels = plan_cpu_kernels(text, resolved.cpu_kernels, resolved.cpu_attention == "bf16")
    if context.dump_stem is not None:
        kernels.write(context.dump_stem)
    levers = tuple(lever for lever in resolved.levers if lever.applies_to(text))
    levers += (kernels.lever,) if kernels.lever is not None else ()
    kernels_input = context.dump_stem.with_name(f"{context.dump_stem.name}.iree-input.mlir") if context.dump_stem else None
    flags: list[str] = []  # of the last compile that worked: the artifact's

    def compile_one(source: str, lever_flags: tuple[str, ...]) -> bytes:
        nonlocal flags
        reproducer = iree_input if source is text else kernels_input
        vmfb, flags = iree_compile_with_workarounds(
            source, list(resolved.flags_with(lever_flags)), context.dump_stem, reproducer
        )
        return vmfb

    outcome = compile_with_levers(text, levers, compile_one)
    used = outcome.used(levers)
    kernels_used = kernels.lever is not None and any(lever is kernels.lever for lever, _ in used)
    notes = (kernels.note,) if kernels.note is not None else ()
    return _Build(outcome.vmfb, used, tuple(flags), kernels, kernels_used, (*notes, *outcome.notes))


def _details(resolved: ResolvedTarget, used: tuple[tuple[Lever, int], ...]) -> dict[str, str]:
    """The target's details, and the levers the artifact was compiled with."""
    return {**resolved.details, "levers": ", ".join(lever.name for lever, _ in used) or "none"}


def _driver(resolved: ResolvedTarget) -> str:
    """The runtime driver the manifest names: the target's, or on the CPU the one asked for (--cpu-driver)."""
    choice = resolved.details.get("cpu_driver", "auto")
    return resolved.target.driver if choice == "auto" else choice


def _iree_input(program: Program, kernels: Substitution, context: StageContext) -> Path | None:
    """The dump iree-compile's input can be reproduced from: the previous stage's, or, where the backend
    changed the module (kiln's kernels, a `hal.device.targets` attribute), `<stem>.iree-input.mlir`."""
    stem = context.dump_stem
    if stem is None or (not kernels.decisions and context.resolved.device_targets is None):
        return context.input_dump
    kernels.write(stem)
    dump = stem.with_name(f"{stem.name}.iree-input.mlir")
    dump.write_text(kernels.splice(str(program)))
    return dump


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
