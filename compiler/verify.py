"""--verify: run the artifact on the example inputs and compare with eager PyTorch (kiln.runtime.numerics)."""

from __future__ import annotations

from dataclasses import dataclass

from kiln.runtime.numerics import Comparison, compare, tolerance_for

from .artifact import Compiled
from .model_file import ModelSpec, with_weights


@dataclass(frozen=True)
class OutputCheck:
    name: str  # "<output>", or "<function>.<output>" for an artifact of several functions
    comparison: Comparison

    @property
    def ok(self) -> bool:
        return self.comparison.close


def verify(
    compiled: Compiled, spec: ModelSpec, rtol: float | None = None, atol: float | None = None
) -> tuple[OutputCheck, ...]:
    loaded = compiled.load()
    spec = with_weights(spec)  # a model built without its weights gets them from its checkpoint here
    checks = []
    for entry in spec.entries:
        function = loaded.functions[entry.name]
        expected, actual = entry(*entry.example_inputs), function(*entry.example_inputs)
        expected_tuple = expected if isinstance(expected, tuple) else (expected,)
        actual_tuple = actual if isinstance(actual, tuple) else (actual,)
        prefix = f"{entry.name}." if len(spec.entries) > 1 else ""
        comparisons = [
            compare(got, want, tolerance_for(want.dtype, rtol, atol))
            for got, want in zip(actual_tuple, expected_tuple, strict=True)
        ]
        checks.extend(
            OutputCheck(prefix + output.name, comparison)
            for output, comparison in zip(function.spec.outputs, comparisons, strict=True)
        )
    return tuple(checks)
