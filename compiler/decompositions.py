"""kiln's additions to the decomposition table applied before import, each for a failure it avoids.

Most of kiln's rewrites are torch-dialect passes (passes/); the ones here are FX-level because the
op never reaches the torch dialect as an op kiln could rewrite: torch-mlir has no definition for
erfc, hypot, addmv, addbmm and _cdist_forward (they import as opaque `torch.operator`s, which its
backend contract rejects), its own decompositions turn signbit and copysign into a bitcast
(`view.dtype`) outside kiln's primitive set, and embedding_bag's bag reductions are a few lines of
PyTorch here against a page of IR built op by op. Each decomposition below says what it computes.

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
from torch._decomp import decomposition_table

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


def _all_dims(x: torch.Tensor, dim: list[int] | None = None, keepdim: bool = False) -> torch.Tensor:
    """`all` over several dimensions, which torch-mlir imports as an op it has no definition of."""
    dims = list(range(x.dim())) if dim is None else list(dim)
    return x.to(torch.float32).amin(dims, keepdim) != 0 if dims else x != 0


def _erfc(x: torch.Tensor) -> torch.Tensor:
    """1 - erf(x): exact where erfc(x) is not tiny; for x above ~4 (f32) it is 0 where eager gives
    erfc's small positive value (an absolute error below 2e-8)."""
    return 1 - aten.erf(x)


def _hypot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sqrt(a^2 + b^2), unscaled: overflows to inf for |a| or |b| above ~1e19 in f32."""
    return aten.sqrt(a * a + b * b)


def _addmv(
    x: torch.Tensor, matrix: torch.Tensor, vector: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    """beta * x + alpha * (matrix @ vector); x is ignored when beta is 0, as in PyTorch (NaNs too)."""
    product = aten.mv(matrix, vector) * alpha
    return product if beta == 0 else product + x * beta


def _addbmm(
    x: torch.Tensor, batch1: torch.Tensor, batch2: torch.Tensor, *, beta: float = 1, alpha: float = 1
) -> torch.Tensor:
    """beta * x + alpha * (the sum over the batch of batch1 @ batch2)."""
    product = aten.bmm(batch1, batch2).sum(0) * alpha
    return product if beta == 0 else product + x * beta


def _cdist(x1: torch.Tensor, x2: torch.Tensor, p: float, compute_mode: int | None = None) -> torch.Tensor:
    """The p-norm of every difference, as eager computes it for small inputs (decompose-vector-norm
    then lowers the norm); no matrix-product shortcut, whatever `compute_mode` says."""
    return aten.linalg_vector_norm(x1.unsqueeze(-2) - x2.unsqueeze(-3), p, [-1])


def _signbit(x: torch.Tensor) -> torch.Tensor:
    """x < 0, and -0.0 (whose reciprocal is -inf); a NaN with its sign bit set gives False."""
    if x.dtype == torch.bool:
        return torch.zeros_like(x)
    if not x.is_floating_point():
        return x < 0
    return (x < 0) | ((x == 0) & (aten.reciprocal(x) < 0))


def _copysign(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """|a| with b's sign (signbit above), in the promoted float dtype."""
    dtype = torch.promote_types(a.dtype, b.dtype)
    magnitude = aten.abs(a.to(dtype if dtype.is_floating_point else torch.get_default_dtype()))
    return torch.where(_signbit(b), -magnitude, magnitude)


def _embedding_bag(
    weight: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    scale_grad_by_freq: bool,
    mode: int,
    sparse: bool,
    per_sample_weights: torch.Tensor | None,
    include_last_offset: bool,
    padding_idx: int | None,
) -> object:
    """Sum (mode 0) and mean (mode 1) bags of 1-D indices: each index's bag from the offsets, then
    a scatter_add of its (weighted) row into its bag (not index_add, which IREE's CUDA backend
    cannot compile); rows of padding_idx count for nothing. Max (mode 2) is left to the op, which
    kiln cannot compile."""
    if mode not in (0, 1) or indices.dim() != 1:
        return NotImplemented
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    positions = torch.arange(indices.shape[0], device=indices.device)
    bag_of = (positions.unsqueeze(1) >= offsets[:bags].unsqueeze(0)).sum(1) - 1
    rows = aten.index_select(weight, 0, indices)
    keep = torch.ones_like(indices, dtype=weight.dtype)
    if padding_idx is not None and padding_idx >= 0:
        keep = (indices != padding_idx).to(weight.dtype)
    if per_sample_weights is not None:
        rows = rows * per_sample_weights.unsqueeze(1)
    rows = rows * keep.unsqueeze(1)
    zeros = torch.zeros(bags, weight.shape[1], dtype=weight.dtype, device=weight.device)
    totals = zeros.scatter_add(0, bag_of.unsqueeze(1).expand_as(rows), rows)
    counts = zeros[:, 0].scatter_add(0, bag_of, keep)
    if mode == 1:
        totals = totals / counts.clamp(min=1).unsqueeze(1)
    return totals, bag_of, counts.to(torch.int64), torch.zeros(bags, dtype=torch.int64, device=weight.device)


KILN_DECOMPOSITIONS: dict[torch._ops.OperatorBase, Callable[..., object]] = {
    aten.var_mean.correction: _var_mean,
    # Reductions over i1 fail to bufferize in IREE 3.13's CUDA backend; PyTorch's attention
    # decomposition has one (`all` of a row's -inf mask). min/max over f32 0/1 values are the same
    # reduction, exactly; over int8 or int32 that CUDA backend computed them wrong (measured on an
    # H200: a transformer layer's output off by 4e-2 relative L2, and right with f32).
    aten.all.dim: _all_dim,
    aten.any.dim: _any_dim,
    aten.all.dims: _all_dims,
    # Ops torch-mlir cannot import as its own (opaque `torch.operator`s its backend contract rejects).
    aten.erfc.default: _erfc,
    aten.hypot.default: _hypot,
    aten.addmv.default: _addmv,
    aten.addbmm.default: _addbmm,
    aten._cdist_forward.default: _cdist,
    # torch-mlir's own decompositions of these are a bitcast, outside kiln's primitive set.
    aten.signbit.default: _signbit,
    aten.copysign.Tensor: _copysign,
    aten.embedding_bag.padding_idx: _embedding_bag,
    # torch-mlir keeps nearest 2-D whole, then its backend contract makes it an `__interpolate` that
    # torch-to-linalg computes with a whole-number scale (4 -> 6 rows reads rows 0,0,1,1,2,2, not
    # 0,0,1,2,2,3); PyTorch's own decomposition gathers at floor(dst * scale), like 1-D and 3-D.
    aten.upsample_nearest2d.vec: decomposition_table[aten.upsample_nearest2d.vec],
}
