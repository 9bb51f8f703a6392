"""The per-call overhead of kiln's runtime: a model that does next to nothing, called as users call it.

`OneAdd` adds one to a one-element tensor: its time is almost all call overhead, on either side.
`call_overhead` times it three ways on the artifact's device, with the tensor already there: kiln's
`module(x)` (manifest check, boundary both ways, IREE's call), kiln's call with the input imported
once and the result where a call writes it ("kiln", IREE's own floor), and eager PyTorch's `model(x)`. The
caller compiles the artifact for the target at hand (this package never imports the compiler).
"""

from __future__ import annotations

import torch

from kiln.runtime.module import LoadedModule

from .bench import nothing, upload
from .results import Timing
from .timing import Settings, measure, measure_alternating, torch_device_for

# Enough calls for a stable median of a few microseconds, and enough warm-up for the CPU runtime
# to choose its executor (kiln.runtime.executors) before the timed calls.
SETTINGS = Settings(warmup=50, iterations=2000, budget_s=2.0, inductor=False)


class OneAdd(torch.nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + 1


def example_inputs() -> tuple[torch.Tensor]:
    return (torch.zeros(1),)


def call_overhead(module: LoadedModule, device: str | None = None) -> dict[str, Timing]:
    """Median times of OneAdd compiled in `module`: "kiln_call", "kiln" and "eager" (ValueError if it is wrong)."""
    torch_device = torch_device_for(module.manifest.driver, device)
    sync = torch.cuda.synchronize if torch_device.startswith("cuda") else nothing
    x = torch.full((1,), 2.0, device=torch_device)
    model = OneAdd()
    result = module(x)
    if not torch.equal(result, model(x)):
        raise ValueError(f"the one-add artifact returned {result.tolist()} for 2 + 1")
    uploaded = upload(module, (x,))
    with torch.no_grad():
        called, alone = measure_alternating([lambda: module(x), lambda: module.call_on_device(uploaded)], nothing, SETTINGS)
        return {
            "kiln_call": Timing.of(called),
            "kiln": Timing.of(alone),
            "eager": Timing.of(measure(lambda: model(x), sync, SETTINGS)),
        }
