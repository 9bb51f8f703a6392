"""`kiln bench`: compile a model file, check it against eager PyTorch, then time it against eager and Inductor."""

from __future__ import annotations

import shlex
import sys
import time
from dataclasses import asdict
from pathlib import Path
from typing import TYPE_CHECKING

import click

from kiln.errors import KilnError

from .common import debug_option, progress
from .options import TimingChoice, model_options, target_options, timing_options

if TYPE_CHECKING:
    from kiln.compiler import CompileOptions, ModelSource


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

    from kiln.measure.results import Report, case_table, overhead_line
    from kiln.measure.timing import environment, use_threads
    from kiln.tune.bench import bench_model

    threads = timing.threads or torch.get_num_threads()
    use_threads(threads)  # before any artifact is loaded: IREE reads it when it creates its CPU device
    say = lambda line: click.echo(line, err=True)  # noqa: E731
    benched = bench_model(source, options, timing.settings, timing.device, progress if not quiet else (lambda line: None), say)
    case, overhead, busy = benched.case, benched.overhead, benched.others_share
    click.echo(case_table(case))
    click.echo(overhead_line(overhead))
    if busy is not None and busy > 0.1:
        click.echo(f"note: other processes used {busy:.0%} of the CPUs while this ran; CPU timings suffer from that")
    if json_path is not None:
        machine, versions = environment(benched.torch_device)
        report = Report(
            target=options.target,
            device=benched.torch_device,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            command=shlex.join(["kiln", *sys.argv[1:]]),
            machine={**machine, "others_cpu_share": busy},
            versions=versions,
            settings={**asdict(timing.settings), "threads": threads, "inductor_cache": "fresh"},
            cases=(case,),
            overhead=overhead,
        )
        json_path.parent.mkdir(parents=True, exist_ok=True)
        json_path.write_text(report.to_json())
        click.echo(f"wrote {json_path}")
    numerics = case.numerics
    if numerics is not None and not numerics.ok:
        raise KilnError(
            f"kiln's output differs from eager PyTorch's: relative L2 error {numerics.rel_l2_error:.2e} "
            f"> {numerics.tolerance:.0e}",
            stage="bench",
        )

