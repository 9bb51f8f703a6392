"""Timing a loaded kiln artifact against eager PyTorch and torch.compile, same device, same inputs.

`bench` checks kiln's outputs against eager's, then times each side. Every timed call ends fully
synchronized, so the sides measure the same thing:
- kiln: IREE's call returns only once its results are ready (the module's synchronous `main`
  waits on the device's fence before returning), so no extra synchronization is needed. It is
  timed twice, with the inputs already where the artifact runs (torch tensors on its device, as
  eager's are): "kiln", the computation alone (inputs imported once, results where a call
  writes them: tensors torch allocates on CUDA, IREE's memory on the CPU; the number the ratios
  use), and "kiln_call", `module(*tensors)` as users call it
  (every check and the boundary both ways included: the difference is the call's overhead). The
  two are timed in turn, call by call, so that the machine's drift does not pass for overhead.
- eager and Inductor: each call is followed by `torch.cuda.synchronize()` on a GPU.
The numerics check is kiln.runtime.numerics's relative L2 verdict (eager on a GPU runs f32
convolutions in TF32).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import torch

from kiln.runtime.executors import CALLS_TO_CHOOSE
from kiln.runtime.module import LoadedModule, Uploaded
from kiln.runtime.numerics import compare_all, computes_in_tf32, worst

from .results import Numerics, Timing
from .timing import Settings, measure, measure_alternating, torch_device_for


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
    torch_device, device_inputs, model = _on_device(module, model, inputs, device)
    sync = torch.cuda.synchronize if torch_device.startswith("cuda") else nothing
    with torch.no_grad():
        expected = _as_tuple(model(*device_inputs))
        numerics = _check(module, device_inputs, expected)
        uploaded = upload(module, device_inputs)
        calls = [lambda: module.call_on_device(uploaded), lambda: module(*device_inputs)]
        alone, called = measure_alternating(calls, nothing, _executor_chosen_first(settings))
        timings = {
            "kiln": Timing.of(alone, kiln_compile_s),
            "kiln_call": Timing.of(called),
            "eager": Timing.of(measure(lambda: model(*device_inputs), sync, settings), 0.0),
        }
        error = None
        if settings.inductor:
            try:
                timings["inductor"] = _time_inductor(model, device_inputs, sync, settings)
            except Exception as exc:  # Inductor's failure is a finding, not the end of the run
                error = f"torch.compile failed: {type(exc).__name__}: {str(exc).strip().splitlines()[0]}"
    return numerics, timings, error


def compare_artifacts(
    modules: Sequence[LoadedModule], model: torch.nn.Module, inputs: Sequence[torch.Tensor], settings: Settings, device: str | None = None
) -> tuple[list[Numerics], list[Timing]]:
    """Several artifacts of one case (a change's before and after), each checked against `model`, then
    timed call by call in turn like bench's "kiln" column: one run, so the machine's drift between runs
    (often larger than the change) falls on each alike."""
    _, device_inputs, model = _on_device(modules[0], model, inputs, device)
    with torch.no_grad():
        expected = _as_tuple(model(*device_inputs))
        numerics = [_check(module, device_inputs, expected) for module in modules]
        uploaded = [upload(module, device_inputs) for module in modules]
        calls = [lambda module=module, up=up: module.call_on_device(up) for module, up in zip(modules, uploaded, strict=True)]
        samples = measure_alternating(calls, nothing, _executor_chosen_first(settings))
    return numerics, [Timing.of(times) for times in samples]


def _on_device(
    module: LoadedModule, model: torch.nn.Module, inputs: Sequence[torch.Tensor], device: str | None
) -> tuple[str, tuple[torch.Tensor, ...], torch.nn.Module]:
    """The torch device matching the artifact's, with the inputs and the model (eval mode) on it."""
    torch_device = torch_device_for(module.manifest.driver, device)
    return torch_device, tuple(x.detach().to(torch_device).contiguous() for x in inputs), model.to(torch_device).eval()


def _check(module: LoadedModule, inputs: Sequence[torch.Tensor], expected: tuple[torch.Tensor, ...]) -> Numerics:
    return check_numerics(_as_tuple(module(*inputs)), expected, computes_in_tf32(module.manifest.kernels))


def _executor_chosen_first(settings: Settings) -> Settings:
    """`settings` with warm-up calls enough for the CPU's choice of executor to be made before timing."""
    return replace(settings, warmup=max(settings.warmup, CALLS_TO_CHOOSE))


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


def check_numerics(actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], tf32: bool = False) -> Numerics:
    """The worst output's relative L2 error against eager, and whether it is within its dtype's tolerance
    (`tf32`: the artifact computes f32 contractions in TF32, so f32 outputs get TF32's)."""
    comparison = worst(compare_all(actual, expected, tf32=tf32))
    return Numerics(comparison.close_in_l2, comparison.rel_l2, comparison.max_abs, comparison.tolerance.rel_l2)


def upload(module: LoadedModule, inputs: Sequence[torch.Tensor]) -> Uploaded:
    """`inputs` handed to the module's device once, for `module.call_on_device`."""
    return module.upload(*(x.detach().to(module.boundary.home) for x in inputs))


def _as_tuple(value: Any) -> tuple[torch.Tensor, ...]:
    return value if isinstance(value, tuple) else (value,)


def nothing() -> None:
    """The synchronization after a call that is complete when it returns."""


