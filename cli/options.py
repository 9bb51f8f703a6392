"""The options several commands share, declared once: which model, how to compile it, how to time it.

Each decorator adds its flags to a command and hands the command one value built from them
(`source`, `options`, `timing`), so `kiln compile`, `kiln bench`, `kiln tune` and the benchmark
suite take the same flags with the same meaning. Values are built when the command runs, so
that `--help` imports nothing heavy.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import click

from kiln.runtime.devices import CPU_DRIVER_CHOICES
from kiln.runtime.manifest import PREFILL_CHUNK, QUANTIZE_SCHEMES
from kiln.targets import TARGETS
from kiln.targets.cuda.target import CONV_PRECISIONS, MATMUL_PRECISIONS
from kiln.targets.resolve import CPU_ATTENTION_CHOICES, HANDOFFS, KERNEL_CHOICES
from kiln.targets.target import WEIGHT_POLICIES

TARGET_NAMES = tuple(TARGETS)
OPT_LEVELS = ("O0", "O1", "O2", "O3")
PRECISIONS = ("bf16", "f16")


def _add(function: Callable[..., Any], options: tuple[Callable[[Any], Any], ...]) -> Callable[..., Any]:
    for option in reversed(options):
        function = option(function)
    return function


def model_options(required: bool = True) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """MODEL_FILE and the flags that pick and shape its model; the command gets `source` (a ModelSource,
    or None when MODEL_FILE is optional and not given)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def command(
            *args: Any,
            model_file: Path | None,
            model_name: str | None,
            inputs_name: str | None,
            dynamic_dims: tuple[str, ...],
            precision: str | None,
            generate: bool,
            max_seq_len: int | None,
            batch: int,
            prefill_chunk: int,
            quantize: str | None,
            **kwargs: Any,
        ) -> Any:
            from kiln.compiler.model_file import GenerationOptions, ModelSource

            if (max_seq_len is not None or batch != 1 or prefill_chunk != PREFILL_CHUNK) and not generate:
                raise click.UsageError("--max-seq-len, --batch and --prefill-chunk shape a --generate compile; add --generate")
            if generate and max_seq_len is None:
                raise click.UsageError("--generate needs --max-seq-len N: the most tokens (prompt and new) a generation holds")
            generation = GenerationOptions(max_seq_len, batch, prefill_chunk) if generate and max_seq_len is not None else None
            source = None
            if model_file is not None:
                source = ModelSource(model_file, model_name, inputs_name, dynamic_dims, precision, generation, quantize)
            return function(*args, source=source, **kwargs)

        return _add(
            command,
            (
                click.argument("model_file", type=click.Path(path_type=Path), required=required),
                click.option("--model", "model_name", metavar="NAME", help="Module (or factory) to compile [default: model / get_model]."),
                click.option("--inputs", "inputs_name", metavar="NAME", help="Example inputs [default: example_inputs / get_example_inputs]."),
                click.option(
                    "--dtype",
                    "precision",
                    type=click.Choice(PRECISIONS),
                    help="Compile an f32 model in this precision: weights and float inputs are converted first.",
                ),
                click.option(
                    "--quantize",
                    type=click.Choice(QUANTIZE_SCHEMES),
                    help="Weight-only quantization of the nn.Linear layers (after --dtype): int8 (a scale per output "
                    "channel) or int4 (a scale per 128 inputs; int4-g32/-g64/-g128 choose). Activations keep their dtype; "
                    "kiln's GEMV kernel (cuda, decode) reads the quantized bytes.",
                ),
                click.option(
                    "--generate",
                    is_flag=True,
                    help="The model is a causal LM (transformers): compile `prefill` and `decode` over a KV cache kept "
                    "in the artifact, for `kiln generate` and `m.generate`; its example inputs are not used.",
                ),
                click.option(
                    "--max-seq-len",
                    type=click.IntRange(min=2),
                    help="With --generate: the cache's length, the most tokens (prompt and new) a generation holds.",
                ),
                click.option("--batch", type=click.IntRange(min=1), default=1, show_default=True, help="With --generate: the rows generated at once."),
                click.option(
                    "--prefill-chunk",
                    type=click.IntRange(min=1),
                    default=PREFILL_CHUNK,
                    show_default=True,
                    help="With --generate: the prompt tokens one prefill call takes (a fixed shape, for kiln's kernels); "
                    "longer prompts go in chunks, shorter ones padded.",
                ),
                click.option(
                    "--dynamic-dim",
                    "dynamic_dims",
                    multiple=True,
                    metavar="INPUT:AXIS",
                    help="Make an input axis dynamic, e.g. x:0 (batch) or 0:1 (by position); repeatable. "
                    "torch.export infers the bounds; the manifest records them and the runtime enforces them.",
                ),
            ),
        )

    return decorate


def target_options(function: Callable[..., Any]) -> Callable[..., Any]:
    """Where the artifact runs and how IREE compiles it; the command gets `options` (a CompileOptions)."""

    @functools.wraps(function)
    def command(
        *args: Any,
        target: str,
        cpu: str,
        gpu_arch: str | None,
        handoff: str | None,
        params: str,
        opt_level: str,
        iree_flags: tuple[str, ...],
        matmul_precision: str | None,
        conv_precision: str | None,
        kernels: str,
        cpu_attention: str,
        cpu_driver: str,
        **kwargs: Any,
    ) -> Any:
        from kiln.compiler.options import CompileOptions

        options = CompileOptions(
            target=target,
            cpu=cpu,
            gpu_arch=gpu_arch,
            handoff=handoff,
            params=params,
            opt_level=opt_level,
            extra_iree_flags=iree_flags,
            matmul_precision=matmul_precision,
            conv_precision=conv_precision,
            kernels=kernels,
            cpu_attention=cpu_attention,
            cpu_driver=cpu_driver,
        )
        return function(*args, options=options, **kwargs)

    return _add(
        command,
        (
            click.option("--target", type=click.Choice(TARGET_NAMES), default="llvm-cpu", show_default=True, help="Where the artifact runs."),
            click.option("--cpu", default="host", show_default=True, help="llvm-cpu: LLVM CPU name to compile for, e.g. sapphirerapids, znver4."),
            click.option(
                "--gpu-arch",
                metavar="ARCH",
                help="GPU targets: the architecture, e.g. sm_80, sm_86, sm_89, sm_90 (cuda), ampere (vulkan-spirv), gfx942 (rocm) "
                "[default: the local GPU's, else sm_80 / ampere / gfx942]. Hopper (sm_90, h100, h200) is sm_90a for cuda, "
                "described to IREE in full; other NVIDIA GPUs IREE 3.13 lacks (sm_100) get sm_80 for cuda, and every "
                "newer one ampere for vulkan-spirv. An unknown ARCH lists the known ones.",
            ),
            click.option(
                "--handoff",
                type=click.Choice(HANDOFFS),
                help="Where IREE takes over: `linalg` (kiln lowers to linalg-on-tensors and fuses; attention is "
                "decomposed) or `torch` (after `simplified`, IREE's torch input pipeline lowers the rest and keeps "
                "scaled_dot_product_attention as one fused op) [default: the target's: torch for cuda, linalg for the others].",
            ),
            click.option(
                "--params",
                type=click.Choice(WEIGHT_POLICIES),
                default="auto",
                show_default=True,
                help="Weights: inline in the .vmfb, or external in an .irpa archive beside it (named as in the "
                "PyTorch state_dict); auto = external above 256 MiB of weights.",
            ),
            click.option("--opt-level", type=click.Choice(OPT_LEVELS), default="O3", show_default=True, help="IREE optimization level."),
            click.option("--iree-flag", "iree_flags", multiple=True, metavar="FLAG", help="Extra iree-compile flag (repeatable)."),
            click.option(
                "--matmul-precision",
                type=click.Choice(MATMUL_PRECISIONS),
                help="cuda: f32 matmuls as torch.set_float32_matmul_precision means it: highest = f32-class "
                "accuracy (kiln's kernels: tf32x3), high or medium = TF32 [default: torch.get_float32_matmul_precision()].",
            ),
            click.option(
                "--conv-precision",
                type=click.Choice(CONV_PRECISIONS),
                help="cuda: f32 convolutions: high = TF32, as cuDNN computes them by default; highest = f32-class "
                "accuracy [default: high, or highest when torch.backends.cudnn.allow_tf32 is off].",
            ),
            click.option(
                "--kernels",
                type=click.Choice(KERNEL_CHOICES),
                default="on",
                show_default=True,
                help="kiln's own contraction kernels where they apply: llvm-cpu, convolutions and matmuls on CPUs "
                "with AVX-512 (bf16 on AMX or AVX512-BF16, f32 on AVX-512F), softmax and layer norms (AVX-512F; "
                "a layer norm with the elementwise op before it as one row program), built by the host's C compiler; cuda on "
                "Hopper (sm_90a), matmuls, convolutions, depthwise convolutions, max pooling, attention, layer norms and "
                "softmax with the elementwise ops around them, long elementwise chains and --generate's KV-cache "
                "writes (Triton, from "
                "torchkiln[kernels]). off = IREE's "
                "code for every contraction.",
            ),
            click.option(
                "--cpu-attention",
                type=click.Choice(CPU_ATTENTION_CHOICES),
                default="bf16",
                show_default=True,
                help="llvm-cpu, bf16 models: attention's matmuls on kiln's kernel with their operands in bf16, as eager "
                "PyTorch computes bf16 attention, or in f32 (kiln's linalg: more precise, IREE's code).",
            ),
            click.option(
                "--cpu-driver",
                type=click.Choice(CPU_DRIVER_CHOICES),
                default="auto",
                show_default=True,
                help="llvm-cpu: IREE's runtime driver: local-task (a thread pool), local-sync (the caller's thread, "
                "cheaper per call), or auto: the runtime times both on the first calls of each input signature and keeps the faster.",
            ),
        ),
    )


@dataclass(frozen=True)
class TimingChoice:
    """How to time: where, how many calls, how many threads; `settings` is kiln.measure.timing.Settings."""

    device: str | None
    threads: int | None
    settings: Any


def timing_options(
    warmup: int = 5, iterations: int = 50, time_s: float = 10.0, inductor: bool = True
) -> Callable[[Callable[..., Any]], Callable[..., Any]]:
    """The flags of a timing run, with this command's defaults; the command gets `timing` (a TimingChoice)."""

    def decorate(function: Callable[..., Any]) -> Callable[..., Any]:
        @functools.wraps(function)
        def command(
            *args: Any,
            device: str | None,
            warmup: int,
            iterations: int,
            time_s: float,
            threads: int | None,
            no_inductor: bool = not inductor,
            **kwargs: Any,
        ) -> Any:
            from kiln.measure.timing import Settings

            settings = Settings(warmup, iterations, time_s, inductor=inductor and not no_inductor)
            return function(*args, timing=TimingChoice(device, threads, settings), **kwargs)

        options = (
            click.option("--device", help="cpu, cuda, cuda:1, vulkan [default: the artifact's own]; torch runs on the matching device."),
            click.option("--warmup", type=int, default=warmup, show_default=True, help="Untimed calls first."),
            click.option("--iterations", type=int, default=iterations, show_default=True, help="Timed calls, at most (see --time-s)."),
            click.option("--time-s", type=float, default=time_s, show_default=True, help="Fewer timed calls once this long has passed (3 at least)."),
            click.option("--threads", type=int, help="CPU threads for torch and for IREE alike [default: torch's default, the cores]."),
        )
        if inductor:
            options += (click.option("--no-inductor", is_flag=True, help="Do not time torch.compile."),)
        return _add(command, options)

    return decorate
