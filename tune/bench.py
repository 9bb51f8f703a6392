"""Compile, load, bench: the one flow behind `kiln bench` and the benchmark suite (benchmarks/suite.py).

`bench_model` is `kiln bench`: the model file compiled and timed (`compile_timed`), the artifact
saved and loaded as a user loads it, checked against eager PyTorch and timed against eager and
Inductor (kiln.measure.suite.bench_case), and the per-call overhead of the one-add model compiled
for the same target (`compile_one_add`). The suite takes the same steps with a bundle folder
between them, so that its timing half can run where there is no compiler: `compile_suite` compiles
each case with `compile_timed` and the one-add model with `compile_one_add` into the bundle;
kiln.measure.suite loads them there and times them with the same `bench_case`.

Why in kiln.tune: this flow compiles, so it cannot live in kiln.measure, which runs on GPU hosts
without the compiler and may import only kiln.runtime; and a script or library should not import
the command line (kiln.cli) for its logic. kiln.tune is the package whose import rule already
allows both kiln.compiler and kiln.measure, for the same job done on tuning candidates: compile
here, check and time with kiln.measure.
"""

from __future__ import annotations

import fnmatch
import gc
import importlib.util
import runpy
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from kiln.compiler.artifact import Compiled
from kiln.compiler.model_file import ModelSource, ModelSpec, spec_from_module, with_weights
from kiln.compiler.options import CompileOptions
from kiln.compiler.pipeline import run_pipeline
from kiln.errors import KilnError
from kiln.measure.bundle import Bundle, Entry, ModelRecipe, add_artifact, rebuild
from kiln.measure.overhead import OneAdd, call_overhead, example_inputs
from kiln.measure.results import CaseResult, Timing
from kiln.measure.suite import ONE_ADD, bench_case, first_line, now
from kiln.measure.timing import (
    Settings,
    cpu_clock,
    environment,
    fresh_inductor_cache,
    others_share,
    torch_device_for,
)
from kiln.passes import pipeline_text
from kiln.runtime.module import load
from kiln.runtime.tensors import short_dtype
from kiln.targets.resolve import resolve

STAGE = "bench"
Say = Callable[[str], None]


def _silent(line: str) -> None:
    pass


# -- the steps ------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Timed:
    """An artifact, the model it was compiled from, how long that took and how much memory it took."""

    compiled: Compiled
    spec: ModelSpec
    compile_s: float  # the pipeline alone: building the model is not counted
    peak_bytes: int | None = None  # this process's peak resident memory over the stages (None: unknown)
    iree_compile_peak_bytes: int | None = None  # iree-compile's (a child process), None if unknown

    def memory_mib(self) -> dict[str, int]:
        """The peaks in MiB, as a bundle records them: {"kiln": ..., "iree_compile": ...} (those known)."""
        peaks = {"kiln": self.peak_bytes, "iree_compile": self.iree_compile_peak_bytes}
        return {name: round(value / 2**20) for name, value in peaks.items() if value}


def compile_timed(
    source: ModelSource | ModelSpec, options: CompileOptions, progress: Say = _silent, say: Say = _silent
) -> Timed:
    """Compile `source` with `options`, timed: the "kiln" compile time of `kiln bench` and the suite,
    the pipeline from torch.export to the `.vmfb`. Building the model (running its file: transformers'
    import, the weights) is not counted, as it is not in torch.compile's first call (the README's
    "Compile time"): it took 7 of BERT-base's 36 s."""
    resolve(options)  # a bad option fails before the model file is loaded (run_pipeline resolves them again)
    spec = source.load() if isinstance(source, ModelSource) else source
    start = time.perf_counter()
    compilation = run_pipeline(spec, options, progress, say)
    seconds = time.perf_counter() - start
    usages = [stage.usage for stage in compilation.stages if stage.usage is not None]
    own = [usage.peak for usage in usages if usage.peak is not None]
    child = max((usage.child_peak for usage in usages), default=0)
    return Timed(compilation.compiled, spec, seconds, max(own) if own else None, child or None)


def one_add_options(options: CompileOptions) -> CompileOptions:
    """The target of `options` and how IREE compiles for it, nothing of the model's: `kiln bench`'s
    one-add model is compiled with these."""
    return CompileOptions(
        target=options.target,
        cpu=options.cpu,
        gpu_arch=options.gpu_arch,
        opt_level=options.opt_level,
        extra_iree_flags=options.extra_iree_flags,
        handoff=options.handoff,
    )


def compile_one_add(options: CompileOptions) -> Compiled:
    """kiln.measure.overhead's one-add model compiled with `options`: its calls time the per-call overhead."""
    return run_pipeline(spec_from_module(OneAdd(), example_inputs()), options).compiled


# -- `kiln bench`: the steps in one process ---------------------------------------------------------


@dataclass(frozen=True)
class Benched:
    """`kiln bench`'s findings: the case (numerics and timings), the per-call overhead, the share of the
    CPUs other processes took meanwhile, and the torch device the contenders ran on."""

    case: CaseResult
    overhead: dict[str, Timing]
    others_share: float | None
    torch_device: str


def bench_model(
    source: ModelSource,
    options: CompileOptions,
    settings: Settings,
    device: str | None = None,
    progress: Say = _silent,
    say: Say = _silent,
) -> Benched:
    """Compile the model file, load the artifact as a user would, check it against eager PyTorch and
    time it against eager and Inductor; then the per-call overhead, the one-add model compiled for the
    same target. A CPU run's threads are the caller's to set first (kiln.measure.timing.use_threads)."""
    timed = compile_timed(source, options, progress, say)
    spec = timed.spec
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        module = load(timed.compiled.save(Path(folder) / "model.vmfb"), device)  # as a user would load it
        fresh_inductor_cache(str(Path(folder) / "inductor"))
        clock = cpu_clock()
        eager = with_weights(spec).module  # a model compiled from a checkpoint runs eagerly with its weights loaded
        floats = [x for x in spec.example_inputs if x.is_floating_point()] or list(spec.example_inputs)
        labels = CaseResult(
            name=source.path.stem,
            model=source.path.stem,
            dtype=short_dtype(floats[0].dtype) if floats else "",
            batch="",
            inputs="",
        )
        case = bench_case(labels, module, eager, spec.example_inputs, settings, device, timed.compile_s)
        one_add = compile_one_add(one_add_options(options))
        overhead = call_overhead(load(one_add.save(Path(folder) / "one_add.vmfb"), device), device)
        busy = others_share(clock, cpu_clock())
    return Benched(case, overhead, busy, torch_device_for(timed.compiled.manifest.driver, device))


# -- the suite's compiling half: its cases into a bundle ------------------------------------------


@dataclass(frozen=True)
class Case:
    """One model file of the suite at one dtype and batch size."""

    name: str  # <model>-<dtype>-<batch>
    model: str
    file: str  # the model file, relative to the repository root when inside it
    dtype: str
    batch: str

    def entry(self) -> Entry:
        """The bundle's entry for this case: how the run side rebuilds its model and inputs."""
        recipe = ModelRecipe(self.file, {"dtype": self.dtype}, {"batch": self.batch, "dtype": self.dtype})
        return Entry(self.name, model=recipe, labels={"model": self.model, "dtype": self.dtype, "batch": self.batch})


SUITE_NAMES = ("DTYPES", "BATCHES", "get_model", "get_example_inputs")  # what a suite model file defines


def find_cases(models: Path, only: tuple[str, ...], root: Path, say: Say = _silent) -> list[Case]:
    """Every (model, dtype, batch) of the model files in `models`, kept if a name matches a pattern of
    `only`; a file inside `root` (the repository) is recorded relative to it. Files named `_*.py` are
    the model files' helpers, not model files. A file whose REQUIRES (module names) are not all
    installed here is left out, and `say` is told."""
    cases = []
    for file in sorted(models.glob("*.py")):
        if file.name.startswith("_"):
            continue
        namespace = model_file_namespace(file)
        missing = [name for name in namespace.get("REQUIRES", ()) if importlib.util.find_spec(name) is None]
        if missing:
            say(f"skip {file.name}: needs {', '.join(missing)}, not installed here")
            continue
        for name in SUITE_NAMES:
            if name not in namespace:
                raise KilnError(f"{file} defines no {name}; a suite model file needs all four", stage=STAGE)
        for dtype in namespace["DTYPES"]:
            for batch in namespace["BATCHES"]:
                relative = str(file.relative_to(root)) if file.is_relative_to(root) else str(file)
                case = Case(f"{file.stem}-{dtype}-{batch}", file.stem, relative, dtype, batch)
                if not only or any(fnmatch.fnmatch(case.name, pattern) for pattern in only):
                    cases.append(case)
    return cases


def model_file_namespace(file: Path) -> dict[str, Any]:
    """What a suite model file defines (its DTYPES, BATCHES and factories), run as a script."""
    return runpy.run_path(str(file), run_name=f"kiln_bench_{file.stem}")


def compile_suite(
    cases: list[Case],
    options: CompileOptions,
    bundle: Path,
    thin_artifacts: bool,
    *,
    root: Path,
    command: str,
    kiln_source: str = "unknown",
    suite: str | None = None,
    say: Say = _silent,
) -> None:
    """Compile every case into `bundle`, with the one-add model; a case that fails to compile is
    recorded with its error, one that compiles with its compile time and peak memory. `command` and
    `kiln_source` (the compiler's commit) go in the header; `suite` names a suite other than the
    default one (benchmarks/real: "real"), which names its results file (`<suite>-<target>-<device>.json`)."""
    options = replace(options, params=thin_params(options)) if thin_artifacts else options
    resolved = resolve(options)
    bundle.mkdir(parents=True, exist_ok=True)
    machine, versions = environment("cpu")
    header = Bundle(
        target=options.target,
        driver=resolved.target.driver,
        created=now(),
        command=command,
        compiled_on=machine,
        versions=versions,
        settings={
            **resolved.details,
            "iree_flags": list(options.extra_iree_flags),
            "pipeline": pipeline_text(options.pipeline),
            "kiln_source": kiln_source,
            **({"suite": suite} if suite else {}),
            "overhead": _compile_one_add_into(options, bundle),
        },
        entries=(),
    )
    done: list[Entry] = []
    for case in cases:
        say(f"compile {case.name} ...")
        entry = case.entry()
        model, inputs = rebuild(entry, root)
        try:
            timed = compile_timed(spec_from_module(model, inputs), options, say=lambda line: say(f"  {line}"))
        except Exception as exc:  # a model kiln cannot compile is a result, not the end of the run
            done.append(replace(entry, error=f"kiln compile failed: {first_line(exc)}"))
            say(f"  {done[-1].error}")
        else:
            compiled = timed.compiled
            entry = replace(entry, compile_s=timed.compile_s, compile_memory_mib=timed.memory_mib() or None)
            entry = add_artifact(bundle, entry, compiled, model if thin_artifacts else None)
            if compiled.parameters is not None:
                entry = replace(entry, parameters=f"{case.name}.irpa")  # rebuilt from the model file there
            done.append(entry)
            size = (bundle / (entry.artifact or "")).stat().st_size / 2**20
            peaks = ", ".join(f"{name} {mib} MiB" for name, mib in (entry.compile_memory_mib or {}).items())
            say(f"  {timed.compile_s:.1f}s, {size:.1f} MiB" + (f"; peak memory: {peaks}" if peaks else ""))
        replace(header, entries=tuple(done)).write(bundle)
        del model, inputs
        gc.collect()


def _compile_one_add_into(options: CompileOptions, bundle: Path) -> dict[str, str]:
    """The one-add model compiled like the cases, into the bundle: {"artifact": ...} or {"error": ...}."""
    try:
        compiled = compile_one_add(replace(options, params="inline"))
    except Exception as exc:
        return {"error": f"kiln compile failed: {first_line(exc)}"}
    compiled.save(bundle / ONE_ADD)
    return {"artifact": ONE_ADD}


def thin_params(options: CompileOptions) -> str:
    """Where a thin bundle's weights go: nowhere, either way. Inline ones are zeroed in the artifact
    (kiln.measure.thin) and put back there; external ones are not written, and the run side makes the
    .irpa from the model file. On llvm-cpu they are external: data tiling and kiln's CPU kernels pack
    inline weights, into bytes that thinning cannot find, so the artifact would carry them. Elsewhere
    as a user's compile places them (`auto`: external above 256 MiB): inline weights cost the
    compile 5-8x their size in memory (the hand-off's text holds them), and Gemma-2B or Llama-3.2-1B
    in f32 did not compile on a 24 GB machine."""
    if options.params != "auto":
        return options.params
    return "external" if options.target == "llvm-cpu" else "auto"
