"""Choosing the IREE device an artifact runs on.

Users say `cpu`, `cuda`, `cuda:1` or `vulkan`; the manifest says which driver the artifact was
compiled for. A missing driver or device is an error that says so, never a hang or a crash.
"""

from __future__ import annotations

import functools
import platform
import re

import iree.runtime as rt

from kiln.errors import KilnError

# User-facing device kind -> IREE driver. The CPU artifacts use the multithreaded task driver.
DRIVERS: dict[str, str] = {"cpu": "local-task", "cuda": "cuda", "vulkan": "vulkan", "rocm": "hip"}
KIND_OF_DRIVER: dict[str, str] = {driver: kind for kind, driver in DRIVERS.items()}
NAMES: dict[str, str] = {"cpu": "CPU", "cuda": "CUDA", "vulkan": "Vulkan", "rocm": "ROCm"}

STAGE = "runtime"

# CPU artifacts may use up to CPU_STACK_ALLOCATION_LIMIT bytes of stack per dispatch (see the
# llvm-cpu target); IREE's workers get 128 KiB by default, so kiln doubles that, once per process.
CPU_STACK_ALLOCATION_LIMIT = 128 * 1024
CPU_WORKER_STACK_BYTES = 2 * CPU_STACK_ALLOCATION_LIMIT


def open_device(requested: str | None, artifact_driver: str) -> rt.HalDevice:
    """Open the device named by `requested` (default: the artifact's own driver)."""
    artifact_kind = KIND_OF_DRIVER.get(artifact_driver, artifact_driver)
    kind, index = _parse(requested or artifact_kind)
    if kind != artifact_kind:
        raise KilnError(
            f"this artifact targets {artifact_kind}; it cannot run on device '{requested}'",
            stage=STAGE,
            hint=f"load it with device='{artifact_kind}', or recompile with --target for {kind}",
        )
    driver_name = DRIVERS[kind]
    # Compiling for a GPU works anywhere; running needs the GPU, its driver library and (Vulkan) the loader.
    cross_compiled = f"copy the .vmfb and its .json to a machine with a {NAMES[kind]} device and load it there"
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
        _reserve_worker_stacks()
        return rt.get_device(driver_name)
    return driver.create_device(devices[index]["device_id"])


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
    """Must run before the first CPU device is made: IREE reads the flag when it starts its workers."""
    rt.flags.parse_flags(f"--task_worker_stack_size={CPU_WORKER_STACK_BYTES}")


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
