"""`kiln bench`: compile a model file, check it against eager PyTorch, then time it against eager and Inductor."""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kiln.errors import KilnError

from .common import debug_option, progress
from .options import TimingChoice, model_options, target_options, timing_options

if TYPE_CHECKING:
    from kiln.compiler import Compiled, CompileOptions, ModelSource


@click.command("bench")
@model_options()
@target_options
@timing_options()
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Also write the results as JSON (schema kiln-bench/1).")
@click.option("-q", "--quiet", is_flag=True, help="No compile progress.")
@debug_option
def bench_command(
    source: ModelSource,
    options: CompileOptions,
    timing: TimingChoice,
    json_path: Path | None,
    quiet: bool,
) -> None:
    """Compile MODEL_FILE, check kiln's output against eager PyTorch, then time kiln, eager and Inductor.

    All three run on the same device with the same inputs: warm-up calls, then up to --iterations
    timed calls each, every call fully synchronized; the table gives median, min and max. Columns:

    \b
      kiln       the artifact, inputs already imported on the device, results where calls
                 write them (CUDA: into tensors torch allocates)
      kiln call  `module(*tensors)` with torch tensors on the device: the checks and the
                 boundary both ways included, as users call it
      eager      eager PyTorch, model and inputs on the device
      Inductor   torch.compile, default mode (compile time: first call minus median;
                 a fresh cache folder, so a cold compile)

    Then the per-call overhead: a one-add model on a one-element tensor, compiled for the same
    target, timed as kiln call, kiln and eager. "kiln / this" is kiln's median time over the
    other's: below 1, kiln is faster. On the CPU,
    torch and IREE use the same number of threads. Exits with status 1 when the numerics check
    fails (the table is printed and the JSON written first).

    \b
    Examples:
      kiln bench examples/mlp.py
      kiln bench model.py --target cuda --json mlp-cuda.json
    """
    import torch

    from kiln.compiler import run_pipeline
    from kiln.compiler.model_file import with_weights
    from kiln.measure.bench import bench
    from kiln.measure.overhead import call_overhead
    from kiln.measure.results import CaseResult, Report, case_table, overhead_line
    from kiln.measure.timing import (
        cpu_clock,
        environment,
        fresh_inductor_cache,
        others_share,
        torch_device_for,
        use_threads,
    )
    from kiln.runtime.module import load
    from kiln.runtime.tensors import describe_inputs, short_dtype

    threads = timing.threads or torch.get_num_threads()
    use_threads(threads)  # before any artifact is loaded: IREE reads it when it creates its CPU device
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    start = time.perf_counter()
    compilation = run_pipeline(source, options, progress if not quiet else (lambda line: None), say)
    compile_s = time.perf_counter() - start
    compiled, spec = compilation.compiled, compilation.spec
    assert compiled is not None and spec is not None
    device, settings = timing.device, timing.settings
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        module = load(compiled.save(Path(folder) / "model.vmfb"), device)  # as a user would load it
        fresh_inductor_cache(str(Path(folder) / "inductor"))
        clock = cpu_clock()
        eager = with_weights(spec).module  # a model compiled from a checkpoint runs eagerly with its weights loaded
        numerics, timings, error = bench(module, eager, spec.example_inputs, settings, device, compile_s)
        overhead = call_overhead(load(_one_add(options).save(Path(folder) / "one_add.vmfb"), device), device)
        busy = others_share(clock, cpu_clock())
    floats = [x for x in spec.example_inputs if x.is_floating_point()] or list(spec.example_inputs)
    case = CaseResult(
        name=source.path.stem,
        model=source.path.stem,
        dtype=short_dtype(floats[0].dtype) if floats else "",
        batch="",
        inputs=describe_inputs(spec.example_inputs),
        timings=timings,
        numerics=numerics,
        error=error,
    )
    click.echo(case_table(case))
    click.echo(overhead_line(overhead))
    if busy is not None and busy > 0.1:
        click.echo(f"note: other processes used {busy:.0%} of the CPUs while this ran; CPU timings suffer from that")
    if json_path is not None:
        torch_device = torch_device_for(compiled.manifest.driver, device)
        machine, versions = environment(torch_device)
        report = Report(
            target=options.target,
            device=torch_device,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            command=shlex.join(["kiln", *sys.argv[1:]]),
            machine={**machine, "others_cpu_share": busy},
            versions=versions,
            settings={**asdict(settings), "threads": threads, "inductor_cache": "fresh"},
            cases=(case,),
            overhead=overhead,
        )
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(report.to_json())
        click.echo(f"wrote {json_path}")
    if not numerics.ok:
        raise KilnError(
            f"kiln's output differs from eager PyTorch's: relative L2 error {numerics.rel_l2_error:.2e} "
            f"> {numerics.tolerance:.0e}",
            stage="bench",
        )


def _one_add(options: CompileOptions) -> Compiled:
    """kiln.measure.overhead's one-add model, compiled for the same target as the model under test."""
    from kiln.compiler import CompileOptions, run_pipeline, spec_from_module
    from kiln.measure.overhead import OneAdd, example_inputs

    same_target = CompileOptions(
        target=options.target,
        cpu=options.cpu,
        gpu_arch=options.gpu_arch,
        opt_level=options.opt_level,
        extra_iree_flags=options.extra_iree_flags,
        handoff=options.handoff,
    )
    compiled = run_pipeline(spec_from_module(OneAdd(), example_inputs()), same_target).compiled
    assert compiled is not None
    return compiled
