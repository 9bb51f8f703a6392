"""cuda: NVIDIA GPUs through CUDA (PTX, JIT-compiled by the driver at load).

The target's architectures (sm_90a described to IREE in full, newer GPUs on sm_80's PTX), the
precision of f32 contractions (PyTorch's contract: matmuls at "highest", convolutions in TF32 by
default), and where kiln's own kernels apply: on sm_90a at the torch hand-off, the room places
outline-contractions and outline-row-programs (passes/) and its Triton kernels (kernels/) replace
IREE's code for what they outlined.
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING

from kiln.errors import KilnError
from kiln.passes import PassPlacement

from ..gpu import (
    GPU_REWRITES,
    NVIDIA_NAMES,
    NVIDIA_SM,
    ArchChoice,
    DescribedArch,
    GpuArchs,
    gpu_details,
    gpu_flags,
    local_nvidia_arch,
)
from ..levers import KEEP_ASSERTIONS
from ..target import Choices, Target
from .kernels.provider import CudaKernels

if TYPE_CHECKING:
    from kiln.compiler.options import CompileOptions

STAGE = "target"

# Hopper as IREE 3.13 can be told about it: the ISA (sm_90a, PTX 8.0), Hopper's 227 KiB of shared
# memory per workgroup and its 132 SMs (H100 SXM; an H200 has as many), with sm_80's workgroup and
# MMA description as `--iree-cuda-target=sm_80` expands it (IREE's codegen has no wgmma). The PTX is
# sm_90a code: it runs on Hopper only, so Blackwell keeps the sm_80 stand-in.
SM90A = DescribedArch(
    arch="sm_90a",
    aliases=("sm_90", "hopper", "h100", "h200", "gh200"),
    device_targets=(
        '[#hal.device.target<"cuda", [#hal.executable.target<"cuda", "cuda-nvptx-fb", {iree_codegen.target_info = '
        '#iree_gpu.target<arch = "sm_90a", features = "+ptx80", wgp = <compute = fp64|fp32|fp16|int64|int32|int16|int8, '
        "storage = b64|b32|b16|b8, subgroup = shuffle|arithmetic, dot = dp4xi8toi32, "
        "mma = [<NV_MMA_SYNC_F32_16x8x16_F16>, <NV_MMA_SYNC_F16_16x8x16_F16>, <NV_MMA_SYNC_F32_16x8x16_BF16>, "
        "<NV_WMMA_F32_16x16x16_F16>, <NV_WMMA_F16_16x16x16_F16>], "
        "subgroup_size_choices = [32], max_workgroup_sizes = [1024, 1024, 1024], max_thread_count_per_workgroup = 1024, "
        "max_workgroup_memory_bytes = 232448, max_workgroup_counts = [2147483647, 65535, 65535]>, "
        "chip = <wgp_count = 132>>}>]>]"
    ),
    summary="#iree_gpu.target sm_90a (PTX 8.0): 132 SMs, 227 KiB of shared memory per workgroup, sm_80's MMA intrinsics",
    kernels=True,
)

CUDA_ARCHS = GpuArchs(
    device="cuda",
    flag="--iree-cuda-target",
    default="sm_80",
    known=(*NVIDIA_SM, *NVIDIA_NAMES),
    # Not sm_89, though newer (its PTX also ran on an H200): it sets Ada's 99 KiB of workgroup memory
    # (sm_80: 163 KiB; Hopper has 227), adds only fp8 mma, and its PTX 8.4 needs a CUDA 12.4 driver,
    # where sm_80's PTX 7.6 loads on every driver that supports Hopper.
    newer="sm_80",
    newer_why="whose PTX the CUDA driver JIT-compiles for the newer GPU",
    detect=local_nvidia_arch,
    described=(SM90A,),
)

# IREE 3.13's cuda code for a 16-bit (bf16, f16) contraction that writes its result transposed,
# out[b, n, m] = sum_k x[b, m, k] * w[n, k], is wrong (relative L2 error ~1 on an H200, sm_80 and
# sm_90a PTX alike; f32 and the [b, m, n] order are right, and so is llvm-cpu). IREE's global
# optimization makes one whenever it propagates a transpose into a matmul: attention's V projection
# written as V^T for its fused attention (T5 and Swin in bf16: rel. L2 0.43 and 0.20 from eager), or
# `(x @ w.T).transpose(1, 2)` as a model writes it. Without the propagation the transposes stay ops
# of their own, as kiln's llvm-cpu compiles f32 batch matmuls (targets/llvm_cpu/target.py).
KEEP_TRANSPOSES = "--iree-global-opt-propagate-transposes=false"
_ARCH_FLAGS = gpu_flags(CUDA_ARCHS)


def _flags(options: CompileOptions, arch: ArchChoice | None) -> list[str]:
    return [*_ARCH_FLAGS(options, arch), KEEP_TRANSPOSES]


# PyTorch's names for the precision of f32 matmuls (torch.set_float32_matmul_precision): "highest" is
# f32 (kiln's kernels: tf32x3, f32-class accuracy), "high" and "medium" allow TF32. f32 convolutions
# take "highest" or "high" alike; PyTorch's default for them on CUDA is TF32 (cuDNN's allow_tf32).
MATMUL_PRECISIONS = ("highest", "high", "medium")
CONV_PRECISIONS = ("highest", "high")


def _choose(options: CompileOptions, arch: ArchChoice | None, handoff: str) -> Choices:
    """The contractions' precision, and whether kiln's kernels apply: on an arch they run on (sm_90a), at
    the torch hand-off, with --kernels on."""
    assert arch is not None
    matmul, conv = _precisions(options)
    described = CUDA_ARCHS.description(arch.arch)
    kernels = described is not None and described.kernels and handoff == "torch" and options.kernels == "on"
    # Last in `simplified`: the contractions as the simplifications left them. pointwise-conv-to-mm
    # after outlining, so that the bodies of outlined convolutions (IREE's code, should no kernel
    # replace them) are rewritten too: IREE 3.13 miscompiles 16-bit 1x1 convolutions.
    outline = ("heads-last-attention-inputs", "outline-cache-writes", "outline-contractions", "outline-row-programs") if kernels else ()
    return Choices(
        details={"matmul_precision": matmul, "conv_precision": conv, "kernels": "on" if kernels else "off"},
        attributes={"kiln.matmul_precision": matmul, "kiln.conv_precision": conv, "kiln.kernels": options.kernels},
        kernels=CudaKernels() if kernels else None,
        passes=(GPU_REWRITES, PassPlacement("simplified", "cse", (*outline, "pointwise-conv-to-mm"))),
    )


def _precisions(options: CompileOptions) -> tuple[str, str]:
    """How f32 contractions are computed: from the options, else from PyTorch's own settings in this
    process, as eager PyTorch would run them."""
    matmul = options.matmul_precision or _torch_matmul_precision()
    conv = options.conv_precision or _torch_conv_precision()
    if matmul not in MATMUL_PRECISIONS:
        raise KilnError(f"unknown matmul precision '{matmul}'; known: {', '.join(MATMUL_PRECISIONS)}", stage=STAGE)
    if conv not in CONV_PRECISIONS:
        raise KilnError(f"unknown convolution precision '{conv}'; known: {', '.join(CONV_PRECISIONS)}", stage=STAGE)
    return matmul, conv


def _torch_matmul_precision() -> str:
    """torch.get_float32_matmul_precision() where torch is loaded; else its default, "highest"
    (without torch imported, nothing can have changed it)."""
    torch = sys.modules.get("torch")
    return torch.get_float32_matmul_precision() if torch is not None else "highest"


def _torch_conv_precision() -> str:
    """"high" (TF32) when cuDNN may use TF32 for f32 convolutions, PyTorch's default; else "highest"."""
    torch = sys.modules.get("torch")
    return "high" if torch is None or torch.backends.cudnn.allow_tf32 else "highest"


TARGET = Target(
    name="cuda",
    summary="NVIDIA GPUs through CUDA (PTX, JIT-compiled by the driver at load)",
    driver="cuda",
    flags=_flags,
    details=gpu_details(CUDA_ARCHS),
    choose=_choose,
    archs=CUDA_ARCHS,
    # Measured on an H200 over the benchmark suite (benchmarks/NOTES.md): bf16 cases 3x faster
    # (geomean; up to 33x where attention and bf16 matmuls stay whole), f32 cases 1.09x slower.
    handoff="torch",
    # Measured on an H100 (sm_90a, benchmarks/NOTES.md): IREE's fused f32 attention is the slow
    # part of the f32 transformer cases (GPT-2 block, batch 8 x 1024: 35.5 ms whole, 10.0 ms
    # decomposed; encoder 34.8 -> 5.9 ms); decomposed bf16 attention is 30-50x slower than fused.
    # Where kiln's kernels apply (sm_90a), attention its kernel takes stays whole in any dtype
    # (compiler/importer.py): the kernel computes it (GPT-2 f32: 0.53 ms against 8.0 decomposed).
    fused_attention_dtypes=("bfloat16", "float16"),
    levers=(KEEP_ASSERTIONS,),
    out_variants=True,  # results go into tensors torch allocates: IREE 3.13 cannot export its own
)
