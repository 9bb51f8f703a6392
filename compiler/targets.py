"""Where an artifact can run: each target's IREE device, flags, runtime driver and architectures.

A target is data. The pipeline asks a target for its iree-compile flags and the runtime driver
that will load the result; nothing else in kiln branches on the target's name. A GPU target also
says which architectures IREE compiles for, how to find the local GPU's, and what to build when
IREE lacks the one asked for (a GPU newer than IREE's tables). A bad architecture is a KilnError
listing the known ones, raised before iree-compile runs: IREE 3.13 crashes on some unknown names.
"""

from __future__ import annotations

import functools
import platform
import re
import subprocess
from collections.abc import Callable
from dataclasses import dataclass

from kiln.errors import KilnError
from kiln.runtime.devices import CPU_STACK_ALLOCATION_LIMIT, host_cpu_model

from .options import CompileOptions

STAGE = "target"


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


# Where IREE takes the model over. "linalg": kiln lowers to linalg-on-tensors (its own passes run
# to the end, attention is decomposed into matmuls and a softmax). "torch": kiln hands over the
# simplified torch dialect and IREE's torch input pipeline lowers it, keeping
# scaled_dot_product_attention whole (one fused attention op) and using IREE's own lowerings.
HANDOFFS = ("linalg", "torch")


@dataclass(frozen=True)
class Target:
    name: str
    summary: str
    driver: str  # IREE runtime driver that loads artifacts for this target
    flags: Callable[[CompileOptions, ArchChoice | None], list[str]]
    details: Callable[[CompileOptions, ArchChoice | None], dict[str, str]]  # recorded in the manifest
    archs: GpuArchs | None = None  # GPU targets only
    # The default hand-off point (HANDOFFS). llvm-cpu: linalg, as IREE's fused attention is far slower
    # there; vulkan-spirv: linalg, as IREE 3.13 cannot compile fused attention for SPIR-V; rocm: unmeasured.
    handoff: str = "linalg"


@dataclass(frozen=True)
class ArchChoice:
    """The architecture a GPU compile is built for, and why that one."""

    requested: str | None  # asked for with gpu_arch, or the local GPU's; None when the default was taken
    arch: str  # what iree-compile is given
    source: str  # "gpu_arch", "local GPU" or "default"
    note: str | None  # one line for the user whenever `arch` is not simply what they asked for


def _cpu_flags(options: CompileOptions, arch: ArchChoice | None) -> list[str]:
    if options.gpu_arch is not None:
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
        # dispatch needs ~74 KB of stack, over IREE's 32 KB default. The runtime gives CPU workers
        # a stack of twice this limit (runtime/devices.py) so the bound stays safe.
        f"--iree-llvmcpu-stack-allocation-limit={CPU_STACK_ALLOCATION_LIMIT}",
    ]


def _cpu_details(options: CompileOptions, arch: ArchChoice | None) -> dict[str, str]:
    details = {"cpu": options.cpu, "machine": platform.machine()}
    if options.cpu == "host":
        details["host_cpu"] = host_cpu_model()
    return details


def _gpu_flags(options: CompileOptions, choice: ArchChoice | None) -> list[str]:
    assert choice is not None
    archs = _archs_of(options.target)
    return [f"--iree-hal-target-device={archs.device}", f"{archs.flag}={choice.arch}"]


def _gpu_details(options: CompileOptions, choice: ArchChoice | None) -> dict[str, str]:
    assert choice is not None
    return {
        "gpu_arch": choice.arch,
        "gpu_arch_requested": choice.requested or "",
        "gpu_arch_source": choice.source,
        "gpu_arch_note": choice.note or "",
    }


def choose_arch(target_name: str, requested: str | None) -> ArchChoice:
    """The architecture to compile `target_name` for: `requested`, else the local GPU's, else the default."""
    archs = _archs_of(target_name)
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
    # sm_90a, sm_100f: arch- and family-specific variants; IREE generates none of their extra instructions.
    name = re.sub(r"^(sm_\d+)[af]$", r"\1", requested.strip().lower())
    if name in archs.known:
        return name, None
    if archs.newer is not None and _is_newer_nvidia(name):
        return (
            archs.newer,
            f"IREE 3.13 has no target for {requested}; compiling for {archs.newer}, {archs.newer_why}",
        )
    newer = f"; NVIDIA GPUs it lacks (sm_90, sm_100, h100, ...) get {archs.newer}" if archs.newer else ""
    raise KilnError(
        f"unknown --gpu-arch '{requested}' for target {target_name}; known: {', '.join(archs.known)}{newer}",
        stage=STAGE,
    )


# NVIDIA GPUs newer than IREE 3.13's tables: sm_90 and sm_100 fail ("missing GPU target"), "hopper" and
# "h100" crash iree-compile. A GPU also runs code built for an older architecture (for CUDA, the driver
# JIT-compiles the PTX), so these get the `newer` stand-in.
_NEWER_NVIDIA_NAMES = ("hopper", "h100", "h200", "gh200", "blackwell", "b100", "b200", "gb200")


def _is_newer_nvidia(name: str) -> bool:
    match = re.fullmatch(r"sm_(\d+)", name)
    return name in _NEWER_NVIDIA_NAMES or (match is not None and int(match.group(1)) >= 90)


@functools.cache
def _local_nvidia_arch() -> str | None:
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
def _local_amd_arch() -> str | None:
    """The first local AMD GPU's gfx name (from rocm_agent_enumerator), or None."""
    try:
        result = subprocess.run(["rocm_agent_enumerator"], capture_output=True, text=True, timeout=10)
    except (OSError, subprocess.TimeoutExpired):
        return None
    # One gfx name per agent; gfx000 is the CPU.
    gpus = [name for name in result.stdout.split() if name.startswith("gfx") and name != "gfx000"]
    return gpus[0] if result.returncode == 0 and gpus else None


_NVIDIA_SM = (
    "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75", "sm_80", "sm_86", "sm_87", "sm_89", "sm_120", "sm_121",
)  # fmt: skip
_NVIDIA_NAMES = ("pascal", "volta", "turing", "ampere", "ada", "a100")
_OTHER_VULKAN = ("rdna2", "rdna3", "rdna4", "valhall", "adreno")  # AMD, ARM Mali, Qualcomm
_AMD_GFX = (
    "gfx908", "gfx90a", "gfx942", "gfx950", "mi300x",  # CDNA: MI100, MI200, MI300, MI350
    "gfx1100", "gfx1101", "gfx1151", "gfx1200", "gfx1201",  # RDNA 3 and 4
)  # fmt: skip

CUDA_ARCHS = GpuArchs(
    device="cuda",
    flag="--iree-cuda-target",
    default="sm_80",
    known=(*_NVIDIA_SM, *_NVIDIA_NAMES),
    # Not sm_89, though newer (its PTX also ran on an H200): it sets Ada's 99 KiB of workgroup memory
    # (sm_80: 163 KiB; Hopper has 227), adds only fp8 mma, and its PTX 8.4 needs a CUDA 12.4 driver,
    # where sm_80's PTX 7.6 loads on every driver that supports Hopper.
    newer="sm_80",
    newer_why="whose PTX the CUDA driver JIT-compiles for the newer GPU",
    detect=_local_nvidia_arch,
)

VULKAN_ARCHS = GpuArchs(
    device="vulkan",
    flag="--iree-vulkan-target",
    default="ampere",
    known=("ampere", "ada", "turing", "volta", "pascal", *_NVIDIA_SM, *_OTHER_VULKAN),
    newer="ampere",  # IREE gives "ampere" and "sm_80" the same SPIR-V features; "sm_90" crashes iree-compile
    newer_why="whose SPIR-V features every newer NVIDIA GPU has",
    detect=lambda: _local_nvidia_arch() or _local_amd_arch(),
)

ROCM_ARCHS = GpuArchs(
    device="hip",
    flag="--iree-rocm-target",  # IREE 3.13 has no --iree-hip-target
    default="gfx942",
    known=_AMD_GFX,
    newer=None,  # AMD machine code runs only on the ISA it was built for: no stand-in
    newer_why="",
    detect=_local_amd_arch,
)

TARGETS: dict[str, Target] = {
    "llvm-cpu": Target(
        name="llvm-cpu",
        summary="this machine's CPU (or another one with --cpu), through LLVM",
        driver="local-task",
        flags=_cpu_flags,
        details=_cpu_details,
    ),
    "cuda": Target(
        name="cuda",
        summary="NVIDIA GPUs through CUDA (PTX, JIT-compiled by the driver at load)",
        driver="cuda",
        flags=_gpu_flags,
        details=_gpu_details,
        archs=CUDA_ARCHS,
        # Measured on an H200 over the benchmark suite (benchmarks/NOTES.md): bf16 cases 3x faster
        # (geomean; up to 33x where attention and bf16 matmuls stay whole), f32 cases 1.09x slower.
        handoff="torch",
    ),
    "vulkan-spirv": Target(
        name="vulkan-spirv",
        summary="GPUs with Vulkan compute, through SPIR-V (NVIDIA, AMD, Mali, Adreno); no bf16 in IREE 3.13",
        driver="vulkan",
        flags=_gpu_flags,
        details=_gpu_details,
        archs=VULKAN_ARCHS,
    ),
    "rocm": Target(
        name="rocm",
        summary="AMD GPUs through HIP (compile-only here: kiln has not run a rocm artifact on an AMD GPU)",
        driver="hip",
        flags=_gpu_flags,
        details=_gpu_details,
        archs=ROCM_ARCHS,
    ),
}

GPU_TARGETS = tuple(name for name, target in TARGETS.items() if target.archs is not None)


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise KilnError(f"unknown target '{name}'; known targets: {', '.join(TARGETS)}", stage=STAGE)
    return TARGETS[name]


@dataclass(frozen=True)
class ResolvedTarget:
    """A compile's target with every choice made once, before any stage runs; later code reads these
    values and never derives them again. The manifest records `details`."""

    target: Target
    arch: ArchChoice | None  # GPU targets: the architecture compiled for, and why that one
    handoff: str  # HANDOFFS
    params: str  # WEIGHT_POLICIES: inline in the .vmfb, external in an .irpa beside it, or auto (by size, at import)
    iree_flags: tuple[str, ...]  # everything iree-compile is given
    details: dict[str, str]

    def external_weights(self, weight_bytes: int) -> bool:
        """Whether a model with `weight_bytes` of weights keeps them in an .irpa."""
        return self.params == "external" or (self.params == "auto" and weight_bytes > AUTO_EXTERNAL_BYTES)

    @property
    def note(self) -> str | None:
        """One line for the user when the architecture is not simply what they asked for."""
        return self.arch.note if self.arch is not None else None


def resolve(options: CompileOptions) -> ResolvedTarget:
    """Every choice `options` leave open, made now: a bad one fails here, before any work is done."""
    target = get_target(options.target)
    arch = choose_arch(target.name, options.gpu_arch) if target.archs is not None else None
    handoff = options.handoff or target.handoff
    if handoff not in HANDOFFS:
        raise KilnError(f"unknown hand-off '{handoff}'; known: {', '.join(HANDOFFS)}", stage=STAGE)
    if options.params not in WEIGHT_POLICIES:
        raise KilnError(f"unknown --params '{options.params}'; known: {', '.join(WEIGHT_POLICIES)}", stage=STAGE)
    input_type = ["--iree-input-type=torch"] if handoff == "torch" else []
    flags = (
        *target.flags(options, arch),
        *input_type,
        f"--iree-opt-level={options.opt_level}",
        # IREE drops assertions from O1 up; kiln's are the run-time checks of inputs that would
        # otherwise read or write out of bounds (passes/check_index_inputs.py).
        "--iree-opt-strip-assertions=false",
        *options.extra_iree_flags,
    )
    details = {**target.details(options, arch), "handoff": handoff}
    if options.tuned is not None:
        details["tuned"] = options.tuned
    return ResolvedTarget(target, arch, handoff, options.params, flags, details)


WEIGHT_POLICIES = ("auto", "inline", "external")
AUTO_EXTERNAL_BYTES = 256 * 1024 * 1024  # `auto` keeps weights external above this


def _archs_of(target_name: str) -> GpuArchs:
    archs = get_target(target_name).archs
    assert archs is not None, f"{target_name} is not a GPU target"
    return archs
