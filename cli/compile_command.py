"""`kiln compile`: a model file in, a `.vmfb` and its manifest out, every stage dumped."""

from __future__ import annotations

from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option, progress

# Kept in step with kiln.compiler (tests check it); listed here so that --help needs no heavy import.
TARGETS = ("llvm-cpu",)
STAGES = ("exported", "aten", "prims", "linalg", "vmfb")


@click.command("compile")
@click.argument("model_file", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Artifact path [default: <model>.vmfb].")
@click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True, help="Where the artifact runs.")
@click.option("--cpu", default="host", show_default=True, help="llvm-cpu: LLVM CPU name to compile for, e.g. skylake-avx512.")
@click.option("--model", "model_name", metavar="NAME", help="Module (or factory) to compile [default: model / get_model].")
@click.option("--inputs", "inputs_name", metavar="NAME", help="Example inputs [default: example_inputs / get_example_inputs].")
@click.option("--dump-dir", type=click.Path(path_type=Path), help="Stage dumps [default: <output stem>.stages/].")
@click.option("--stop-after", type=click.Choice(STAGES), help="Stop after this stage; keep its dumps, write no artifact.")
@click.option("--opt-level", type=click.Choice(("O0", "O1", "O2", "O3")), default="O3", show_default=True, help="IREE optimization level.")
@click.option("--iree-flag", "iree_flags", multiple=True, metavar="FLAG", help="Extra iree-compile flag (repeatable).")
@click.option("--verify", is_flag=True, help="Run the artifact on the example inputs and compare with eager PyTorch.")
@click.option("--rtol", type=float, help="--verify relative tolerance [default: by dtype, 1e-4 for f32].")
@click.option("--atol", type=float, help="--verify absolute tolerance [default: by dtype, 1e-4 for f32].")
@click.option("-q", "--quiet", is_flag=True, help="No progress output.")
@debug_option
def compile_command(
    model_file: Path,
    output: Path | None,
    target: str,
    cpu: str,
    model_name: str | None,
    inputs_name: str | None,
    dump_dir: Path | None,
    stop_after: str | None,
    opt_level: str,
    iree_flags: tuple[str, ...],
    verify: bool,
    rtol: float | None,
    atol: float | None,
    quiet: bool,
) -> None:
    """Compile MODEL_FILE to an IREE artifact (.vmfb + .json manifest).

    MODEL_FILE is a Python file that defines `model` (an nn.Module) and `example_inputs` (a tuple
    of tensors), or `get_model()` / `get_example_inputs()`; an optional `dynamic_shapes` is passed
    to torch.export.

    \b
    Stages, each dumped to the dump folder as NN-<stage>.*:
      exported  torch.export's graph (00-exported.txt)
      aten      torch-mlir import: torch dialect, aten ops
      prims     decomposed to a small set of primitive torch ops
      linalg    linalg-on-tensors: the hand-off to IREE
      vmfb      IREE compile; each IREE phase dumped as NN-vmfb-KK-<phase>.mlir

    \b
    Examples:
      kiln compile examples/mlp.py -o mlp.vmfb --verify
      kiln compile examples/mlp.py --stop-after linalg     # look at 03-linalg.mlir
      kiln compile model.py --cpu skylake-avx512            # cross-compile for another CPU
    """
    from kiln.compiler import CompileOptions, load_model_file, run_pipeline
    from kiln.compiler.verify import verify as verify_artifact

    output = output or Path(model_file.stem + ".vmfb")
    options = CompileOptions(
        target=target,
        cpu=cpu,
        opt_level=opt_level,
        extra_iree_flags=iree_flags,
        dump_dir=dump_dir or output.with_name(output.stem + ".stages"),
        stop_after=stop_after,
    )
    report = progress if not quiet else (lambda line: None)
    spec = load_model_file(model_file, model_name, inputs_name)
    compilation = run_pipeline(spec, options, report)
    if compilation.compiled is None:
        report(f"stopped after {stop_after}; dumps in {options.dump_dir}/")
        return
    if verify:
        checks = verify_artifact(compilation.compiled, spec, rtol, atol)
        for check in checks:
            status = "ok" if check.ok else "MISMATCH"
            click.echo(
                f"verify {check.name}: max abs error {check.max_abs_error:.3g}, "
                f"max rel error {check.max_rel_error:.3g}  {status}"
            )
        if not all(check.ok for check in checks):
            raise KilnError(
                "artifact does not match eager PyTorch within tolerance; artifact not written",
                stage="verify",
                hint="loosen with --rtol/--atol if the difference is expected",
            )
    path = compilation.compiled.save(output)
    size_kib = path.stat().st_size / 1024
    click.echo(f"wrote {path} ({size_kib:.0f} KiB) and {path.with_suffix('.json')}; dumps in {options.dump_dir}/")
