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
convolutions in TF32). A 16-bit model can be so far from its own f32 original that no second 16-bit
computation of it lands within that tolerance of eager's: T5-base in bf16 on llvm-cpu is 0.27 (rel.
L2) from its f32 model, eager's and kiln's outputs alike, and 0.26 from each other. Where eager computed in 16
bits and kiln fails the check against it, kiln is held to the f32 model instead: no further from it
than eager's outputs are, times F32_REFERENCE_SLACK; the report gives both distances.
"""

from __future__ import annotations

import copy
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

F32_REFERENCE_SLACK = 1.25  # how much further than eager's 16-bit outputs kiln's may be from the f32 model
SIXTEEN_BITS = (torch.bfloat16, torch.float16)


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
        numerics = _check(module, model, device_inputs, expected)
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
        numerics = [_check(module, model, device_inputs, expected) for module in modules]
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


def _check(module: LoadedModule, model: torch.nn.Module, inputs: Sequence[torch.Tensor], expected: tuple[torch.Tensor, ...]) -> Numerics:
    actual = _as_tuple(module(*inputs))
    numerics = check_numerics(actual, expected, computes_in_tf32(module.manifest.kernels))
    if numerics.ok or not any(output.dtype in SIXTEEN_BITS for output in expected):
        return numerics
    return against_f32(numerics, actual, expected, _as_tuple(copy.deepcopy(model).float()(*map(_widened, inputs))))


def against_f32(
    numerics: Numerics, actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]
) -> Numerics:
    """`numerics` (a failed check against eager's 16-bit outputs) decided again against the f32 model's
    outputs `reference`: kiln's `actual` and eager's `expected` are each measured from it."""
    kiln = _distance(actual, reference)
    eager = _distance(expected, reference)
    return replace(numerics, ok=kiln <= F32_REFERENCE_SLACK * eager, f32_rel_l2=(kiln, eager))


def _distance(outputs: Sequence[torch.Tensor], reference: Sequence[torch.Tensor]) -> float:
    """The largest relative L2 error of `outputs` (widened to the reference's dtypes) from `reference`."""
    if len(outputs) != len(reference):
        return float("inf")
    return max(c.rel_l2 for c in compare_all([o.to(r.dtype) for o, r in zip(outputs, reference, strict=True)], reference))


def _widened(x: torch.Tensor) -> torch.Tensor:
    return x.float() if x.dtype in SIXTEEN_BITS else x


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


