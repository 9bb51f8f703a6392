"""Timing calls the same way for every contender, and the machine the times were taken on.

Every timed call ends fully synchronized (the caller passes the synchronization), after untimed
warm-up calls; the statistics are taken over the timed calls. On the CPU, `use_threads` gives
torch and IREE's task pool the same number of threads, and `others_share` says how much of the
CPUs other processes took meanwhile. Needs torch and iree-base-runtime, never the compiler.
"""

from __future__ import annotations

import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import iree.runtime as rt
import torch

from kiln.runtime.devices import KIND_OF_DRIVER, host_cpu_model
from kiln.runtime.manifest import package_versions


@dataclass(frozen=True)
class Settings:
    warmup: int = 5  # untimed calls first (fewer once they take half of budget_s; at least one)
    iterations: int = 50  # timed calls, at most ...
    budget_s: float = 10.0  # ... or fewer once this much time has passed (at least 3 are always timed)
    inductor: bool = True  # also time torch.compile


def measure(call: Callable[[], Any], sync: Callable[[], None], settings: Settings) -> list[int]:
    """Nanoseconds of each timed call of `call` (each followed by `sync`), after `settings.warmup` calls."""
    return measure_alternating([call], sync, settings)[0]


def measure_alternating(calls: Sequence[Callable[[], Any]], sync: Callable[[], None], settings: Settings) -> list[list[int]]:
    """`measure` for several ways of making the same call, one of each in turn, so that a drift of
    the machine (clocks, other work) falls on each alike: their differences are then the calls'.
    The budget is `settings.budget_s` for each."""
    warmup_deadline = time.perf_counter_ns() + int(len(calls) * settings.budget_s * 1e9 / 2)
    for index in range(settings.warmup):
        if index and time.perf_counter_ns() > warmup_deadline:
            break
        for call in calls:
            call()
            sync()
    samples: list[list[int]] = [[] for _ in calls]
    deadline = time.perf_counter_ns() + int(len(calls) * settings.budget_s * 1e9)
    while len(samples[0]) < settings.iterations and (len(samples[0]) < 3 or time.perf_counter_ns() < deadline):
        for call, times in zip(calls, samples, strict=True):
            start = time.perf_counter_ns()
            call()
            sync()
            times.append(time.perf_counter_ns() - start)
    return samples


def use_threads(count: int) -> None:
    """Run torch and IREE's CPU task pool on `count` threads each.

    IREE reads the flag when it creates its CPU device, once per process: call this before the
    first artifact is loaded.
    """
    torch.set_num_threads(count)
    rt.flags.parse_flags(f"--task_topology_group_count={count}")


def fresh_inductor_cache(path: str) -> None:
    """Point Inductor (and Triton under it) at an empty cache folder, so its compile time is a cold one."""
    os.environ["TORCHINDUCTOR_CACHE_DIR"] = path
    os.environ["TRITON_CACHE_DIR"] = os.path.join(path, "triton")


def torch_device_for(driver: str, device: str | None) -> str:
    """The torch device to compare with, for artifacts of IREE `driver` on `device` ("cuda:1", say).

    Every GPU maps to torch's "cuda" device of the same index: torch's ROCm builds call AMD GPUs
    "cuda" too, and a Vulkan artifact is assumed to run on the GPU torch sees first.
    """
    if KIND_OF_DRIVER.get(driver, driver) == "cpu":
        return "cpu"
    return f"cuda:{(device or '').partition(':')[2] or 0}"


def environment(torch_device: str) -> tuple[dict[str, Any], dict[str, str]]:
    """(machine, versions) for a report: CPU model, cores, threads, GPU; the packages that made the numbers."""
    machine: dict[str, Any] = {
        "cpu": host_cpu_model(),
        "cores": os.cpu_count(),
        "threads": torch.get_num_threads(),
        "platform": platform.platform(),
        "load_average": [round(load, 2) for load in os.getloadavg()],  # other work competing for the CPU
    }
    if torch_device.startswith("cuda"):
        machine["gpu"] = torch.cuda.get_device_name(torch.device(torch_device))
        # torch's own defaults, which eager and Inductor run with: f32 matmuls in f32, f32 convolutions in TF32.
        machine["torch_tf32"] = {
            "matmul": torch.backends.cuda.matmul.allow_tf32,
            "cudnn": torch.backends.cudnn.allow_tf32,
        }
    names = ("torchkiln", "torch", "iree-base-runtime", "iree-base-compiler", "torch-mlir", "triton", "numpy")
    versions = package_versions(names)
    versions["python"] = platform.python_version()
    return machine, versions


@dataclass(frozen=True)
class CpuClock:
    """A reading of the machine's busy CPU time and this process's own, for `others_share`."""

    busy_s: float  # all processes, from /proc/stat
    own_s: float  # this process and its children
    wall_s: float


def cpu_clock() -> CpuClock | None:
    """None where /proc/stat is missing (not Linux)."""
    try:
        with open("/proc/stat") as stat:
            fields = [int(value) for value in stat.readline().split()[1:]]
    except (OSError, ValueError):
        return None
    user, nice, system, _idle, _iowait, irq, softirq, steal = (fields + [0] * 8)[:8]
    times = os.times()
    own = times.user + times.system + times.children_user + times.children_system
    busy = (user + nice + system + irq + softirq + steal) / os.sysconf("SC_CLK_TCK")
    return CpuClock(busy, own, time.perf_counter())


def others_share(start: CpuClock | None, end: CpuClock | None) -> float | None:
    """The share of all CPUs that other processes used between two readings: near 0 on a quiet machine.

    On a busy one, torch's CPU timings suffer most: its OpenMP threads wait for each other, and a
    thread that loses its core holds up the whole operation.
    """
    if start is None or end is None or end.wall_s <= start.wall_s:
        return None
    others = (end.busy_s - start.busy_s) - (end.own_s - start.own_s)
    return round(max(others, 0.0) / ((end.wall_s - start.wall_s) * (os.cpu_count() or 1)), 3)
