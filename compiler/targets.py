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
import sys
from collections.abc import Callable
from dataclasses import dataclass, field

from kiln.errors import KilnError
from kiln.runtime.devices import CPU_DRIVER_CHOICES, CPU_STACK_ALLOCATION_LIMIT, host_cpu_model

from .cpu_kernels.features import KernelIsa, kernel_isa
from .levers import Lever
from .options import CompileOptions

STAGE = "target"


@dataclass(frozen=True)
class DescribedArch:
    """An architecture IREE's flag cannot name, described in full by a module attribute instead:
    `hal.device.targets` with an `#iree_gpu.target` (ISA, shared memory, SM count) overrides the
    flag's target, so IREE's own code is built for the real GPU."""

    arch: str  # what the manifest and the passes call it, e.g. "sm_90a"
    aliases: tuple[str, ...]  # requested names (after _resolve's normalization) that mean it
    device_targets: str  # the module's `hal.device.targets` attribute
    summary: str  # what the description says, for the manifest
    kernels: bool = False  # whether kiln's own contraction kernels (compiler/kernels/) run on it


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


# Where IREE takes the model over. "linalg": kiln lowers to linalg-on-tensors (its own passes run
# to the end, attention is decomposed into matmuls and a softmax). "torch": kiln hands over the
# simplified torch dialect and IREE's torch input pipeline lowers it, keeping
# scaled_dot_product_attention whole (one fused attention op) and using IREE's own lowerings.
HANDOFFS = ("linalg", "torch")

# IREE drops assertions from O1 up; kiln's are the run-time checks of inputs that would otherwise
# read or write out of bounds (passes/check_index_inputs.py). Only where the module has some: kept
# assertions make IREE 3.13's CUDA codegen fail on some depthwise convolutions (EfficientNet,
# MobileViT, CoAtNet), and as a lever they are dropped, with a note, where iree-compile fails.
KEEP_ASSERTIONS = Lever(
    "assertions",
    (("--iree-opt-strip-assertions=false",),),
    needs=r"torch\.runtime\.assert|cf\.assert",
)


@dataclass(frozen=True)
class Target:
    name: str
    summary: str
    driver: str  # IREE runtime driver that loads artifacts for this target
    flags: Callable[[CompileOptions, ArchChoice | None], list[str]]
    details: Callable[[CompileOptions, ArchChoice | None], dict[str, str]]  # recorded in the manifest
    archs: GpuArchs | None = None  # GPU targets only
    # Whether kiln has contraction kernels for this target (compiler/kernels/): then the precision of
    # f32 matmuls and convolutions, and whether to use the kernels, are choices of the compile.
    kernels: bool = False
    # The default hand-off point (HANDOFFS). llvm-cpu: linalg, as IREE's fused attention is far slower
    # there; vulkan-spirv: linalg, as IREE 3.13 cannot compile fused attention for SPIR-V; rocm: unmeasured.
    handoff: str = "linalg"
    # At the torch hand-off: the query dtypes whose scaled_dot_product_attention stays whole for IREE's
    # fused attention; attention of other dtypes is decomposed (matmuls and a softmax). None: every dtype.
    fused_attention_dtypes: tuple[str, ...] | None = None
    # Dtypes the compiled functions take and return as another one, converted by the runtime at the
    # boundary and recorded in the manifest (`carried_as`). IREE demotes float64 to float32 unless told
    # otherwise; llvm-cpu keeps float64 (_cpu_flags), the GPU targets take IREE's default.
    carried_dtypes: dict[str, str] = field(default_factory=lambda: {"float64": "float32"})
    # Defaults beyond IREE's own that the backend drops where IREE fails with them (levers.py);
    # every target keeps kiln's run-time checks.
    levers: tuple[Lever, ...] = (KEEP_ASSERTIONS,)
    # Passes of kiln's pipeline this target leaves out: workarounds for another target's backend
    # that cost this one (a user's own --print-after of one is then an unknown pass).
    passes_off: tuple[str, ...] = ()


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


def _gpu_flags(options: CompileOptions, choice: ArchChoice | None) -> list[str]:
    assert choice is not None
    archs = _archs_of(options.target)
    if archs.description(choice.arch) is not None:
        return [f"--iree-hal-target-device={archs.device}"]  # the module's hal.device.targets names the arch
    return [f"--iree-hal-target-device={archs.device}", f"{archs.flag}={choice.arch}"]


def _gpu_details(options: CompileOptions, choice: ArchChoice | None) -> dict[str, str]:
    assert choice is not None
    described = _archs_of(options.target).description(choice.arch)
    return {
        "gpu_arch": choice.arch,
        "gpu_arch_requested": choice.requested or "",
        "gpu_arch_source": choice.source,
        "gpu_arch_note": choice.note or "",
        **({"gpu_target": described.summary} if described is not None else {}),
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
    known=(*_NVIDIA_SM, *_NVIDIA_NAMES),
    # Not sm_89, though newer (its PTX also ran on an H200): it sets Ada's 99 KiB of workgroup memory
    # (sm_80: 163 KiB; Hopper has 227), adds only fp8 mma, and its PTX 8.4 needs a CUDA 12.4 driver,
    # where sm_80's PTX 7.6 loads on every driver that supports Hopper.
    newer="sm_80",
    newer_why="whose PTX the CUDA driver JIT-compiles for the newer GPU",
    detect=_local_nvidia_arch,
    described=(SM90A,),
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
        carried_dtypes={},
        levers=(KEEP_ASSERTIONS, DATA_TILING, CHANNELS_LAST, BATCH_MATMUL_TRANSPOSES),
        # A strided 1x1 convolution as a strided slice and a 1x1 convolution works around a CUDA
        # miscompile; on the CPU, IREE fuses the slice into the convolution as a strided read and
        # the dispatch runs 20-200x slower (ResNet-18's downsampling shortcuts: the whole f32 model
        # 3x slower), where the strided convolution itself compiles well.
        passes_off=("slice-strided-pointwise-conv",),
    ),
    "cuda": Target(
        name="cuda",
        summary="NVIDIA GPUs through CUDA (PTX, JIT-compiled by the driver at load)",
        driver="cuda",
        flags=_gpu_flags,
        details=_gpu_details,
        archs=CUDA_ARCHS,
        kernels=True,
        # Measured on an H200 over the benchmark suite (benchmarks/NOTES.md): bf16 cases 3x faster
        # (geomean; up to 33x where attention and bf16 matmuls stay whole), f32 cases 1.09x slower.
        handoff="torch",
        # Measured on an H100 (sm_90a, benchmarks/NOTES.md): IREE's fused f32 attention is the slow
        # part of the f32 transformer cases (GPT-2 block, batch 8 x 1024: 35.5 ms whole, 10.0 ms
        # decomposed; encoder 34.8 -> 5.9 ms); decomposed bf16 attention is 30-50x slower than fused.
        # Where kiln's kernels apply (sm_90a), attention its kernel takes stays whole in any dtype
        # (compiler/importer.py): the kernel computes it (GPT-2 f32: 0.53 ms against 8.0 decomposed).
        fused_attention_dtypes=("bfloat16", "float16"),
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
    iree_flags: tuple[str, ...]  # everything iree-compile is given, but for the levers' flags
    details: dict[str, str]
    # String attributes set on the module before kiln's passes run (`kiln.target`, `kiln.gpu_arch`, ...):
    # what passes that depend on the target read (passes never import the compiler).
    module_attributes: dict[str, str]
    device_targets: str | None  # the module's `hal.device.targets` for iree-compile, where a flag cannot say it
    # Whether the backend generates kiln's GPU contraction kernels: a target with kernels, on an arch
    # they run on (sm_90a), at the torch hand-off, with --kernels on (outline-contractions checks the
    # same on the module's attributes).
    kernels: bool = False
    levers: tuple[Lever, ...] = ()  # the target's levers (those the module has ops for apply)
    user_flags: int = 0  # how many of `iree_flags` (the last ones) the user gave: levers go before them
    # llvm-cpu: the paths of kiln's CPU kernel the CPU has (cpu_kernels/), None where it has none or
    # kernels are off; and whether attention's matmuls take it with their operands rounded to bf16.
    cpu_kernels: KernelIsa | None = None
    cpu_attention: str = "bf16"

    def flags_with(self, lever_flags: tuple[str, ...]) -> tuple[str, ...]:
        """Every flag for iree-compile: kiln's, then the levers', then the user's (which override both)."""
        split = len(self.iree_flags) - self.user_flags
        return (*self.iree_flags[:split], *lever_flags, *self.iree_flags[split:])

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
        *options.extra_iree_flags,
    )
    details = {**target.details(options, arch), "handoff": handoff}
    cpu_kernels, cpu_attention = _cpu_choices(options, target, handoff, details)
    attributes = {"kiln.target": target.name, "kiln.handoff": handoff}
    if arch is not None:
        attributes["kiln.gpu_arch"] = arch.arch
    if target.kernels:
        choices = _contraction_choices(options)
        details.update(choices)
        attributes.update({f"kiln.{name}": value for name, value in choices.items()})
    if options.tuned is not None:
        details["tuned"] = options.tuned
    described = target.archs.description(arch.arch) if target.archs is not None and arch is not None else None
    device_targets = described.device_targets if described is not None else None
    kernels = target.kernels and described is not None and described.kernels and handoff == "torch" and options.kernels == "on"
    if target.kernels:
        details["kernels"] = "on" if kernels else "off"  # what the compile does, not only what was asked
    return ResolvedTarget(
        target,
        arch,
        handoff,
        options.params,
        flags,
        details,
        module_attributes=attributes,
        device_targets=device_targets,
        kernels=kernels,
        levers=target.levers,
        user_flags=len(options.extra_iree_flags),
        cpu_kernels=cpu_kernels,
        cpu_attention=cpu_attention,
    )


# PyTorch's names for the precision of f32 matmuls (torch.set_float32_matmul_precision): "highest" is
# f32 (kiln's kernels: tf32x3, f32-class accuracy), "high" and "medium" allow TF32. f32 convolutions
# take "highest" or "high" alike; PyTorch's default for them on CUDA is TF32 (cuDNN's allow_tf32).
MATMUL_PRECISIONS = ("highest", "high", "medium")
CONV_PRECISIONS = ("highest", "high")
KERNEL_CHOICES = ("on", "off")
CPU_ATTENTION_CHOICES = ("f32", "bf16")


def _cpu_choices(
    options: CompileOptions, target: Target, handoff: str, details: dict[str, str]
) -> tuple[KernelIsa | None, str]:
    """llvm-cpu: which paths of kiln's CPU kernel apply, attention's precision, the runtime driver;
    recorded in `details`. The kernel rewrites kiln's linalg, so the torch hand-off leaves it out."""
    for name, value, known in (
        ("--kernels", options.kernels, KERNEL_CHOICES),
        ("--cpu-attention", options.cpu_attention, CPU_ATTENTION_CHOICES),
        ("--cpu-driver", options.cpu_driver, CPU_DRIVER_CHOICES),
    ):
        if value not in known:
            raise KilnError(f"unknown {name} '{value}'; known: {', '.join(known)}", stage=STAGE)
    if target.name != "llvm-cpu":
        return None, "f32"
    isa = kernel_isa(options.cpu) if options.kernels == "on" and handoff == "linalg" else None
    details["kernels"] = isa.name if isa is not None else "off"
    details["cpu_attention"] = options.cpu_attention
    details["cpu_driver"] = options.cpu_driver
    return isa, options.cpu_attention


def _contraction_choices(options: CompileOptions) -> dict[str, str]:
    """How f32 contractions are computed, and whether kiln's kernels are used: from the options, else
    from PyTorch's own settings in this process, as eager PyTorch would run them."""
    matmul = options.matmul_precision or _torch_matmul_precision()
    conv = options.conv_precision or _torch_conv_precision()
    if matmul not in MATMUL_PRECISIONS:
        raise KilnError(f"unknown matmul precision '{matmul}'; known: {', '.join(MATMUL_PRECISIONS)}", stage=STAGE)
    if conv not in CONV_PRECISIONS:
        raise KilnError(f"unknown convolution precision '{conv}'; known: {', '.join(CONV_PRECISIONS)}", stage=STAGE)
    return {"matmul_precision": matmul, "conv_precision": conv, "kernels": options.kernels}


def _torch_matmul_precision() -> str:
    """torch.get_float32_matmul_precision() where torch is loaded; else its default, "highest"
    (without torch imported, nothing can have changed it)."""
    torch = sys.modules.get("torch")
    return torch.get_float32_matmul_precision() if torch is not None else "highest"


def _torch_conv_precision() -> str:
    """"high" (TF32) when cuDNN may use TF32 for f32 convolutions, PyTorch's default; else "highest"."""
    torch = sys.modules.get("torch")
    return "high" if torch is None or torch.backends.cudnn.allow_tf32 else "highest"


WEIGHT_POLICIES = ("auto", "inline", "external")
AUTO_EXTERNAL_BYTES = 256 * 1024 * 1024  # `auto` keeps weights external above this


def _archs_of(target_name: str) -> GpuArchs:
    archs = get_target(target_name).archs
    assert archs is not None, f"{target_name} is not a GPU target"
    return archs
