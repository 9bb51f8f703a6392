"""Where an artifact can run: each target's IREE device, flags and runtime driver.

A target is data. The pipeline asks a target for its iree-compile flags and the runtime driver
that will load the result; nothing else in kiln branches on the target's name.
"""

from __future__ import annotations

import platform
from collections.abc import Callable
from dataclasses import dataclass

from kiln.errors import KilnError

from .options import CompileOptions


@dataclass(frozen=True)
class Target:
    name: str
    summary: str
    driver: str  # IREE runtime driver that loads artifacts for this target
    flags: Callable[[CompileOptions], list[str]]
    details: Callable[[CompileOptions], dict[str, str]]  # recorded in the manifest


def _cpu_flags(options: CompileOptions) -> list[str]:
    return [
        "--iree-hal-target-device=local",
        "--iree-hal-local-target-device-backends=llvm-cpu",
        f"--iree-llvmcpu-target-cpu={options.cpu}",
        # IREE 3.13 emulates bf16 arithmetic in f32 on CPUs without avx512bf16, and that rewrite
        # breaks on weight constants inlined into a dispatch ("'arith.constant' op failed to verify").
        # Keeping constants out of dispatches avoids it at the cost of one binding per constant.
        "--iree-flow-inline-constants-max-byte-length=0",
    ]


def _cpu_details(options: CompileOptions) -> dict[str, str]:
    details = {"cpu": options.cpu, "machine": platform.machine()}
    if options.cpu == "host":
        details["host_cpu"] = _host_cpu_model()
    return details


def _host_cpu_model() -> str:
    try:
        with open("/proc/cpuinfo") as cpuinfo:
            for line in cpuinfo:
                if line.startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


TARGETS: dict[str, Target] = {
    "llvm-cpu": Target(
        name="llvm-cpu",
        summary="this machine's CPU (or another one with --cpu), through LLVM",
        driver="local-task",
        flags=_cpu_flags,
        details=_cpu_details,
    ),
}


def get_target(name: str) -> Target:
    if name not in TARGETS:
        raise KilnError(f"unknown target '{name}'; known targets: {', '.join(TARGETS)}", stage="target")
    return TARGETS[name]
