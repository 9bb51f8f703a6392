"""`kiln bench`: compile a model file, check it against eager PyTorch, then time it against eager and Inductor."""

from __future__ import annotations

import shlex
import sys
import tempfile
import time
from dataclasses import asdict
from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option, progress
from .compile_command import TARGETS


@click.command("bench")
@click.argument("model_file", type=click.Path(path_type=Path))
@click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True, help="Where the artifact runs.")
@click.option("--gpu-arch", help="GPU targets: the architecture to compile for, e.g. sm_80 [default: the local GPU's].")
@click.option("--cpu", default="host", show_default=True, help="llvm-cpu: LLVM CPU name to compile for.")
@click.option("--device", help="cpu, cuda, cuda:1 [default: the artifact's own]; torch runs on the matching device.")
@click.option("--model", "model_name", metavar="NAME", help="Module (or factory) to compile [default: model / get_model].")
@click.option("--inputs", "inputs_name", metavar="NAME", help="Example inputs [default: example_inputs / get_example_inputs].")
@click.option("--opt-level", type=click.Choice(("O0", "O1", "O2", "O3")), default="O3", show_default=True, help="IREE optimization level.")
@click.option("--iree-flag", "iree_flags", multiple=True, metavar="FLAG", help="Extra iree-compile flag (repeatable).")
@click.option("--warmup", type=int, default=5, show_default=True, help="Untimed calls before timing.")
@click.option("--iterations", type=int, default=50, show_default=True, help="Timed calls (at most; see --budget-s).")
@click.option("--budget-s", type=float, default=10.0, show_default=True, help="Per contender: stop timing after this long (3 calls at least).")
@click.option("--threads", type=int, help="CPU threads for torch and for IREE alike [default: torch's default].")
@click.option("--no-inductor", is_flag=True, help="Do not time torch.compile.")
@click.option("--json", "json_path", type=click.Path(path_type=Path), help="Also write the results as JSON (schema kiln-bench/1).")
@click.option("-q", "--quiet", is_flag=True, help="No compile progress.")
@debug_option
def bench_command(
    model_file: Path,
    target: str,
    gpu_arch: str | None,
    cpu: str,
    device: str | None,
    model_name: str | None,
    inputs_name: str | None,
    opt_level: str,
    iree_flags: tuple[str, ...],
    warmup: int,
    iterations: int,
    budget_s: float,
    threads: int | None,
    no_inductor: bool,
    json_path: Path | None,
    quiet: bool,
) -> None:
    """Compile MODEL_FILE, check kiln's output against eager PyTorch, then time kiln, eager and Inductor.

    All three run on the same device with the same inputs: warm-up calls, then up to --iterations
    timed calls each, every call fully synchronized; the table gives median, min and max. Columns:

    \b
      kiln       the artifact, inputs already on the device, outputs left there
      kiln call  `module(*tensors)`: host tensors in, host tensors out (copies included)
      eager      eager PyTorch, model and inputs on the device
      Inductor   torch.compile, default mode (compile time: first call minus median;
                 a fresh cache folder, so a cold compile)

    "kiln / this" is kiln's median time over the other's: below 1, kiln is faster. On the CPU,
    torch and IREE use the same number of threads. Exits with status 1 when the numerics check
    fails (the table is printed and the JSON written first).

    \b
    Examples:
      kiln bench examples/mlp.py
      kiln bench model.py --target cuda --json mlp-cuda.json
    """
    import torch

    from kiln.compiler import CompileOptions, load_model_file, run_pipeline
    from kiln.runtime.bench import (
        Settings,
        bench,
        cpu_clock,
        describe_inputs,
        environment,
        fresh_inductor_cache,
        others_share,
        short_dtype,
        torch_device_for,
        use_threads,
    )
    from kiln.runtime.bench_results import CaseResult, Report, case_table
    from kiln.runtime.module import load

    threads = threads or torch.get_num_threads()
    use_threads(threads)  # before any artifact is loaded: IREE reads it when it creates its CPU device
    options = CompileOptions(
        target=target,
        cpu=cpu,
        opt_level=opt_level,
        extra_iree_flags=iree_flags,
        **({"gpu_arch": gpu_arch} if gpu_arch else {}),
    )
    spec = load_model_file(model_file, model_name, inputs_name)
    start = time.perf_counter()
    compiled = run_pipeline(spec, options, progress if not quiet else (lambda line: None)).compiled
    compile_s = time.perf_counter() - start
    assert compiled is not None
    settings = Settings(warmup, iterations, budget_s, inductor=not no_inductor)
    with tempfile.TemporaryDirectory(prefix="kiln-bench-") as folder:
        module = load(compiled.save(Path(folder) / "model.vmfb"), device)  # as a user would load it
        fresh_inductor_cache(str(Path(folder) / "inductor"))
        clock = cpu_clock()
        numerics, timings, error = bench(module, spec.module, spec.example_inputs, settings, device, compile_s)
        busy = others_share(clock, cpu_clock())
    floats = [x for x in spec.example_inputs if x.is_floating_point()] or list(spec.example_inputs)
    case = CaseResult(
        name=model_file.stem,
        model=model_file.stem,
        dtype=short_dtype(floats[0].dtype) if floats else "",
        batch="",
        inputs=describe_inputs(spec.example_inputs),
        timings=timings,
        numerics=numerics,
        error=error,
    )
    click.echo(case_table(case))
    if busy is not None and busy > 0.1:
        click.echo(f"note: other processes used {busy:.0%} of the CPUs while this ran; CPU timings suffer from that")
    if json_path is not None:
        torch_device = torch_device_for(compiled.manifest.driver, device)
        machine, versions = environment(torch_device)
        report = Report(
            target=target,
            device=torch_device,
            created=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            command=shlex.join(["kiln", *sys.argv[1:]]),
            machine={**machine, "others_cpu_share": busy},
            versions=versions,
            settings={**asdict(settings), "threads": threads, "inductor_cache": "fresh"},
            cases=(case,),
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
