"""`kiln compile`: a model file in, a `.vmfb` and its manifest out, every stage dumped."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

import click

from kiln.errors import KilnError

from .common import debug_option, progress
from .options import model_options, target_options
from .passes_command import timing_table

if TYPE_CHECKING:
    from kiln.compiler import CompileOptions, ModelSource


@click.command("compile")
@model_options(required=False)
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Artifact path [default: <model>.vmfb].")
@target_options
@click.option("--dump-dir", type=click.Path(path_type=Path), help="Stage dumps [default: <output stem>.stages/].")
@click.option("--stop-after", metavar="STAGE", help="Stop after this stage of the pipeline in use; keep its dumps, write no artifact.")
@click.option(
    "--start-from",
    type=click.Path(path_type=Path),
    metavar="DUMP",
    help="Compile on from a stage's dump (<NN>-<stage>.mlir) instead of MODEL_FILE: the stages after it run.",
)
@click.option(
    "--pipeline",
    "pipeline_text",
    default="default",
    show_default=True,
    metavar="PIPELINE",
    help="Pass pipeline: `default`, `torch-mlir` (kiln's own passes off), or written out as "
    "stage(pass,pass),stage(pass); `kiln passes` prints the default one in that form.",
)
@click.option("--disable-pass", "disabled_passes", multiple=True, metavar="NAME", help="Leave this pass out (repeatable).")
@click.option(
    "--strict-primitives",
    is_flag=True,
    help="Fail for any op left outside kiln's primitive set after `prims` (require-primitives), even one "
    "torch-mlir lowers; by default check-primitives lists those and fails only for ops nothing lowers.",
)
@click.option(
    "--print-after",
    multiple=True,
    metavar="NAME",
    help="Also dump the module after pass NAME, as NN-<stage>.after-NAME.mlir (repeatable).",
)
@click.option("--print-after-all", is_flag=True, help="Dump the module after every pass.")
@click.option("--timing", is_flag=True, help="Print the time and peak memory of each stage, the time of each pass, and each iree-compile run (what it had on, its CPU time) with the count of runs.")
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
    source: ModelSource | None,
    options: CompileOptions,
    output: Path | None,
    dump_dir: Path | None,
    stop_after: str | None,
    start_from: Path | None,
    pipeline_text: str,
    disabled_passes: tuple[str, ...],
    strict_primitives: bool,
    print_after: tuple[str, ...],
    print_after_all: bool,
    timing: bool,
    tuned: bool,
    verify: bool,
    rtol: float | None,
    atol: float | None,
    quiet: bool,
) -> None:
    """Compile MODEL_FILE to an IREE artifact (.vmfb + .json manifest).

    MODEL_FILE is a Python file that defines `model` (an nn.Module) and `example_inputs` (a tuple
    of tensors), or `get_model()` / `get_example_inputs()`; an optional `dynamic_shapes` is passed
    to torch.export. Or, with --start-from, a stage's dump takes its place: the compile goes on
    from there (edit a dump, or re-run IREE's stages, without the model).

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
      vmfb        IREE compile; each IREE phase dumped as NN-vmfb-KK-<phase>.mlir; on llvm-cpu,
                  NN-vmfb.kernels.md says what computes each contraction and
                  NN-vmfb.iree-input.mlir is the input with kiln's kernel spliced in

    \b
    Examples:
      kiln compile examples/mlp.py -o mlp.vmfb --verify
      kiln compile examples/mlp.py --stop-after linalg     # look at 04-linalg.mlir
      kiln compile --start-from mlp.stages/04-linalg.mlir -o mlp.vmfb   # ... and go on from it
      kiln compile examples/mlp.py --print-after fold-mul-one --timing
      kiln compile examples/mlp.py --pipeline torch-mlir   # without kiln's own passes
      kiln compile model.py --cpu skylake-avx512            # cross-compile for another CPU
      kiln compile model.py --target cuda --gpu-arch sm_86  # for an RTX 30xx; no GPU needed here
      kiln compile model.py --target vulkan-spirv           # ampere, or the local GPU's

    \b
    GPU targets (cross-compiling needs no GPU; running does):
      cuda          NVIDIA, PTX: sm_60 ... sm_89, sm_120. Hopper (sm_90: H100, H200) gets sm_90a
                    code with kiln's own kernels for matmuls (a GELU or other
                    elementwise ops after them fused; SwiGLU's two, and Q, K and V, in
                    one GEMV when decoding, over --quantize's int8/int4 bytes too),
                    convolutions (batch norm and ReLU fused),
                    depthwise convolutions, max pooling, attention, layer norms and
                    softmax with the elementwise ops around them, long elementwise
                    chains, and --generate's KV-cache writes (in place; in a
                    decode step with the rotary embedding of queries and keys);
                    other GPUs IREE 3.13 lacks (sm_100: B200) get sm_80, which their
                    driver JIT-compiles. Default: the local GPU, else sm_80.
      vulkan-spirv  Vulkan compute: ampere, ada, turing, sm_XX, rdna3, valhall, adreno, ...
                    Default: the local GPU, else ampere. No bf16 (IREE 3.13 cannot compile it).
      rocm          AMD, HIP: gfx90a, gfx942, gfx950, gfx1100, ... Default: the local GPU,
                    else gfx942. Compile-only here: not yet run on an AMD GPU.
    """
    from kiln.compiler.driver import Verification, compile_file, run_file_until
    from kiln.passes import parse_pipeline
    from kiln.runtime.manifest import parameters_path

    if (source is None) == (start_from is None):
        raise click.UsageError("give MODEL_FILE or --start-from DUMP (one of them)")
    stem = source.path.stem if source is not None else _dump_stem(start_from)
    output = output or Path(stem + ".vmfb")
    options = replace(
        options,
        dump_dir=dump_dir or output.with_name(output.stem + ".stages"),
        stop_after=stop_after,
        start_from=start_from,
        pipeline=parse_pipeline(pipeline_text),
        disable_passes=disabled_passes,
        strict_primitives=strict_primitives,
        print_after=print_after,
        print_after_all=print_after_all,
    )
    if tuned:
        options = _tuned(source, options)
    report: Any = progress if not quiet else (lambda line: None)
    say = lambda line: click.echo(line, err=True)  # noqa: E731  (even with --quiet: what the artifact is)
    if options.stop_after is not None:
        stopped = run_file_until(source, options, report, say)
        if timing:
            click.echo(timing_table(stopped.reports))
        report(f"stopped after {stopped.stopped.stage}; dumps in {options.dump_dir}/")
        return
    verification = Verification(rtol, atol) if verify else None
    result = compile_file(source, options, output, verification, report, say)
    if timing:
        click.echo(timing_table(result.reports))
    compiled = result.compilation.compiled
    weights = ""
    if compiled.parameters is not None:
        archive = parameters_path(result.path)
        weights = f", weights in {archive} ({archive.stat().st_size / 2**20:.1f} MiB)"
    size_kib = result.path.stat().st_size / 1024
    click.echo(
        f"wrote {result.path} ({size_kib:.0f} KiB) and {result.path.with_suffix('.json')}{weights}; dumps in {options.dump_dir}/"
    )


def _dump_stem(dump: Path | None) -> str:
    """mlp.stages/04-linalg.mlir -> mlp: the artifact is named after the compile that wrote the dump."""
    assert dump is not None
    folder = dump.resolve().parent.name
    return folder.removesuffix(".stages") if folder.endswith(".stages") else dump.stem


def _tuned(source: ModelSource | None, options: CompileOptions) -> CompileOptions:
    from kiln.tune.cache import tuned_options

    if source is None:
        raise KilnError("--tuned needs MODEL_FILE: the tuning cache is keyed on the model", stage="options")
    options, summary = tuned_options(source, options)
    click.echo(f"tuned: {summary}", err=True)  # even with --quiet: it says how the artifact is built
    return options
