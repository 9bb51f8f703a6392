"""--verify: run the artifact on the example inputs and compare with eager PyTorch."""

from __future__ import annotations

from dataclasses import dataclass

import torch

from .artifact import Compiled
from .model_file import ModelSpec

# Default tolerances by output dtype: reduced precisions get tolerances that fit their mantissa.
DEFAULT_TOLERANCES: dict[torch.dtype, tuple[float, float]] = {
    torch.float32: (1e-4, 1e-4),
    torch.float64: (1e-6, 1e-6),
    torch.float16: (1e-2, 1e-2),
    torch.bfloat16: (4e-2, 4e-2),
}


@dataclass(frozen=True)
class OutputCheck:
    name: str  # "<output>", or "<function>.<output>" for an artifact of several functions
    max_abs_error: float
    max_rel_error: float
    ok: bool


def verify(
    compiled: Compiled, spec: ModelSpec, rtol: float | None = None, atol: float | None = None
) -> tuple[OutputCheck, ...]:
    loaded = compiled.load()
    checks = []
    for entry in spec.entries:
        function = loaded.functions[entry.name]
        expected, actual = entry(*entry.example_inputs), function(*entry.example_inputs)
        expected_tuple = expected if isinstance(expected, tuple) else (expected,)
        actual_tuple = actual if isinstance(actual, tuple) else (actual,)
        prefix = f"{entry.name}." if len(spec.entries) > 1 else ""
        checks.extend(
            _check(prefix + output.name, want, got, rtol, atol)
            for output, want, got in zip(function.spec.outputs, expected_tuple, actual_tuple, strict=True)
        )
    return tuple(checks)


def _check(name: str, expected: torch.Tensor, actual: torch.Tensor, rtol: float | None, atol: float | None) -> OutputCheck:
    default_rtol, default_atol = DEFAULT_TOLERANCES.get(expected.dtype, (0.0, 0.0))
    rtol = default_rtol if rtol is None else rtol
    atol = default_atol if atol is None else atol
    want, got = expected.double(), actual.double()
    difference = (want - got).abs()
    max_abs = float(difference.max()) if difference.numel() else 0.0
    max_rel = float((difference / want.abs().clamp_min(1e-12)).max()) if difference.numel() else 0.0
    ok = expected.shape == actual.shape and bool(torch.allclose(got, want, rtol=rtol, atol=atol, equal_nan=True))
    return OutputCheck(name, max_abs, max_rel, ok)
