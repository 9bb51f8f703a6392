"""How kiln decides that an artifact computes what eager PyTorch computes: one table, one comparison.

Every check in kiln goes through `compare`: `kiln compile --verify`, `kiln bench` and the suite,
`kiln tune`'s candidates, the op conformance suite and the GPU checks. A comparison reports the
largest absolute and relative element error and the relative L2 error (||got - want|| / ||want||),
and two verdicts from the dtype's tolerance:

- `close`: every element within rtol/atol (NaN where eager has NaN counts as equal). What --verify
  and the conformance suite require: per-element closeness on the same CPU.
- `close_in_l2`: the relative L2 error within `rel_l2`. What timing runs require: they compare with
  eager on the device, where PyTorch's own f32 convolutions run in TF32 by default, so single
  elements may differ by more than rtol while the whole tensor still agrees.

Integers and bools must be equal, and both verdicts require eager's dtype and shape. A complex
output is compared as its real and imaginary parts, each at the tolerance of the parts' dtype.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

import torch

from .tensors import short_dtype


@dataclass(frozen=True)
class Tolerance:
    rtol: float
    atol: float
    rel_l2: float


# By eager's output dtype; integer and bool outputs must match exactly.
TOLERANCES: dict[torch.dtype, Tolerance] = {
    torch.float64: Tolerance(1e-6, 1e-6, 1e-6),
    torch.float32: Tolerance(1e-4, 1e-4, 1e-3),  # rel_l2 1e-3: a GPU's TF32 convolutions in eager
    torch.float16: Tolerance(1e-2, 1e-2, 1e-2),
    torch.bfloat16: Tolerance(4e-2, 4e-2, 3e-2),
}
TOLERANCES[torch.complex128] = TOLERANCES[torch.float64]  # compared part by part (`compare`)
TOLERANCES[torch.complex64] = TOLERANCES[torch.float32]
EXACT = Tolerance(0.0, 0.0, 0.0)
# f32 outputs of an artifact that computes f32 contractions in TF32 (kiln's kernels on Hopper at
# PyTorch's default convolution precision): TF32 products keep 10 mantissa bits, as float16 does.
TF32 = TOLERANCES[torch.float16]


def tolerance_for(
    dtype: torch.dtype, rtol: float | None = None, atol: float | None = None, tf32: bool = False
) -> Tolerance:
    """The table's tolerance for `dtype` (f32 computed with TF32 contractions: `tf32`), with rtol/atol
    overridden where given."""
    default = TF32 if tf32 and dtype == torch.float32 else TOLERANCES.get(dtype, EXACT)
    return Tolerance(default.rtol if rtol is None else rtol, default.atol if atol is None else atol, default.rel_l2)


@dataclass(frozen=True)
class Comparison:
    """One output of kiln against eager's."""

    max_abs: float
    max_rel: float
    rel_l2: float
    tolerance: Tolerance
    problem: str | None = None  # a dtype or shape that differs from eager's: neither verdict holds
    elements_close: bool = True  # every element within rtol/atol (integers: equal)
    differing: int = 0  # elements outside rtol/atol

    @property
    def close(self) -> bool:
        return self.problem is None and self.elements_close

    @property
    def close_in_l2(self) -> bool:
        if self.problem is not None:
            return False
        exact = self.tolerance == EXACT
        return self.elements_close if exact else self.rel_l2 <= self.tolerance.rel_l2

    def describe(self) -> str:
        """One line: the problem, or the errors."""
        if self.problem is not None:
            return self.problem
        return f"max abs error {self.max_abs:.2g}, max rel error {self.max_rel:.2g}, rel. L2 {self.rel_l2:.1e}"


def compare(got: torch.Tensor, want: torch.Tensor, tolerance: Tolerance | None = None, tf32: bool = False) -> Comparison:
    """`got` (kiln's) against `want` (eager's), with the table's tolerance for eager's dtype unless given."""
    tolerance = tolerance or tolerance_for(want.dtype, tf32=tf32)
    if got.dtype != want.dtype:
        problem = f"dtype {short_dtype(got.dtype)}, eager {short_dtype(want.dtype)}"
        return Comparison(math.inf, math.inf, math.inf, tolerance, problem, False)
    if got.shape != want.shape:
        return Comparison(math.inf, math.inf, math.inf, tolerance, f"shape {list(got.shape)}, eager {list(want.shape)}", False)
    if not want.numel():
        return Comparison(0.0, 0.0, 0.0, tolerance)
    if want.is_complex():  # (real, imaginary) pairs: a cast to float64 would drop the imaginary parts
        got, want = torch.view_as_real(got.detach().cpu().resolve_conj()), torch.view_as_real(want.detach().cpu().resolve_conj())
    got64, want64 = got.detach().cpu().to(torch.float64), want.detach().cpu().to(torch.float64)
    same = (got64 == want64) | (got64.isnan() & want64.isnan())  # infinities and NaNs where eager has them
    difference = (got64 - want64).abs().masked_fill(same, 0).nan_to_num(nan=math.inf)
    max_abs = float(difference.max())
    max_rel = float((difference / want64.abs().clamp_min(1e-12)).max())
    norm = float(want64.masked_fill(~want64.isfinite(), 0).norm())
    rel_l2 = float(difference.norm()) / max(norm, 1e-30)
    within = same | (difference <= tolerance.atol + tolerance.rtol * want64.abs())
    differing = int((~within).sum())
    return Comparison(max_abs, max_rel, rel_l2, tolerance, None, differing == 0, differing)


def compare_all(
    got: Sequence[torch.Tensor], want: Sequence[torch.Tensor], tolerance: Tolerance | None = None, tf32: bool = False
) -> tuple[Comparison, ...]:
    """Output by output; a different number of outputs is one failed comparison saying so."""
    if len(got) != len(want):
        problem = f"{len(got)} outputs, eager has {len(want)}"
        return (Comparison(math.inf, math.inf, math.inf, tolerance or EXACT, problem, False),)
    return tuple(compare(g, w, tolerance, tf32) for g, w in zip(got, want, strict=True))


def computes_in_tf32(kernels: Sequence[dict[str, object]]) -> bool:
    """Whether an artifact's manifest `kernels` say it computes some f32 contraction in TF32."""
    return any(record.get("code") == "kiln" and record.get("precision") == "tf32" for record in kernels)


def worst(comparisons: Sequence[Comparison]) -> Comparison:
    """The comparison that decides a verdict: a failed one first, then the largest relative L2 error."""
    return max(comparisons, key=lambda c: (not c.close_in_l2, not c.close, c.rel_l2))
