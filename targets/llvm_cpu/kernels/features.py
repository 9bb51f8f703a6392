"""Which of kiln's CPU kernel paths a target CPU can run: AMX, AVX512-BF16, AVX-512F, or none.

kiln's contraction kernel (kiln_gemm_*.c) has two bf16 paths over one packed weight layout, AMX tiles
(TDPBF16PS) and AVX512-BF16 (VDPBF16PS), and an f32 path of AVX-512F FMAs, which every CPU with
either bf16 path has too. A compile for an LLVM CPU name takes the features that
name implies (LLVM's x86 tables, for the names that have either feature); `host` takes this
machine's, from /proc/cpuinfo. IREE ORs the compile target's features into what the kernel sees at
run time, so an artifact for an AMX CPU always runs the AMX path: the manifest records what it
needs, and the runtime checks the CPU and asks Linux for AMX state before the first call.
"""

from __future__ import annotations

import functools
import platform
from dataclasses import dataclass

from kiln.runtime.devices import CPUINFO_FLAGS, host_cpu_flags

# LLVM x86 CPU names (clang's -march) and the kernel path their features allow.
_AMX_CPUS = ("sapphirerapids", "emeraldrapids", "graniterapids", "graniterapids-d", "diamondrapids")
_AVX512_BF16_CPUS = ("cooperlake", "znver4", "znver5", "znver6")


_AVX512F_CPUS = (
    "skylake-avx512", "cascadelake", "cannonlake", "icelake-client", "icelake-server", "tigerlake",
    "rocketlake", "x86-64-v4",
)  # fmt: skip


@dataclass(frozen=True)
class KernelIsa:
    """What kiln's kernel can run on a CPU: its bf16 path (by name) and the CPU features (LLVM's
    spelling) an artifact using that path needs; `bf16` False: the f32 path only."""

    name: str  # "amx", "avx512bf16" or "avx512f"
    features: tuple[str, ...]
    bf16: bool = True


AMX = KernelIsa("amx", ("amx-tile", "amx-bf16", "avx512bf16"))
AVX512_BF16 = KernelIsa("avx512bf16", ("avx512bf16",))
AVX512F = KernelIsa("avx512f", ("avx512f",), bf16=False)
F32_FEATURES = AVX512F.features  # what an artifact using the f32 path needs (every path's CPUs have it)


def kernel_isa(cpu: str) -> KernelIsa | None:
    """The kernel paths for LLVM CPU `cpu` ("host": this machine), or None when it has no AVX-512."""
    name = cpu.strip().lower()
    if name == "host":
        return _host_isa()
    if name in _AMX_CPUS:
        return AMX
    if name in _AVX512_BF16_CPUS:
        return AVX512_BF16
    if name in _AVX512F_CPUS:
        return AVX512F
    return None


@functools.cache
def _host_isa() -> KernelIsa | None:
    if platform.machine() not in ("x86_64", "AMD64"):
        return None
    flags = host_cpu_flags()
    for isa in (AMX, AVX512_BF16, AVX512F):
        if all(CPUINFO_FLAGS[feature] in flags for feature in isa.features):
            return isa
    return None
