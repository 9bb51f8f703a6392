"""vulkan-spirv: GPUs with Vulkan compute, through SPIR-V (NVIDIA, AMD, Mali, Adreno).

IREE's code only: kiln has no kernels of its own here, and IREE 3.13 has no bf16 for SPIR-V nor fused
attention (the hand-off is linalg, attention decomposed).
"""

from __future__ import annotations

from ..gpu import (
    NVIDIA_SM,
    GpuArchs,
    gpu_details,
    gpu_flags,
    iree_code_only,
    local_amd_arch,
    local_nvidia_arch,
)
from ..levers import KEEP_ASSERTIONS
from ..target import Target

OTHER_VULKAN = ("rdna2", "rdna3", "rdna4", "valhall", "adreno")  # AMD, ARM Mali, Qualcomm

VULKAN_ARCHS = GpuArchs(
    device="vulkan",
    flag="--iree-vulkan-target",
    default="ampere",
    known=("ampere", "ada", "turing", "volta", "pascal", *NVIDIA_SM, *OTHER_VULKAN),
    newer="ampere",  # IREE gives "ampere" and "sm_80" the same SPIR-V features; "sm_90" crashes iree-compile
    newer_why="whose SPIR-V features every newer NVIDIA GPU has",
    detect=lambda: local_nvidia_arch() or local_amd_arch(),
)

TARGET = Target(
    name="vulkan-spirv",
    summary="GPUs with Vulkan compute, through SPIR-V (NVIDIA, AMD, Mali, Adreno); no bf16 in IREE 3.13",
    driver="vulkan",
    flags=gpu_flags(VULKAN_ARCHS),
    details=gpu_details(VULKAN_ARCHS),
    choose=iree_code_only,
    archs=VULKAN_ARCHS,
    levers=(KEEP_ASSERTIONS,),
)
