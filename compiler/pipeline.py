"""The compiler as data: an ordered tuple of named stages, and one loop that runs them.

Each stage maps the previous stage's value to the next (ModelSpec -> Exported -> Program
-> ... -> Compiled). Stage names are the IR each one produces; the loop times every stage, writes
its dump as `<index>-<name>.<suffix>`, and stops after `--stop-after`. It never names a stage.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kiln.errors import KilnError
from kiln.passes.pass_api import PassFailure, parse_module
from kiln.targets.resolve import resolve
from kiln.targets.target import ResolvedTarget

from .artifact import Compiled
from .capture import Exported
from .dump_text import DUMP_RESOURCE_LIMIT, left_out_weights
from .iree_backend import IreeRun
from .model_file import ModelSource, ModelSpec
from .options import CompileOptions
from .stages import (
    Program,
    StageContext,
    aten,
    exported,
    pass_groups,
    shorten,
    vmfb,
)
from .usage import Usage, measured
from .weights import external_parameters


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
    iree_runs: tuple[IreeRun, ...] = ()  # each iree-compile run of the stage (vmfb: one, more where it retried)


@dataclass(frozen=True)
class Compilation:
    """What a whole pipeline run made (`run_pipeline`): the artifact, how each stage went, and the
    target as resolved."""

    compiled: Compiled
    stages: tuple[StageReport, ...]
    resolved: ResolvedTarget
    spec: ModelSpec | None  # the model compiled (None when started from a dump)


@dataclass(frozen=True)
class Stopped:
    """What a run stopped by `--stop-after` made (`run_until`): the value of the stage it stopped after
    (its dump, and those before it, written as a whole run writes them), how each stage went, and the
    target as resolved. No artifact is saved, even after the last stage."""

    stage: str  # the stage stopped after: options.stop_after
    value: Exported | Program | Compiled  # that stage's value: torch.export's graph, MLIR, or the artifact (vmfb)
    stages: tuple[StageReport, ...]
    resolved: ResolvedTarget
    spec: ModelSpec | None  # the model compiled (None when started from a dump)


def stages_for(options: CompileOptions, resolved: ResolvedTarget) -> tuple[Stage, ...]:
    return (
        Stage("exported", exported.run, ".txt"),
        Stage("aten", aten.run, ".mlir"),
        *(Stage(group.name, pass_groups.stage(group), ".mlir") for group in pass_groups.active_pipeline(options, resolved)),
        Stage("vmfb", vmfb.run, None),
    )


def stage_names(options: CompileOptions | None = None) -> tuple[str, ...]:
    """The stages a compile with `options` runs, in order: the vocabulary of --stop-after and --start-from."""
    options = options or CompileOptions()
    return tuple(stage.name for stage in stages_for(options, resolve(options)))


def run_pipeline(
    model: ModelSpec | ModelSource | None,
    options: CompileOptions,
    progress: Callable[[str], None] = lambda line: None,
    say: Callable[[str], None] = lambda line: None,
    resolved: ResolvedTarget | None = None,
) -> Compilation:
    """Run every stage for `options` on `model`, or on the dump `options.start_from` (then `model` is
    None): the artifact, or a KilnError. A run that stops early (`options.stop_after`) is `run_until`'s;
    here it is a ValueError.

    The options are resolved first, so a bad one fails before a model file is even loaded; a caller
    that loads the model itself resolves them before that and hands `resolved` in, so that the choices
    are made once. `progress` gets a line as each stage starts and ends; `say` the note on what a GPU
    artifact is built for, when that is not simply what was asked.
    """
    if options.stop_after is not None:
        raise ValueError(f"run_pipeline runs every stage: stop_after={options.stop_after!r} is for run_until")
    compiled, reports, resolved, spec = _run_stages(model, options, progress, say, resolved or resolve(options))
    return Compilation(compiled, reports, resolved, spec)


def run_until(
    model: ModelSpec | ModelSource | None,
    options: CompileOptions,
    progress: Callable[[str], None] = lambda line: None,
    say: Callable[[str], None] = lambda line: None,
    resolved: ResolvedTarget | None = None,
) -> Stopped:
    """Run the stages up to `options.stop_after` and stop there (`--stop-after`): that stage's value,
    with the dumps a whole run would have written so far. `options.stop_after` must name a stage of the
    pipeline in use (a KilnError otherwise); without one this is a ValueError: `run_pipeline` runs them all.
    `resolved`: as `run_pipeline` takes it.
    """
    if options.stop_after is None:
        raise ValueError("run_until needs options.stop_after, the stage to stop after; run_pipeline runs every stage")
    value, reports, resolved, spec = _run_stages(model, options, progress, say, resolved or resolve(options))
    return Stopped(options.stop_after, value, reports, resolved, spec)


def _run_stages(
    model: ModelSpec | ModelSource | None,
    options: CompileOptions,
    progress: Callable[[str], None],
    say: Callable[[str], None],
    resolved: ResolvedTarget,
) -> tuple[Any, tuple[StageReport, ...], ResolvedTarget, ModelSpec | None]:
    """The loop behind `run_pipeline` and `run_until`: the last stage's value (the artifact, or the
    value of `options.stop_after`'s stage), the stage reports, the resolved target and the model."""
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
        reports.append(StageReport(stage.name, seconds, dump, context.pass_times, usage, tuple(context.iree_runs)))
        progress(f"[{index + 1}/{len(stages)}] {stage.name} done in {seconds:.2f}s")
        if stage.name == options.stop_after:
            break
    return value, tuple(reports), resolved, spec


def _internal_error(error: Exception, stage: str, input_dump: Path | None) -> KilnError:
    text = str(error).strip()
    first = text.splitlines()[0] if text else "(no message)"
    return KilnError(
        f"internal error: {type(error).__name__}: {shorten(first)}",
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


_RECOMPILE = "compile the model file again; `--stop-after STAGE` and `--print-after PASS` show any stage"


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
    if left_out := left_out_weights(text):
        raise KilnError(
            f"--start-from {path}: this dump leaves out weights (a dump holds none once one is over "
            f"{DUMP_RESOURCE_LIMIT // 2 >> 10} KiB), so it cannot be compiled: {shorten(', '.join(left_out), 160)}",
            stage="options",
            hint=_RECOMPILE,
        )
    try:
        module = parse_module(text)
    except PassFailure as failure:
        detail = failure.diagnostics[0].message if failure.diagnostics else "unreadable"
        raise KilnError(f"--start-from {path}: not valid MLIR: {detail}", stage="options") from failure
    if external := external_parameters(module):
        raise KilnError(
            f"--start-from {path}: its {external} weights are in the first compile's .irpa (--params external), "
            "which a new artifact cannot take over",
            stage="options",
            hint=_RECOMPILE,
        )
    return names.index(match.group(1)) + 1, aten.program_from_dump(module, path)


