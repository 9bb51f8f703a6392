"""`kiln compile`: a model file in, a `.vmfb` and its manifest out, every stage dumped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import click

from kiln.errors import KilnError

from .common import debug_option, progress
from .passes_command import timing_table

# Kept in step with kiln.compiler (tests check it); listed here so that --help needs no heavy import.
TARGETS = ("llvm-cpu", "cuda", "vulkan-spirv", "rocm")
STAGES = ("exported", "aten", "prims", "simplified", "linalg", "fused", "vmfb")


@click.command("compile")
@click.argument("model_file", type=click.Path(path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Artifact path [default: <model>.vmfb].")
@click.option("--target", type=click.Choice(TARGETS), default="llvm-cpu", show_default=True, help="Where the artifact runs.")
@click.option("--cpu", default="host", show_default=True, help="llvm-cpu: LLVM CPU name to compile for, e.g. skylake-avx512.")
@click.option(
    "--gpu-arch",
    metavar="ARCH",
    help="GPU targets: the architecture, e.g. sm_80, sm_86, sm_89 (cuda), ampere (vulkan-spirv), gfx942 (rocm) "
    "[default: the local GPU's, else sm_80 / ampere / gfx942]. NVIDIA GPUs IREE 3.13 lacks (sm_90, sm_100) "
    "get sm_80 for cuda, ampere for vulkan-spirv. An unknown ARCH lists the known ones.",
)
@click.option("--model", "model_name", metavar="NAME", help="Module (or factory) to compile [default: model / get_model].")
@click.option("--inputs", "inputs_name", metavar="NAME", help="Example inputs [default: example_inputs / get_example_inputs].")
@click.option(
    "--params",
    type=click.Choice(("auto", "inline", "external")),
    default="auto",
    show_default=True,
    help="Weights: inline in the .vmfb, or external in an .irpa archive beside it (named as in the "
    "PyTorch state_dict); auto = external above 256 MiB of weights.",
)
@click.option(
    "--dtype",
    "precision",
    type=click.Choice(("bf16", "f16")),
    help="Compile an f32 model in this precision: weights and float inputs are converted first.",
)
@click.option(
    "--dynamic-dim",
    "dynamic_dims",
    multiple=True,
    metavar="INPUT:AXIS",
    help="Make an input axis dynamic, e.g. x:0 (batch) or 0:1 (by position); repeatable. "
    "torch.export infers the bounds; the manifest records them and the runtime enforces them.",
)
@click.option("--dump-dir", type=click.Path(path_type=Path), help="Stage dumps [default: <output stem>.stages/].")
@click.option("--stop-after", type=click.Choice(STAGES), help="Stop after this stage; keep its dumps, write no artifact.")
@click.option(
    "--pipeline",
    "pipeline_text",
    default="default",
    show_default=True,
    metavar="PIPELINE",
    help="Pass pipeline: `default`, `torch-mlir` (kiln's own passes off), or written out as "
    "stage(pass,pass),stage(pass); `kiln passes` prints the default one in that form.",
)
@click.option(
    "--handoff",
    type=click.Choice(("linalg", "torch")),
    help="Where IREE takes over: `linalg` (kiln lowers to linalg-on-tensors and fuses; attention is "
    "decomposed) or `torch` (after `simplified`, IREE's torch input pipeline lowers the rest and keeps "
    "scaled_dot_product_attention as one fused op) [default: the target's: torch for cuda, linalg for the others].",
)
@click.option("--disable-pass", "disabled_passes", multiple=True, metavar="NAME", help="Leave this pass out (repeatable).")
@click.option(
    "--print-after",
    multiple=True,
    metavar="NAME",
    help="Also dump the module after pass NAME, as NN-<stage>.after-NAME.mlir (repeatable).",
)
@click.option("--print-after-all", is_flag=True, help="Dump the module after every pass.")
@click.option("--timing", is_flag=True, help="Print the time each stage and each pass took.")
@click.option("--opt-level", type=click.Choice(("O0", "O1", "O2", "O3")), default="O3", show_default=True, help="IREE optimization level.")
@click.option("--iree-flag", "iree_flags", multiple=True, metavar="FLAG", help="Extra iree-compile flag (repeatable).")
@click.option(
    "--tuned",
    is_flag=True,
    help="Apply the settings `kiln tune` stored for this model, target and machine (they override "
    "--handoff, --opt-level and --pipeline; --iree-flag comes after them); an error says how to tune first.",
)
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
    gpu_arch: str | None,
    model_name: str | None,
    inputs_name: str | None,
    dynamic_dims: tuple[str, ...],
    precision: str | None,
    params: str,
    dump_dir: Path | None,
    stop_after: str | None,
    pipeline_text: str,
    handoff: str | None,
    disabled_passes: tuple[str, ...],
    print_after: tuple[str, ...],
    print_after_all: bool,
    timing: bool,
    opt_level: str,
    iree_flags: tuple[str, ...],
    tuned: bool,
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
      exported    torch.export's graph (00-exported.txt)
      aten        torch-mlir import: torch dialect, aten ops
      prims       decomposed to kiln's primitive torch ops (`kiln passes` lists the passes)
      simplified  algebraic simplification: sin^2+cos^2, x*1, x+0, transposes, reshapes, ...
      linalg      linalg-on-tensors
      fused       elementwise chains fused, one linalg.generic each: the hand-off to IREE;
                  NN-fused.fusion-report.md says what went into each
                  (--handoff torch: linalg and fused are IREE's job, after simplified)
      vmfb        IREE compile; each IREE phase dumped as NN-vmfb-KK-<phase>.mlir

    \b
    Examples:
      kiln compile examples/mlp.py -o mlp.vmfb --verify
      kiln compile examples/mlp.py --stop-after linalg     # look at 04-linalg.mlir
      kiln compile examples/mlp.py --print-after fold-mul-one --timing
      kiln compile examples/mlp.py --pipeline torch-mlir   # without kiln's own passes
      kiln compile model.py --cpu skylake-avx512            # cross-compile for another CPU
      kiln compile model.py --target cuda --gpu-arch sm_86  # for an RTX 30xx; no GPU needed here
      kiln compile model.py --target vulkan-spirv           # ampere, or the local GPU's

    \b
    GPU targets (cross-compiling needs no GPU; running does):
      cuda          NVIDIA, PTX: sm_60 ... sm_89, sm_120. GPUs IREE 3.13 lacks (sm_90, sm_100:
                    H100, H200, B200) get sm_80, whose PTX their driver JIT-compiles.
                    Default: the local GPU, else sm_80.
      vulkan-spirv  Vulkan compute: ampere, ada, turing, sm_XX, rdna3, valhall, adreno, ...
                    Default: the local GPU, else ampere. No bf16 (IREE 3.13 cannot compile it).
      rocm          AMD, HIP: gfx90a, gfx942, gfx950, gfx1100, ... Default: the local GPU,
                    else gfx942. Compile-only here: not yet run on an AMD GPU.
    """
    from kiln.compiler import CompileOptions, load_model_file, run_pipeline
    from kiln.compiler.capture import mark_dynamic
    from kiln.compiler.precision import convert_precision
    from kiln.compiler.targets import choose_arch, get_target
    from kiln.compiler.verify import verify as verify_artifact
    from kiln.passes import parse_pipeline
    from kiln.runtime.manifest import parameters_path

    output = output or Path(model_file.stem + ".vmfb")
    options = CompileOptions(
        target=target,
        cpu=cpu,
        gpu_arch=gpu_arch,
        opt_level=opt_level,
        extra_iree_flags=iree_flags,
        params=params,
        dump_dir=dump_dir or output.with_name(output.stem + ".stages"),
        stop_after=stop_after,
        pipeline=parse_pipeline(pipeline_text),
        handoff=handoff,
        disable_passes=disabled_passes,
        print_after=print_after,
        print_after_all=print_after_all,
    )
    report = progress if not quiet else (lambda line: None)
    if get_target(target).archs is not None:  # fails here, before any work, on an unknown --gpu-arch
        note = choose_arch(target, gpu_arch).note
        if note:
            click.echo(f"note: {note}", err=True)  # even with --quiet: it says what the artifact is built for
    loaded = load_model_file(model_file, model_name, inputs_name)
    spec = convert_precision(mark_dynamic(loaded, dynamic_dims), precision)
    tuning = None
    if tuned:
        from kiln.compiler.tuning_cache import ModelRef, lookup
        from kiln.compiler.tuning_space import apply_settings

        tuning = lookup(spec, ModelRef(model_file, model_name, inputs_name, dynamic_dims, precision), options)
        options = apply_settings(options, tuning.settings)
        click.echo(f"tuned: {tuning.summary()}", err=True)  # even with --quiet: it says how the artifact is built
    compilation = run_pipeline(spec, options, report)
    if timing:
        click.echo(timing_table(compilation.stages))
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
    if tuning is not None:
        from kiln.compiler.tuning_cache import mark_tuned

        compilation = replace(compilation, compiled=mark_tuned(compilation.compiled, tuning))
    path = compilation.compiled.save(output)
    size_kib = path.stat().st_size / 1024
    weights = ""
    if compilation.compiled.parameters is not None:
        archive = parameters_path(path)
        weights = f", weights in {archive} ({archive.stat().st_size / 2**20:.1f} MiB)"
    click.echo(f"wrote {path} ({size_kib:.0f} KiB) and {path.with_suffix('.json')}{weights}; dumps in {options.dump_dir}/")
