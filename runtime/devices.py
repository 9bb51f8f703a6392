"""Choosing the IREE device an artifact runs on.

Users say `cpu`, `cuda`, `cuda:1` or `vulkan`; the manifest says which driver the artifact was
compiled for. A missing driver or device is an error that says so, never a hang or a crash.
"""

from __future__ import annotations

import ctypes
import functools
import os
import platform
import re
import sys

import iree.runtime as rt

from kiln.errors import KilnError

# User-facing device kind -> IREE driver. CPU artifacts use the multithreaded task driver, and where
# the compile left the choice to kiln, the single-threaded sync one for calls it finds faster there
# (kiln.runtime.executors); --cpu-driver fixes one of them.
DRIVERS: dict[str, str] = {"cpu": "local-task", "cuda": "cuda", "vulkan": "vulkan", "rocm": "hip"}
KIND_OF_DRIVER: dict[str, str] = {**{driver: kind for kind, driver in DRIVERS.items()}, "local-sync": "cpu"}
CPU_DRIVERS = ("local-task", "local-sync")
CPU_DRIVER_CHOICES = ("auto", *CPU_DRIVERS)  # what a compile may ask for; `auto`: timed per input signature
NAMES: dict[str, str] = {"cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan", "rocm": "ROCm"}

STAGE = "runtime"

# CPU artifacts may use up to CPU_STACK_ALLOCATION_LIMIT bytes of stack per dispatch (see the
# llvm-cpu target), and kiln gives IREE's workers (128 KiB by default) twice that, once per process.
# 1 MiB: GPT-2's first layer norm at 8 x 512 tokens, which IREE fuses with the token and position
# embeddings' gather and sum, needs 792 KiB (plain torch-mlir -> IREE cannot compile it either);
# Llama-3.2-1B's attention over a 1,024-position KV cache (`--generate`) 136 KiB.
CPU_STACK_ALLOCATION_LIMIT = 1024 * 1024
CPU_WORKER_STACK_BYTES = 2 * CPU_STACK_ALLOCATION_LIMIT

# GPU devices keep the buffers a call frees for the next call's (IREE's caching allocator, at most 64
# buffers a memory heap). IREE's own allocator gets host-visible memory from the driver on every call:
# an artifact that reads a value back mid-call, as kiln's index checks do, paid about 1.5 ms a call
# for it on the H200 (a one-embedding model: 1.6-1.8 -> 0.11-0.12 ms; GPT-2 prefill, 1x512 bf16:
# 3.0 -> 1.5 ms; BERT-base 32x128 bf16: 4.5-5.0 -> 3.0-3.3 ms; ConvNeXt-T, no read-back: 21.7 either way).
GPU_ALLOCATORS = ["caching"]


def open_device(requested: str | None, artifact_driver: str, cpu_features: tuple[str, ...] = ()) -> rt.HalDevice:
    """Open the device named by `requested` (default: the artifact's own driver); a CPU artifact whose
    code needs `cpu_features` (LLVM's names) is checked against this CPU first."""
    artifact_kind = KIND_OF_DRIVER.get(artifact_driver, artifact_driver)
    kind, index = _parse(requested or artifact_kind)
    if kind != artifact_kind:
        raise KilnError(
            f"this artifact targets {artifact_kind}; it cannot run on device '{requested}'",
            stage=STAGE,
            hint=f"load it with device='{artifact_kind}', or recompile with --target for {kind}",
        )
    driver_name = artifact_driver if kind == "cpu" and artifact_driver in CPU_DRIVERS else DRIVERS[kind]
    # Compiling for a GPU works anywhere; running needs the GPU, its driver library and (Vulkan) the loader.
    cross_compiled = f"copy the .vmfb and its .json to a machine with a {NAMES[kind]} device and load it there"
    if kind == "cpu":
        _reserve_worker_stacks()  # before the driver: it starts its workers when it is made
    try:
        driver = rt.get_driver(driver_name)
        devices = driver.query_available_devices()
    except Exception as exc:
        raise KilnError(
            f"this artifact targets {kind}; no {NAMES[kind]} device is visible ({iree_reason(exc)})",
            stage=STAGE,
            hint=cross_compiled,
        ) from exc
    if not devices:
        raise KilnError(
            f"this artifact targets {kind}; no {NAMES[kind]} device is visible", stage=STAGE, hint=cross_compiled
        )
    if index >= len(devices):
        raise KilnError(
            f"device '{requested}' does not exist: {len(devices)} {kind} device(s) visible", stage=STAGE
        )
    if kind == "cpu":
        check_cpu_features(cpu_features)
        return rt.get_device(driver_name)
    return driver.create_device(devices[index]["device_id"], allocators=GPU_ALLOCATORS)


def placement(requested: str | None, artifact_driver: str) -> tuple[str, int]:
    """(kind, index) of the device `open_device` opens for these arguments, e.g. ("cuda", 1)."""
    return _parse(requested or KIND_OF_DRIVER.get(artifact_driver, artifact_driver))


def open_sync_cpu() -> rt.HalDevice:
    """IREE's single-threaded CPU device, which runs a call on the caller's thread (kiln.runtime.executors)."""
    return rt.get_device("local-sync")


def _parse(device: str) -> tuple[str, int]:
    kind, _, index = device.partition(":")
    if kind not in DRIVERS:
        raise KilnError(f"unknown device '{device}'; known: {', '.join(DRIVERS)} (e.g. 'cuda:1')", stage=STAGE)
    if index and not index.isdigit():
        raise KilnError(f"bad device index in '{device}'; expected e.g. '{kind}:0'", stage=STAGE)
    return kind, int(index or 0)


def iree_reason(exc: Exception) -> str:
    """IREE's words for a failure without its C source location, e.g. "CUDA driver library ... not available"."""
    for line in str(exc).splitlines():
        match = _IREE_STATUS.search(line)
        if match:
            return match.group(1).strip().rstrip(":;").strip()
    lines = str(exc).strip().splitlines()
    return lines[0] if lines else type(exc).__name__


# ".../cuda_dynamic_symbols.c:66: UNAVAILABLE; <reason>", or from the program itself (a failed
# run-time check): "<vm>:0: FAILED_PRECONDITION; <message>;"
_IREE_STATUS = re.compile(r"(?:\.c|<vm>):\d+: [A-Z_]+; (.+)")


@functools.cache
def _reserve_worker_stacks() -> None:
    """Must run before the CPU driver is first made: IREE reads the flag when it starts the driver's workers
    (called after it, the flag was ignored and every worker had IREE's 128 KiB)."""
    rt.flags.parse_flags(f"--task_worker_stack_size={CPU_WORKER_STACK_BYTES}")


# /proc/cpuinfo's names for the LLVM feature names manifests record (kiln's CPU kernels need these).
CPUINFO_FLAGS = {"amx-tile": "amx_tile", "amx-bf16": "amx_bf16", "avx512bf16": "avx512_bf16", "avx512f": "avx512f"}


def check_cpu_features(features: tuple[str, ...]) -> None:
    """Raise unless this CPU has `features`; where the artifact has kiln's CPU kernels and the CPU has AMX,
    ask Linux for AMX state first: the kernel takes its AMX path wherever the CPU has AMX, and an AMX
    instruction without that permission kills the process (SIGILL)."""
    if not features:
        return
    flags = host_cpu_flags()
    missing = [feature for feature in features if CPUINFO_FLAGS.get(feature, feature) not in flags]
    if missing:
        raise KilnError(
            f"this artifact's code needs CPU features this CPU lacks: {', '.join(missing)} ({host_cpu_model()})",
            stage=STAGE,
            hint="recompile for this CPU (--cpu host), or with --kernels off to leave kiln's bf16 kernels out",
        )
    if "amx_tile" in flags:
        refused = request_amx()
        if refused is not None:
            raise KilnError(
                f"this artifact runs kiln's AMX kernel, and Linux refused AMX state to this process ({refused})",
                stage=STAGE,
                hint="AMX needs Linux 5.16 or later; or recompile with --kernels off",
            )


@functools.cache
def request_amx() -> str | None:
    """Ask Linux for AMX tile data state, once per process; None when granted, else why not."""
    if sys.platform != "linux" or platform.machine() != "x86_64":
        return f"not x86-64 Linux ({sys.platform}, {platform.machine()})"
    libc = ctypes.CDLL(None, use_errno=True)
    # arch_prctl(ARCH_REQ_XCOMP_PERM, XFEATURE_XTILEDATA): syscall 158, 0x1023, 18
    if libc.syscall(158, 0x1023, 18) == 0:
        return None
    errno = ctypes.get_errno()
    return f"arch_prctl(ARCH_REQ_XCOMP_PERM) failed: {os.strerror(errno)}"


@functools.cache
def host_cpu_flags() -> frozenset[str]:
    """This machine's CPU flags as /proc/cpuinfo lists them (empty where there is none)."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("flags"):
                    return frozenset(line.split(":", 1)[1].split())
    except OSError:
        pass
    return frozenset()


def host_cpu_model() -> str:
    """This machine's CPU model name, e.g. "Intel(R) Xeon(R) Processor @ 2.80GHz", for manifests and reports."""
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"
