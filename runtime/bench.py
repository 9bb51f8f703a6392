"""Timing a loaded kiln artifact against eager PyTorch and torch.compile, same device, same inputs.

`bench` checks kiln's outputs against eager's, then times each side. Every timed call ends fully
synchronized, so the sides measure the same thing:
- kiln: IREE's call returns only once its results are ready (the module's synchronous `main`
  waits on the device's fence before returning), so no extra synchronization is needed. It is
  timed twice: with inputs already on the device and results left there ("kiln", the number the
  ratios use, as torch's tensors also stay on the device), and as users call it, `module(*tensors)`
  with host tensors in and host tensors out ("kiln_call": the copies are in the time).
- eager and Inductor: each call is followed by `torch.cuda.synchronize()` on a GPU.
On the CPU, `use_threads` gives torch and IREE's task pool the same number of threads, and
`others_share` says how much of the CPUs other processes took meanwhile.
"""

from __future__ import annotations

import importlib.metadata
import math
import os
import platform
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import iree.runtime as rt
import torch

from .bench_results import Numerics, Timing
from .devices import KIND_OF_DRIVER, host_cpu_model
from .module import LoadedModule
from .tensors import to_device, to_host_array

# Tolerance on ||kiln - eager|| / ||eager||: float32 (with a GPU's TF32 convolutions) and bfloat16.
REL_L2_TOLERANCE: dict[torch.dtype, float] = {torch.float32: 1e-3, torch.bfloat16: 3e-2, torch.float16: 1e-2}


@dataclass(frozen=True)
class Settings:
    warmup: int = 5  # untimed calls first (fewer once they take half of budget_s; at least one)
    iterations: int = 50  # timed calls, at most ...
    budget_s: float = 10.0  # ... or fewer once this much time has passed (at least 3 are always timed)
    inductor: bool = True  # also time torch.compile


def bench(
    module: LoadedModule,
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    settings: Settings,
    device: str | None = None,
    kiln_compile_s: float | None = None,
) -> tuple[Numerics, dict[str, Timing], str | None]:
    """Check `module` against `model`, then time kiln, kiln's plain call, eager and Inductor.

    Returns the numerics check, the timings by contender, and an error for a contender that could
    not be timed (Inductor failing to compile the model, say), or None.
    """
    torch_device = torch_device_for(module.manifest.driver, device)
    sync = torch.cuda.synchronize if torch_device.startswith("cuda") else _nothing
    host_inputs = tuple(x.detach().cpu().contiguous() for x in inputs)
    device_inputs = tuple(x.to(torch_device) for x in host_inputs)
    model = model.to(torch_device).eval()
    with torch.no_grad():
        expected = _as_tuple(model(*device_inputs))
        numerics = check_numerics(_as_tuple(module(*host_inputs)), expected)
        uploaded = _upload(module, host_inputs)
        timings = {
            "kiln": Timing.of(measure(lambda: module.call_on_device(*uploaded), _nothing, settings), kiln_compile_s),
            "kiln_call": Timing.of(measure(lambda: module(*host_inputs), _nothing, settings)),
            "eager": Timing.of(measure(lambda: model(*device_inputs), sync, settings), 0.0),
        }
        error = None
        if settings.inductor:
            try:
                timings["inductor"] = _time_inductor(model, device_inputs, sync, settings)
            except Exception as exc:  # Inductor's failure is a finding, not the end of the run
                error = f"torch.compile failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return numerics, timings, error


def _time_inductor(
    model: torch.nn.Module, inputs: Sequence[torch.Tensor], sync: Callable[[], None], settings: Settings
) -> Timing:
    # A fresh Dynamo for every model: otherwise a second batch size of the same module recompiles with
    # dynamic shapes, and after 8 recompiles Dynamo silently falls back to eager.
    torch._dynamo.reset()
    compiled = torch.compile(model)
    start = time.perf_counter_ns()
    compiled(*inputs)
    sync()
    first_s = (time.perf_counter_ns() - start) / 1e9
    timing = Timing.of(measure(lambda: compiled(*inputs), sync, settings))
    return replace(timing, compile_s=max(first_s - timing.median_ms / 1e3, 0.0))


def measure(call: Callable[[], Any], sync: Callable[[], None], settings: Settings) -> list[int]:
    """Nanoseconds of each timed call of `call` (each followed by `sync`), after `settings.warmup` calls."""
    warmup_deadline = time.perf_counter_ns() + int(settings.budget_s * 1e9 / 2)
    for index in range(settings.warmup):
        if index and time.perf_counter_ns() > warmup_deadline:
            break
        call()
        sync()
    samples: list[int] = []
    deadline = time.perf_counter_ns() + int(settings.budget_s * 1e9)
    while len(samples) < settings.iterations and (len(samples) < 3 or time.perf_counter_ns() < deadline):
        start = time.perf_counter_ns()
        call()
        sync()
        samples.append(time.perf_counter_ns() - start)
    return samples


def check_numerics(actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor]) -> Numerics:
    """The worst output's relative L2 error against eager, and whether it is within its dtype's tolerance."""
    checks = [_check_output(got, want) for got, want in zip(actual, expected, strict=True)]
    return max(checks, key=lambda check: (not check.ok, check.rel_l2_error))


def _check_output(got: torch.Tensor, want: torch.Tensor) -> Numerics:
    tolerance = REL_L2_TOLERANCE.get(want.dtype, 0.0)  # integer outputs must match exactly
    if got.shape != want.shape:
        return Numerics(False, math.inf, math.inf, tolerance)
    got, want = got.detach().cpu().double(), want.detach().cpu().double()
    if not want.numel():
        return Numerics(True, 0.0, 0.0, tolerance)
    difference = got - want
    rel_l2 = float(difference.norm() / want.norm().clamp_min(1e-30))
    return Numerics(rel_l2 <= tolerance, rel_l2, float(difference.abs().max()), tolerance)


def _upload(module: LoadedModule, inputs: Sequence[torch.Tensor]) -> tuple[Any, ...]:
    """Copy `inputs` to the module's device once: as device arrays, bf16 as typed buffer views."""
    arrays = [(spec.dtype, to_host_array(tensor)) for spec, tensor in zip(module.manifest.inputs, inputs, strict=True)]
    return tuple(
        to_device(module.device, array, dtype) if dtype == "bfloat16" else rt.asdevicearray(module.device, array)
        for dtype, array in arrays
    )


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def _nothing() -> None:
    pass


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


def describe_inputs(inputs: Sequence[torch.Tensor]) -> str:
    """E.g. "f32[8, 1024], i64[8]"."""
    return ", ".join(f"{short_dtype(x.dtype)}[{', '.join(map(str, x.shape))}]" for x in inputs)


_SHORT_DTYPES = {
    torch.float32: "f32",
    torch.bfloat16: "bf16",
    torch.float16: "f16",
    torch.float64: "f64",
    torch.int64: "i64",
    torch.int32: "i32",
    torch.bool: "bool",
}


def short_dtype(dtype: torch.dtype) -> str:
    return _SHORT_DTYPES.get(dtype, str(dtype).removeprefix("torch."))


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
    versions = {name: _version(name) for name in names}
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


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "not installed"
