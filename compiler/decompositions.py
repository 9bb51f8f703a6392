"""kiln's additions to the decomposition table applied before import, each for a failure it avoids.

torch-mlir decomposes `aten.var_mean.correction` (what layer_norm becomes) by upcasting f32 to
f64. On CPU that doubles the work and, for BERT's layer norms, makes IREE's llvm-cpu backend
exceed its stack limit; GPUs without f64 (Vulkan) cannot run it at all. PyTorch's own CUDA
kernels accumulate f32 variance in f32; so does this two-pass decomposition (mean, then the mean
of squared deviations), with f16/bf16 computed in f32 and rounded once.
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch

aten = torch.ops.aten


def _var_mean(
    x: torch.Tensor,
    dim: list[int] | None = None,
    *,
    correction: float | None = None,
    keepdim: bool = False,
) -> tuple[torch.Tensor, torch.Tensor]:
    dims = list(range(x.dim())) if dim is None else [d % x.dim() for d in dim]
    compute = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x
    count = math.prod(x.shape[d] for d in dims)
    mean = compute.mean(dims, keepdim=True)
    centered = compute - mean
    divisor = max(count - (1.0 if correction is None else correction), 0)
    var = (centered * centered).sum(dims, keepdim=keepdim) / divisor
    if not keepdim:
        mean = mean.squeeze(dims)
    return var.to(x.dtype), mean.to(x.dtype)


def _all_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    return x.to(torch.float32).amin(dim, keepdim) != 0


def _any_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    return x.to(torch.float32).amax(dim, keepdim) != 0


KILN_DECOMPOSITIONS: dict[torch._ops.OperatorBase, Callable[..., object]] = {
    aten.var_mean.correction: _var_mean,
    # Reductions over i1 fail to bufferize in IREE 3.13's CUDA backend; PyTorch's attention
    # decomposition has one (`all` of a row's -inf mask). min/max over f32 0/1 values are the same
    # reduction, exactly; over int8 or int32 that CUDA backend computed them wrong (measured on an
    # H200: a transformer layer's output off by 4e-2 relative L2, and right with f32).
    aten.all.dim: _all_dim,
    aten.any.dim: _any_dim,
}
