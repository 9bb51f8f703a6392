"""llvm-cpu: this machine's CPU (or another named with --cpu), through LLVM.

The target's flags and levers (data tiling, channels-last convolutions, batch-matmul transposes), its
choices for a compile (kiln's CPU kernels and the ISA path they take, attention's precision, the
runtime driver), and the passes only it wants (depthwise-to-nhwc, split-grouped-convs, conv-1d-as-2d).
"""

from __future__ import annotations

import platform
from typing import TYPE_CHECKING

from kiln.errors import KilnError
from kiln.passes import PassPlacement
from kiln.runtime.devices import CPU_STACK_ALLOCATION_LIMIT, host_cpu_model

from ..gpu import ArchChoice
from ..levers import KEEP_ASSERTIONS, Lever
from ..target import Choices, Target
from .kernels.features import kernel_isa
from .kernels.provider import CpuKernels

if TYPE_CHECKING:
    from kiln.compiler.options import CompileOptions

STAGE = "target"


def _cpu_flags(options: CompileOptions, arch: ArchChoice | None) -> list[str]:
    if options.gpu_arch is not None:
        from kiln.targets import GPU_TARGETS  # the registry, which imports this room

        raise KilnError(
            f"--gpu-arch is for GPU targets ({', '.join(GPU_TARGETS)}); llvm-cpu takes --cpu", stage=STAGE
        )
    return [
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        f"--iree-llvmcpu-target-cpu={options.cpu}",
        # IREE 3.13 emulates bf16 arithmetic in f32 on CPUs without avx512bf16, and that rewrite
        # breaks on weight constants inlined into a dispatch ("'arith.constant' op failed to verify").
        # Keeping constants out of dispatches avoids it at the cost of one binding per constant.
        "--iree-flow-inline-constants-max-byte-length=0",
        # IREE fuses an embedding gather into the layer norm after it (BERT's embeddings); that
        # dispatch needs ~74 KB of stack, over IREE's 32 KB default, and a 1B Llama's attention over a
        # 1,024-position cache 136 KiB. The runtime gives CPU workers a stack of twice this limit
        # (runtime/devices.py) so the bound stays safe.
        f"--iree-llvmcpu-stack-allocation-limit={CPU_STACK_ALLOCATION_LIMIT}",
        # float64 stays float64, as in eager PyTorch: CPUs compute it natively (IREE demotes it by default).
        "--iree-input-demote-f64-to-f32=false",
    ]


# llvm-cpu defaults measured over the benchmark suite on a 16-core Emerald Rapids host (benchmarks/NOTES.md).
# Data tiling (matmul operands packed for the CPU's registers; weights packed once at load) gained on
# nearly every matmul; IREE 3.13 cannot compile it for some layer norms, where its global-optimization
# path (slightly slower) can. Channels-last convolutions (NCHW convolutions computed as NHWC, with the
# transposes propagated away) gained on every convolution model, up to 5x.
DATA_TILING = Lever(
    "data-tiling",
    (("--iree-opt-data-tiling",), ("--iree-opt-data-tiling=false", "--iree-global-opt-data-tiling")),
)
CHANNELS_LAST = Lever(
    "channels-last",
    (("--iree-preprocessing-pass-pipeline=builtin.module(util.func(iree-preprocessing-convert-conv-to-channels-last))",),),
    needs=r"linalg\.(depthwise_)?conv_|torch\.aten\.convolution",
)
# IREE propagates the transposes around attention's f32 batch matmuls into them (the [b, s, h, d]
# <-> [b, h, s, d] permutes), and the CPU backend then codegens a generic contraction that data tiling
# does not serve: GPT-2's P.V ran 270 ms of a 517 ms block, 15 ms with the transpose left a dispatch
# of its own (benchmarks/NOTES.md). Convolution models need the propagation (channels-last), and bf16
# attention goes to kiln's CPU kernel, where it cost 8-15%: only f32 batch matmuls take this lever.
BATCH_MATMUL_TRANSPOSES = Lever(
    "batch-matmul-transposes",
    (("--iree-global-opt-propagate-transposes=false",),),
    needs=r"linalg\.batch_matmul ins\([^:]*: tensor<[0-9x?]*xf32>",
)


def _cpu_details(options: CompileOptions, arch: ArchChoice | None) -> dict[str, str]:
    details = {"cpu": options.cpu, "machine": platform.machine()}
    if options.cpu == "host":
        details["host_cpu"] = host_cpu_model()
    return details


def _choose(options: CompileOptions, arch: ArchChoice | None, handoff: str) -> Choices:
    """Which paths of kiln's CPU kernels apply, attention's precision, the runtime driver. The kernels
    rewrite kiln's linalg, so the torch hand-off leaves them out."""
    isa = kernel_isa(options.cpu) if options.kernels == "on" and handoff == "linalg" else None
    return Choices(
        details={
            "kernels": isa.name if isa is not None else "off",
            "cpu_attention": options.cpu_attention,
            "cpu_driver": options.cpu_driver,
        },
        kernels=CpuKernels(isa, options.cpu_attention == "bf16") if isa is not None else None,
        # NCHW depthwise convolutions as NHWC ones, which IREE's CPU code vectorizes along the channels;
        # for the kernels, grouped ones as one convolution a group and 1-D ones as 2-D ones of height 1.
        passes=(
            PassPlacement(
                "linalg", "fold-truncf-constants",
                ("depthwise-to-nhwc", *(("split-grouped-convs", "conv-1d-as-2d") if isa is not None else ())),
            ),
        ),
        driver=None if options.cpu_driver == "auto" else options.cpu_driver,
    )


# The transient variant doubles iree-compile's work (it compiles the body again) and pays only where a
# call's intermediates are large: IREE maps them fresh from the C heap each call, faulting in every
# page. Measured on the 2-core development machine (A/B, one run each, llvm-cpu f32): the suite's
# mobilenet_block with a largest intermediate of 2.4 MiB 2.0x slower with the variant, 9.2 MiB 0.85x,
# 37 MiB and more 0.48x; gpt2_block at 1.5 and 3 MiB 0.94x and 0.97x, 12 MiB 0.88x. The crossover
# lies between 2.4 and 9.2 MiB; below 4 MiB a model compiles once, half the iree-compile time.
TRANSIENT_VARIANTS_FROM = 4 << 20

TARGET = Target(
    name="llvm-cpu",
    summary="this machine's CPU (or another one with --cpu), through LLVM",
    driver="local-task",
    flags=_cpu_flags,
    details=_cpu_details,
    choose=_choose,
    carried_dtypes={},
    levers=(KEEP_ASSERTIONS, DATA_TILING, CHANNELS_LAST, BATCH_MATMUL_TRANSPOSES),
    transient_variants=TRANSIENT_VARIANTS_FROM,
)
