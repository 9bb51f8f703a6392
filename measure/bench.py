"""Timing a loaded kiln artifact against eager PyTorch and torch.compile, same device, same inputs.

`bench` checks kiln's outputs against eager's, then times each side. Every timed call ends fully
synchronized, so the sides measure the same thing:
- kiln: IREE's call returns only once its results are ready (the module's synchronous `main`
  waits on the device's fence before returning), so no extra synchronization is needed. It is
  timed twice: with inputs already on the device and results left there ("kiln", the number the
  ratios use, as torch's tensors also stay on the device), and as users call it, `module(*tensors)`
  with host tensors in and host tensors out ("kiln_call": the copies are in the time).
- eager and Inductor: each call is followed by `torch.cuda.synchronize()` on a GPU.
The numerics check is kiln.runtime.numerics's relative L2 verdict (eager on a GPU runs f32
convolutions in TF32).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

import iree.runtime as rt
import torch

from kiln.runtime.module import LoadedModule
from kiln.runtime.numerics import compare_all, worst
from kiln.runtime.tensors import to_device, to_host_array

from .results import Numerics, Timing
from .timing import Settings, measure, torch_device_for


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
        uploaded = upload(module, host_inputs)
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


def check_numerics(actual: Sequence[torch.Tensor], expected: Sequence[torch.Tensor]) -> Numerics:
    """The worst output's relative L2 error against eager, and whether it is within its dtype's tolerance."""
    comparison = worst(compare_all(actual, expected))
    return Numerics(comparison.close_in_l2, comparison.rel_l2, comparison.max_abs, comparison.tolerance.rel_l2)


def upload(module: LoadedModule, inputs: Sequence[torch.Tensor]) -> tuple[Any, ...]:
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


