"""GPU architectures: which one a GPU target compiles for, how a request becomes one, and how to find
the local GPU's. Shared by the GPU rooms (cuda, vulkan_spirv, rocm), each of which lists its own.

A bad architecture is a KilnError listing the known ones, raised before iree-compile runs: IREE 3.13
crashes on some unknown names. An architecture IREE's tables lack (a GPU newer than IREE 3.13) gets a
stand-in, with a note, or a full description (DescribedArch) where the room has one.
"""

from __future__ import annotations

import functools
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from kiln.errors import KilnError
from kiln.passes import PassPlacement

from .target import Choices

if TYPE_CHECKING:
    from kiln.compiler.options import CompileOptions

STAGE = "target"

# A strided 1x1 convolution as a strided slice and a 1x1 convolution: IREE 3.13's CUDA backend
# miscompiles the stride left in (passes/slice_strided_pointwise_conv.py); the GPU rooms place it.
# Not on the CPU: there IREE fuses the slice into the convolution as a strided read and the dispatch
# runs 20-200x slower (ResNet-18's downsampling shortcuts: the whole f32 model 3x slower), where the
# strided convolution itself compiles well.
# A sum over the height and width of >= 1024 pixels (squeeze-excitation's average) as a sum over
# the width, then over the height: IREE's GPU reduction codegen unrolls such long rows where it fuses
# the averaged activation in as a second result (passes/split_spatial_sum.py).
GPU_REWRITES = PassPlacement("simplified", "expand-pow-small", ("slice-strided-pointwise-conv", "split-spatial-sum"))


def iree_code_only(options: CompileOptions, arch: ArchChoice | None, handoff: str) -> Choices:
    """The choices of a GPU room with no kernels of its own: IREE's code, with the GPU rewrites."""
    return Choices(passes=(GPU_REWRITES,))


@dataclass(frozen=True)
class DescribedArch:
    """An architecture IREE's flag cannot name, described in full by a module attribute instead:
    `hal.device.targets` with an `#iree_gpu.target` (ISA, shared memory, SM count) overrides the
    flag's target, so IREE's own code is built for the real GPU."""

    arch: str  # what the manifest and the passes call it, e.g. "sm_90a"
    aliases: tuple[str, ...]  # requested names (after _resolve's normalization) that mean it
    device_targets: str  # the module's `hal.device.targets` attribute
    summary: str  # what the description says, for the manifest
    kernels: bool = False  # whether kiln's own contraction kernels (targets/cuda/kernels/) run on it


@dataclass(frozen=True)
class GpuArchs:
    """The architectures one GPU target compiles for, and how a request becomes one of them."""

    device: str  # --iree-hal-target-device
    flag: str  # the iree-compile flag that names the architecture
    default: str  # when none is asked for and no local GPU is found
    known: tuple[str, ...]  # names IREE 3.13 compiles for (a test compiles each one)
    newer: str | None  # what a newer NVIDIA GPU (sm_90 and later) gets instead; None: no such mapping
    newer_why: str  # why `newer` runs on those GPUs, for the one-line note
    detect: Callable[[], str | None]  # the local GPU's architecture, or None
    described: tuple[DescribedArch, ...] = ()  # taken before `newer` for the names they list

    def description(self, arch: str) -> DescribedArch | None:
        return next((described for described in self.described if described.arch == arch), None)


@dataclass(frozen=True)
class ArchChoice:
    """The architecture a GPU compile is built for, and why that one."""

    requested: str | None  # asked for with gpu_arch, or the local GPU's; None when the default was taken
    arch: str  # what iree-compile is given
    source: str  # "gpu_arch", "local GPU" or "default"
    note: str | None  # one line for the user whenever `arch` is not simply what they asked for


def gpu_flags(archs: GpuArchs) -> Callable[[CompileOptions, ArchChoice | None], list[str]]:
    """A GPU target's iree-compile flags: its device, and the architecture unless a description names it."""

    def flags(options: CompileOptions, choice: ArchChoice | None) -> list[str]:
        assert choice is not None
        if archs.description(choice.arch) is not None:
            return [f"--iree-hal-target-device={archs.device}"]  # the module's hal.device.targets names the arch
        return [f"--iree-hal-target-device={archs.device}", f"{archs.flag}={choice.arch}"]

    return flags


def gpu_details(archs: GpuArchs) -> Callable[[CompileOptions, ArchChoice | None], dict[str, str]]:
    """What the manifest records of a GPU compile's architecture."""

    def details(options: CompileOptions, choice: ArchChoice | None) -> dict[str, str]:
        assert choice is not None
        described = archs.description(choice.arch)
        return {
            "gpu_arch": choice.arch,
            "gpu_arch_requested": choice.requested or "",
            "gpu_arch_source": choice.source,
            "gpu_arch_note": choice.note or "",
            **({"gpu_target": described.summary} if described is not None else {}),
        }

    return details


def choose_arch(target_name: str, archs: GpuArchs, requested: str | None) -> ArchChoice:
    """The architecture to compile `target_name` for: `requested`, else the local GPU's, else the default."""
    if requested is not None:
        arch, why = _resolve(target_name, archs, requested)
        return ArchChoice(requested, arch, "gpu_arch", f"{target_name}: {why}" if why else None)
    detected = archs.detect()
    default = f"compiling for {archs.default}, the default (choose with --gpu-arch)"
    if detected is None:
        return ArchChoice(None, archs.default, "default", f"{target_name}: no local GPU found; {default}")
    try:
        arch, why = _resolve(target_name, archs, detected)
    except KilnError:
        note = f"{target_name}: the local GPU is {detected}, which IREE 3.13 cannot compile for; {default}"
        return ArchChoice(detected, archs.default, "default", note)
    note = f"{target_name}: the local GPU is {detected}; {why or f'compiling for {arch}'}"
    return ArchChoice(detected, arch, "local GPU", note)


def _resolve(target_name: str, archs: GpuArchs, requested: str) -> tuple[str, str | None]:
    """The architecture to give iree-compile for `requested`, and why when it is another one."""
    # sm_90a, sm_100f: arch- and family-specific variants. IREE's codegen uses none of their extra
    # instructions; a described arch (sm_90a) is the one place the variant is kept, for kiln's kernels.
    name = re.sub(r"^(sm_\d+)[af]$", r"\1", requested.strip().lower())
    for described in archs.described:
        if name in described.aliases:
            return described.arch, None
    if name in archs.known:
        return name, None
    if archs.newer is not None and _is_newer_nvidia(name):
        return (
            archs.newer,
            f"IREE 3.13 has no target for {requested}; compiling for {archs.newer}, {archs.newer_why}",
        )
    described = "".join(f"; {', '.join(d.aliases)} get {d.arch}" for d in archs.described)
    newer = f"; other NVIDIA GPUs it lacks (sm_100, b200, ...) get {archs.newer}" if archs.newer else ""
    raise KilnError(
        f"unknown --gpu-arch '{requested}' for target {target_name}; known: {', '.join(archs.known)}{described}{newer}",
        stage=STAGE,
    )


# NVIDIA GPUs newer than IREE 3.13's tables: sm_90 and sm_100 fail ("missing GPU target"), "hopper" and
# "h100" crash iree-compile. A GPU also runs code built for an older architecture (for CUDA, the driver
# JIT-compiles the PTX), so these get the `newer` stand-in, unless an arch of `described` names them.
_NEWER_NVIDIA_NAMES = ("hopper", "h100", "h200", "gh200", "blackwell", "b100", "b200", "gb200")


def _is_newer_nvidia(name: str) -> bool:
    match = re.fullmatch(r"sm_(\d+)", name)
    return name in _NEWER_NVIDIA_NAMES or (match is not None and int(match.group(1)) >= 90)


@functools.cache
def local_nvidia_arch() -> str | None:
    """The first local NVIDIA GPU's compute capability as "sm_XY" (from nvidia-smi), or None."""
    try:
        result = subprocess.run(
            ["nvidia-smi", "--query-gpu=compute_cap", "--format=csv,noheader"],
            capture_output=True,
            text=True,
            timeout=10,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    match = re.match(r"(\d+)\.(\d+)\s*$", result.stdout.splitlines()[0] if result.stdout else "")
    if result.returncode != 0 or match is None:
        return None
    return f"sm_{match.group(1)}{match.group(2)}"


@functools.cache
def local_amd_arch() -> str | None:
    """The first local AMD GPU's gfx name (from rocm_agent_enumerator), or None."""
    try:
        result = subprocess.run(["rocm_agent_enumerator"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # One gfx name per agent; gfx000 is the CPU.
    gpus = [name for name in result.stdout.split() if name.startswith("gfx") and name != "gfx000"]
    return gpus[0] if result.returncode == 0 and gpus else None


# NVIDIA architectures IREE 3.13 knows by name, for the cuda and vulkan-spirv rooms.
NVIDIA_SM = (
    "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_120", "sm_121",
)  # fmt: skip
NVIDIA_NAMES = ("pascal", "volta", "turing", "ampere", "ada", "a100")
