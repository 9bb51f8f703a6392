"""The library behind `kiln compile`: a model file in, a checked and saved artifact out.

Commands only parse flags and print; what a compile of a model file means (pick the model, mark
dynamic sizes, convert precision, run the stages, verify against eager PyTorch, save atomically)
lives here, once, for `kiln compile`, `kiln bench`, `kiln tune` and the benchmark suite alike.
`compile_file` makes the artifact; `run_file_until` is `--stop-after`: the stages up to one, their
dumps, and no artifact.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from kiln.errors import KilnError
from kiln.targets.resolve import resolve

from .artifact import check_output
from .model_file import ModelSource, ModelSpec
from .options import CompileOptions
from .pipeline import Compilation, StageReport, Stopped, run_pipeline, run_until
from .usage import measured
from .verify import OutputCheck, verify

Say = Callable[[str], None]


def _silent(line: str) -> None:
    pass


@dataclass(frozen=True)
class Verification:
    """`--verify`: compare the artifact with eager PyTorch on the example inputs; None tolerances: by dtype."""

    rtol: float | None = None
    atol: float | None = None


@dataclass(frozen=True)
class CompileResult:
    compilation: Compilation
    checks: tuple[OutputCheck, ...]  # empty without verification
    path: Path  # the saved .vmfb
    load: StageReport | None = None  # loading the model file (building the model), before the pipeline
    steps: tuple[StageReport, ...] = ()  # after the pipeline: "verify" (if asked) and "save" (the .irpa's writing)

    @property
    def reports(self) -> tuple[StageReport, ...]:
        """Time and peak memory of every stage and step, in order (what --timing prints)."""
        return (*([self.load] if self.load is not None else []), *self.compilation.stages, *self.steps)


@dataclass(frozen=True)
class StoppedResult:
    """`--stop-after`: the stages up to it ran and wrote their dumps; no artifact."""

    stopped: Stopped
    load: StageReport | None = None  # loading the model file (building the model), before the pipeline

    @property
    def reports(self) -> tuple[StageReport, ...]:
        """Time and peak memory of loading and of every stage run, in order (what --timing prints)."""
        return (*([self.load] if self.load is not None else []), *self.stopped.stages)


def compile_file(
    source: ModelSource | None,
    options: CompileOptions,
    output: Path,
    verification: Verification | None = None,
    progress: Say = _silent,
    say: Say = _silent,
) -> CompileResult:
    """Compile `source` (or `options.start_from`, a stage's dump) to `output` and its manifest.

    `progress` gets the stage lines; `say` the lines a user must see even when quiet: the note on the
    architecture compiled for, and each output's verification. A failed verification writes nothing.
    `options.stop_after` is `run_file_until`'s (a ValueError here).
    """
    resolved = resolve(options)  # a bad option fails before the model file is loaded
    if options.stop_after is not None:
        raise ValueError(f"compile_file makes an artifact: stop_after={options.stop_after!r} is for run_file_until")
    check_output(output)  # before minutes of compiling, not after
    spec, load = _load(source)
    compilation = run_pipeline(spec, options, progress, say, resolved)
    compiled = compilation.compiled
    checks: tuple[OutputCheck, ...] = ()
    steps: list[StageReport] = []
    if verification is not None:
        if compilation.spec is None:
            raise KilnError("--verify needs the model file, to run eager PyTorch", stage="verify")
        with _step("verify", steps):
            checks = verify(compiled, compilation.spec, verification.rtol, verification.atol)
        for check in checks:
            say(f"verify {check.name}: {check.comparison.describe()}  {'ok' if check.ok else 'MISMATCH'}")
        if not all(check.ok for check in checks):
            raise KilnError(
                "artifact does not match eager PyTorch within tolerance; artifact not written",
                stage="verify",
                hint="loosen with --rtol/--atol if the difference is expected",
            )
    with _step("save", steps):
        path = compiled.save(output)
    return CompileResult(compilation, checks, path, load, tuple(steps))


def run_file_until(
    source: ModelSource | None, options: CompileOptions, progress: Say = _silent, say: Say = _silent
) -> StoppedResult:
    """`--stop-after`: run the stages of `source` (or of `options.start_from`) up to `options.stop_after`;
    their dumps are the result, no artifact is written."""
    resolved = resolve(options)  # a bad option fails before the model file is loaded
    spec, load = _load(source)
    return StoppedResult(run_until(spec, options, progress, say, resolved), load)


def _load(source: ModelSource | None) -> tuple[ModelSpec | None, StageReport | None]:
    """The model of `source` (None for a compile from a dump), and the time and memory its loading took."""
    if source is None:
        return None, None
    loading: list[StageReport] = []
    with _step("load", loading):
        spec = source.load()
    return spec, loading[0]


@contextmanager
def _step(name: str, steps: list[StageReport]) -> Iterator[None]:
    """Time and measure a step after the pipeline, as the pipeline does its stages."""
    start = time.perf_counter()
    with measured() as usage:
        yield
    steps.append(StageReport(name, time.perf_counter() - start, None, {}, usage))
