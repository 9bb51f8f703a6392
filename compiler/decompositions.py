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

from .fx_calls import argument

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


def _var(x: torch.Tensor, dim: list[int] | None = None, *, correction: float | None = None, keepdim: bool = False) -> torch.Tensor:
    """torch-mlir divides by N - correction, negative where the correction exceeds the count (any
    variance of no element): -0 where PyTorch, dividing by max(N - correction, 0), gives NaN."""
    return _var_mean(x, dim, correction=correction, keepdim=keepdim)[0]


def _std(x: torch.Tensor, dim: list[int] | None = None, *, correction: float | None = None, keepdim: bool = False) -> torch.Tensor:
    compute = x.float() if x.dtype in (torch.float16, torch.bfloat16) else x  # the root before rounding, as PyTorch
    return _var(compute, dim, correction=correction, keepdim=keepdim).sqrt().to(x.dtype)


def _all_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    return _all_dims(x, [dim], keepdim)


def _any_dim(x: torch.Tensor, dim: int, keepdim: bool = False) -> torch.Tensor:
    if _may_be_empty(x, [dim]):
        return (x != 0).to(torch.float32).sum(dim, keepdim) != 0  # any of no element: False
    return x.to(torch.float32).amax(dim, keepdim) != 0


def _all_dims(x: torch.Tensor, dim: list[int] | None = None, keepdim: bool = False) -> torch.Tensor:
    """`all` over several dimensions, which torch-mlir imports as an op it has no definition of."""
    dims = list(range(x.dim())) if dim is None else list(dim)
    if not dims:
        return x != 0
    if _may_be_empty(x, dims):
        return (x == 0).to(torch.float32).sum(dims, keepdim) == 0  # all of no element: True
    return x.to(torch.float32).amin(dims, keepdim) != 0


def _may_be_empty(x: torch.Tensor, dims: list[int]) -> bool:
    """Whether a reduction of `x` over `dims` may cover no element: a size 0, or one known only at the call.

    min and max have no identity: torch refuses amin/amax over a zero-size dimension while tracing
    (and IREE's +-inf init would answer wrong), so there `all`/`any` count the zeros or the non-zeros
    instead, in f32 (a sum of 0/1 values is 0 exactly when every term is).
    """
    return any(not isinstance(x.shape[d], int) or x.shape[d] == 0 for d in dims)


def _erfc(x: torch.Tensor) -> torch.Tensor:
    """1 - erf(x): exact where erfc(x) is not tiny; for x above ~4 (f32) it is 0 where eager gives
    erfc's small positive value (an absolute error below 2e-8)."""
    return 1 - aten.erf(x)


def _hypot(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """sqrt(a^2 + b^2), unscaled: overflows to inf for |a| or |b| above ~1e19 in f32."""
    return aten.sqrt(a * a + b * b)


def _bitwise_scalar(op: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> Callable[[torch.Tensor, int], torch.Tensor]:
    """`x op scalar` as `x op tensor(scalar)` in x's dtype: torch-mlir imports only the Tensor forms."""
    return lambda x, other: op(x, aten.full.default([], other, dtype=x.dtype, device=x.device))


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
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> object:
    """aten._embedding_bag, all four results as PyTorch's CPU kernel returns them (_embedding_bags)."""
    return _embedding_bags(
        weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx, forward_only=False
    )


def _embedding_bag_forward_only(
    weight: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    scale_grad_by_freq: bool = False,
    mode: int = 0,
    sparse: bool = False,
    per_sample_weights: torch.Tensor | None = None,
    include_last_offset: bool = False,
    padding_idx: int = -1,
) -> object:
    """aten._embedding_bag_forward_only, what embedding_bag calls for a weight without gradient."""
    return _embedding_bags(
        weight, indices, offsets, mode, per_sample_weights, include_last_offset, padding_idx, forward_only=True
    )


def _embedding_bags(
    weight: torch.Tensor,
    indices: torch.Tensor,
    offsets: torch.Tensor,
    mode: int,
    per_sample_weights: torch.Tensor | None,
    include_last_offset: bool,
    padding_idx: int,
    forward_only: bool,
) -> object:
    """Bags of 1-D indices, summed (mode 0), averaged (1) or maximized (2), as PyTorch's CPU kernel
    computes them, with its other three results in its shapes, dtypes and values.

    Each index's bag comes from the offsets; its (weighted) row goes into its bag by scatter_add
    (not index_add, which IREE's CUDA backend cannot compile), or scatter_reduce amax; rows of
    padding_idx (here the internal op's: negative for none, embedding_bag has wrapped it) count for
    nothing. The other results (ints in the promoted dtype of indices and offsets):
    - offset2bag, each index's bag: empty where the CPU kernel takes its fast path for sums (an
      f32, f16 or bf16 weight of unit column stride, no padding_idx, per-sample weights, if any, of
      unit stride);
    - bag_size, the indices counted in each bag (padding excluded): zeros for sums, and one per
      offset (include_last_offset's last too) in _embedding_bag_forward_only's;
    - max_indices: for max, the row that gave each bag's maximum (the first on ties; 0 for an empty
      bag, whose maximum is 0); otherwise a copy of bag_size.
    embedding_bag itself is left to PyTorch's decomposition, which picks one of the two ops as eager
    does (_embedding_bag where the weight needs a gradient, such as an nn.EmbeddingBag's parameter).
    """
    if mode not in (0, 1, 2) or indices.dim() != 1 or offsets.dim() != 1 or weight.dim() != 2:
        return NotImplemented
    if per_sample_weights is not None and (mode != 0 or per_sample_weights.dim() != 1):
        return NotImplemented  # eager rejects it: left to the op, which says why
    index_dtype = torch.promote_types(indices.dtype, offsets.dtype)
    count = indices.shape[0]
    bags = offsets.shape[0] - (1 if include_last_offset else 0)
    positions = torch.arange(count, device=indices.device)
    bag_of = (positions.unsqueeze(1) >= offsets[:bags].unsqueeze(0)).sum(1) - 1
    rows = aten.index_select(weight, 0, indices)
    keep = indices != padding_idx if padding_idx >= 0 else torch.ones_like(indices, dtype=torch.bool)
    if mode == 0:  # the CPU kernel leaves sums' bag sizes 0
        sizes = torch.zeros(offsets.shape[0] if forward_only else bags, dtype=index_dtype, device=weight.device)
    else:
        sizes = torch.zeros(bags, dtype=index_dtype, device=weight.device).scatter_add(0, bag_of, keep.to(index_dtype))
    spread = bag_of.unsqueeze(1).expand_as(rows)
    if mode == 2:
        lowest = torch.full_like(rows, -math.inf)
        best = torch.full((bags, weight.shape[1]), -math.inf, dtype=weight.dtype, device=weight.device).scatter_reduce(
            0, spread, torch.where(keep.unsqueeze(1), rows, lowest), "amax"
        )
        empty = (sizes == 0).unsqueeze(1)
        output = torch.where(empty, torch.zeros_like(best), best)
        # the first position holding its bag's maximum, in each column; `count` (a 0 appended to the
        # indices) where none does: an empty bag
        holds = keep.unsqueeze(1) & (rows == aten.index_select(best, 0, bag_of))
        first = torch.full((bags, weight.shape[1]), count, dtype=torch.int64, device=weight.device).scatter_reduce(
            0, spread, torch.where(holds, positions.unsqueeze(1), count), "amin"
        )
        rows_or_zero = torch.cat([indices, indices.new_zeros(1)])
        max_indices = aten.index_select(rows_or_zero, 0, first.reshape(-1)).view(first.shape).to(index_dtype)
    else:
        if per_sample_weights is not None:
            rows = rows * per_sample_weights.unsqueeze(1)
        rows = torch.where(keep.unsqueeze(1), rows, torch.zeros_like(rows))
        zeros = torch.zeros(bags, weight.shape[1], dtype=weight.dtype, device=weight.device)
        output = zeros.scatter_add(0, spread, rows)
        if mode == 1:
            output = output / sizes.clamp(min=1).to(weight.dtype).unsqueeze(1)
    fast_sum = (
        mode == 0
        and weight.dtype in (torch.float32, torch.float16, torch.bfloat16)
        and weight.stride(1) == 1
        and padding_idx < 0
        and (per_sample_weights is None or per_sample_weights.stride(0) == 1)
    )
    offset2bag = bag_of.new_zeros(0).to(index_dtype) if fast_sum else bag_of.to(index_dtype)
    return output, offset2bag, sizes, max_indices if mode == 2 else sizes.clone()


def _histc(x: torch.Tensor, bins: int = 100, min: float = 0, max: float = 0) -> torch.Tensor:
    """The count of values in each of `bins` equal bins over [min, max], as a one-hot sum.

    As PyTorch's CPU kernel: a value's bin is trunc((x - min) * bins / (max - min)) in x's dtype, a
    value equal to max counts in the last bin, values outside [min, max] (and NaN) in none. Exact
    for integer-valued input such as transformers' expert ids (its MoE routing counts tokens per
    expert with histc). min == max takes the range from the data at run time: left to the op.
    """
    if min == max or not x.is_floating_point():
        return NotImplemented
    low, high = float(min), float(max)
    values = x.reshape(-1)
    inside = (values >= low) & (values <= high)
    position = ((values - low) * bins / (high - low)).to(torch.int64).clamp(0, bins - 1)
    one_hot = (position.unsqueeze(1) == torch.arange(bins, device=x.device)) & inside.unsqueeze(1)
    return one_hot.to(x.dtype).sum(0)


def _grouped_mm(
    x: torch.Tensor,
    weight: torch.Tensor,
    offs: torch.Tensor | None = None,
    bias: torch.Tensor | None = None,
    out_dtype: torch.dtype | None = None,
) -> torch.Tensor:
    """Rows [offs[g-1], offs[g]) of x times weight[g] (2-D x 3-D, what MoE experts compute).

    One dense product of every row with every group's weight, (S, K) @ (K, G*N), then each row
    keeps its own group's columns: G times the arithmetic of the grouped product, in one matrix
    multiplication the backends tile well, and exact (no data-dependent shapes). Rows past the last
    offset belong to no group and are zero, as in PyTorch's fallback.
    """
    if offs is None or x.dim() != 2 or weight.dim() != 3:
        return NotImplemented
    rows, groups, columns = x.shape[0], weight.shape[0], weight.shape[2]
    group = (torch.arange(rows, device=x.device).unsqueeze(1) >= offs.unsqueeze(0)).sum(1)
    valid = group < groups
    every = torch.mm(x, weight.permute(1, 0, 2).reshape(weight.shape[1], groups * columns)).view(
        rows, groups, columns
    )
    index = group.clamp(max=groups - 1).view(rows, 1, 1).expand(rows, 1, columns)
    result = torch.gather(every, 1, index).squeeze(1)
    if bias is not None:
        result = result + bias[group.clamp(max=groups - 1)]
    result = torch.where(valid.unsqueeze(1), result, torch.zeros_like(result))
    return result.to(out_dtype) if out_dtype is not None else result


def _topk_unsorted(
    x: torch.Tensor, k: int, dim: int = -1, largest: bool = True, sorted: bool = True
) -> tuple[torch.Tensor, torch.Tensor] | object:
    """topk with sorted=False as the sorted topk (which torch-mlir lowers, to a sort): any order of
    the k values is an unsorted result, and sorted is one (DeepSeek-V3's expert-group choice)."""
    if sorted:
        return NotImplemented
    return aten.topk.default(x, k, dim, largest, True)


def _view(x: torch.Tensor, size: list[int]) -> torch.Tensor | object:
    """A view of a tensor whose strides no longer allow it, as a contiguous copy then the view.

    torch.export records strides as traced; decompositions can change them. PyTorch's CPU flash
    attention lays its output out as (sequence, batch, ...), so after `run_decompositions` GPT-2's
    `attn_output.transpose(1, 2).reshape(...)` (a copy when traced) becomes a view, and the next
    `x.view(-1, hidden)` cannot merge batch and sequence: "Cannot view a tensor with shape [2, 16,
    64] and strides (64, 128, 1)" at batch 2, in PyTorch's own run_decompositions. The graph is
    functional, so a copy computes the same values; a tensor whose strides allow the view (and any
    of dynamic size) is viewed as before.
    """
    sizes = [*x.shape, *size, *x.stride()]
    if not all(isinstance(value, int) for value in sizes) or _viewable(list(x.shape), list(x.stride()), size):
        return NotImplemented
    return aten.view.default(aten.clone.default(x, memory_format=torch.contiguous_format), size)


def _viewable(shape: list[int], strides: list[int], size: list[int]) -> bool:
    """Whether a tensor of `shape` and `strides` can be viewed as `size` (ATen's computeStride):
    each run of dimensions that is contiguous within itself must map onto whole new dimensions."""
    numel = math.prod(shape)
    if numel == 0 or not shape:
        return True
    if -1 in size:
        known = math.prod(d for d in size if d != -1)
        size = [numel // known if d == -1 else d for d in size]
    view_d = len(size) - 1
    base_stride, tensor_numel, view_numel = strides[-1], 1, 1
    for tensor_d in reversed(range(len(shape))):
        tensor_numel *= shape[tensor_d]
        if tensor_d == 0 or (
            shape[tensor_d - 1] != 1 and strides[tensor_d - 1] != tensor_numel * base_stride
        ):
            while view_d >= 0 and (view_numel < tensor_numel or size[view_d] == 1):
                view_numel *= size[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return False
            if tensor_d > 0:
                base_stride, tensor_numel, view_numel = strides[tensor_d - 1], 1, 1
    return view_d == -1


def _avg_pool2d_ceil(
    x: torch.Tensor,
    kernel_size: list[int],
    stride: list[int] | None = None,
    padding: list[int] | int = 0,
    ceil_mode: bool = False,
    count_include_pad: bool = True,
    divisor_override: int | None = None,
) -> torch.Tensor | object:
    """avg_pool2d with ceil_mode as a floor-mode pooling of an explicitly padded input.

    torch-mlir lowers ceil_mode by padding the input by a whole stride more at the end of each
    dimension, whatever the remainder: Funnel's (2, 1) pooling of a 64-wide hidden state reads a
    65-wide input, and iree-compile rejects the pooling ("inferred ... to be 65, but found 64").
    Here each dimension is padded to exactly what the last window reads; the sums are divided by
    each window's count as PyTorch counts it (padding included or not, the ceil-mode overhang never).
    A window never reads past the padded input, so a kernel larger than it is cut to it: transformers'
    EfficientNet pools its 7x7 map with a 1280x1280 kernel, which padded to the kernel asked IREE for
    268 GB at batch 32.
    """
    if not ceil_mode or x.dim() != 4 or not all(isinstance(d, int) for d in x.shape):
        return NotImplemented
    requested = _pair(kernel_size)
    strides = _pair(stride) if stride else requested
    pads = _pair(padding)
    sizes = x.shape[-2:]
    outputs = [_pooled_size(size, k, s, p) for size, k, s, p in zip(sizes, requested, strides, pads, strict=True)]
    kernel = [min(k, size + 2 * p) for k, size, p in zip(requested, sizes, pads, strict=True)]
    needed = [(out - 1) * s + k for out, s, k in zip(outputs, strides, kernel, strict=True)]
    widths = [pads[1], needed[1] - sizes[1] - pads[1], pads[0], needed[0] - sizes[0] - pads[0]]
    padded = aten.constant_pad_nd.default(x, widths, 0.0)
    area = kernel[0] * kernel[1]
    sums = aten.avg_pool2d.default(padded, kernel, strides, [0, 0], False, True, None) * area
    if divisor_override:
        return sums / divisor_override
    masks = []
    for size, pad, length in zip(sizes, pads, needed, strict=True):
        index = torch.arange(length, device=x.device)
        masks.append((index < size + 2 * pad) if count_include_pad else ((index >= pad) & (index < pad + size)))
    counted = (masks[0].unsqueeze(1) & masks[1].unsqueeze(0)).to(x.dtype).view(1, 1, needed[0], needed[1])
    counts = aten.avg_pool2d.default(counted, kernel, strides, [0, 0], False, True, None) * area
    return sums / counts


def _pair(value: list[int] | int) -> list[int]:
    return [value, value] if isinstance(value, int) else list(value) * (2 // len(value))


def _pooled_size(size: int, kernel: int, stride: int, pad: int) -> int:
    """PyTorch's ceil-mode output size: the last window must start inside the input or its padding."""
    out = -(-(size + 2 * pad - kernel) // stride) + 1
    return out - 1 if (out - 1) * stride >= size + pad else out


def _convolution(
    x: torch.Tensor,
    weight: torch.Tensor,
    bias: torch.Tensor | None,
    stride: list[int],
    padding: list[int],
    dilation: list[int],
    transposed: bool,
    output_padding: list[int],
    groups: int,
) -> torch.Tensor | object:
    """A convolution with its stride, padding, dilation and output padding spelled out for every
    spatial dimension; and one with a single output row or column whose padded input is longer
    than its one window, padded explicitly to exactly the window.

    ATen lets one value stand for every spatial dimension (expand_param_if_needed): `nn.Conv2d(...,
    padding=(1,))`, `F.conv2d(x, w, padding=[1])`, and `padding="valid"` on 2-D and 3-D
    convolutions all reach this op with one-element lists. They are repeated here, once, for the
    code below and for the lowerings after it (torch-mlir's crashes on a transposed convolution
    given one-element lists). `padding="same"` arrives as explicit numbers: PyTorch's own
    decomposition pads the input first where the padding is asymmetric (even kernels).

    iree-compile rejects a convolution whose single output reads an overhanging padded input
    (timm's SelecSLS: a 3x3, stride-2, padding-1 convolution of a 2x2 input, "inferred ... to be 4,
    but found 3"); any other output size with the same overhang compiles, so only this case is
    padded.
    """
    spatial = x.dim() - 2
    given = [stride, padding, dilation, output_padding]
    lists = [_per_dimension(value, spatial) for value in given] if spatial >= 1 else [None]
    if any(value is None for value in lists):
        return NotImplemented  # not a convolution ATen accepts: left to the op, which says why
    spelled_out = any(value != original for value, original in zip(lists, given, strict=True))
    stride, padding, dilation, output_padding = lists  # type: ignore[assignment]
    static = all(isinstance(d, int) for d in (*x.shape, *weight.shape))
    extents = [x.shape[2 + i] + 2 * padding[i] for i in range(spatial)] if static else []
    reach = [dilation[i] * (weight.shape[2 + i] - 1) + 1 for i in range(spatial)] if static else []
    outputs = [(extent - span) // stride[i] + 1 for i, (extent, span) in enumerate(zip(extents, reach, strict=True))]
    overhang = any(out == 1 and extent > span for out, extent, span in zip(outputs, extents, reach, strict=True))
    if transposed or not static or not overhang:
        if not spelled_out:
            return NotImplemented  # as given
        return aten.convolution.default(x, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
    widths: list[int] = []
    for i in reversed(range(spatial)):  # constant_pad_nd lists the last dimension first
        needed = (outputs[i] - 1) * stride[i] + reach[i]
        widths += [padding[i], needed - x.shape[2 + i] - padding[i]]
    padded = aten.constant_pad_nd.default(x, widths, 0.0)
    return aten.convolution.default(padded, weight, bias, stride, [0] * spatial, dilation, False, output_padding, groups)


def _per_dimension(value: object, spatial: int) -> list[int] | None:
    """A convolution parameter as one value per spatial dimension, as ATen reads it: an int or a
    one-element list stands for all of them; None for anything else (a string, a wrong length)."""
    if isinstance(value, int):
        return [value] * spatial
    if not isinstance(value, (list, tuple)) or len(value) not in (1, spatial):
        return None
    return list(value) * (spatial // len(value))


KILN_DECOMPOSITIONS: dict[torch._ops.OperatorBase, Callable[..., object]] = {
    aten.var_mean.correction: _var_mean,
    aten.var.correction: _var,
    aten.std.correction: _std,
    # Reductions over i1 fail to bufferize in IREE 3.13's CUDA backend; PyTorch's attention
    # decomposition has one (`all` of a row's -inf mask). min/max over f32 0/1 values are the same
    # reduction, exactly; over int8 or int32 that CUDA backend computed them wrong (measured on an
    # H200: a transformer layer's output off by 4e-2 relative L2, and right with f32).
    aten.all.dim: _all_dim,
    aten.any.dim: _any_dim,
    aten.all.dims: _all_dims,
    # Ops torch-mlir cannot import as its own (opaque `torch.operator`s its backend contract rejects).
    aten.erfc.default: _erfc,
    aten.bitwise_and.Scalar: _bitwise_scalar(aten.bitwise_and.Tensor),
    aten.bitwise_or.Scalar: _bitwise_scalar(aten.bitwise_or.Tensor),
    aten.bitwise_xor.Scalar: _bitwise_scalar(aten.bitwise_xor.Tensor),
    aten.hypot.default: _hypot,
    aten.addmv.default: _addmv,
    aten.addbmm.default: _addbmm,
    aten._cdist_forward.default: _cdist,
    # torch-mlir's own decompositions of these are a bitcast, outside kiln's primitive set.
    aten.signbit.default: _signbit,
    aten.copysign.Tensor: _copysign,
    # (embedding_bag itself goes through PyTorch's decomposition, to one of these two, as eager does)
    aten._embedding_bag.default: _embedding_bag,
    aten._embedding_bag_forward_only.default: _embedding_bag_forward_only,
    # torch-mlir keeps nearest 2-D whole, then its backend contract makes it an `__interpolate` that
    # torch-to-linalg computes with a whole-number scale (4 -> 6 rows reads rows 0,0,1,1,2,2, not
    # 0,0,1,2,2,3); PyTorch's own decomposition gathers at floor(dst * scale), like 1-D and 3-D.
    aten.upsample_nearest2d.vec: decomposition_table[aten.upsample_nearest2d.vec],
    # transformers' MoE routing: tokens per expert (histc) and the experts' grouped products.
    aten.view.default: _view,
    # Shapes iree-compile rejects: a padded input longer than the windows read.
    aten.avg_pool2d.default: _avg_pool2d_ceil,
    aten.convolution.default: _convolution,
    aten.histc.default: _histc,
    aten.topk.default: _topk_unsorted,
    aten._grouped_mm.default: _grouped_mm,
}

# Custom ops that model libraries register, by (namespace, name): decomposed when the library has
# registered them (imported its module), since kiln cannot look them up before that.
LIBRARY_DECOMPOSITIONS: dict[tuple[str, str], Callable[..., object]] = {
    # transformers' grouped product for experts under torch.export (its integrations/moe.py): the
    # same contract as aten._grouped_mm, rows past the last offset zero.
    ("transformers", "grouped_mm_fallback"): _grouped_mm,
}


def kiln_decompositions() -> dict[torch._ops.OperatorBase, Callable[..., object]]:
    """KILN_DECOMPOSITIONS, and LIBRARY_DECOMPOSITIONS for the custom ops registered by now."""
    table = dict(KILN_DECOMPOSITIONS)
    for (namespace, name), function in LIBRARY_DECOMPOSITIONS.items():
        if _has_schema(namespace, name):
            table[getattr(getattr(torch.ops, namespace), name).default] = function
    return table


def _has_schema(namespace: str, name: str) -> bool:
    try:
        getattr(getattr(torch.ops, namespace), name)
    except (AttributeError, RuntimeError):
        return False
    return True


def real_ffts_as_matmuls(program: torch.export.ExportedProgram) -> None:
    """Replace `real(fftn(x))` and `imag(fftn(x))` of a real x by discrete Fourier transforms as
    matrix products, in place, before the decompositions.

    kiln has no complex tensors: an FFT's complex result cannot reach IREE, and torch-mlir imports
    fft_fftn as an opaque op. A model that keeps only the real or imaginary part of the transform
    (FNet mixes tokens with `fftn(x, dim=(1, 2)).real`) needs none: along each transformed
    dimension of size n, the real and imaginary parts go through n x n cosine and sine matrices
    (exact angles: j*k mod n before scaling). O(n^2) per dimension where an FFT is O(n log n):
    right for the sequence and hidden sizes of such models, not for long signals. Other uses of
    fftn stay, and fail as before with the op named.
    """
    graph = program.graph_module.graph
    parts = {torch.ops.aten.real.default: 0, torch.ops.aten.imag.default: 1}
    for node in list(graph.nodes):
        if node.target not in parts or getattr(node.args[0], "target", None) != aten.fft_fftn.default:
            continue
        fft = node.args[0]
        x = fft.args[0]
        arguments = dict(zip(("s", "dim", "norm"), fft.args[1:], strict=False)) | dict(fft.kwargs)
        if arguments.get("s") is not None or x.meta["val"].is_complex():
            continue
        with graph.inserting_before(node):
            replacement = graph.call_function(_dft_part, (x, arguments.get("dim"), arguments.get("norm"), parts[node.target]))
        replacement.meta = dict(node.meta)
        node.replace_all_uses_with(replacement)
        graph.erase_node(node)
        if not fft.users:
            graph.erase_node(fft)
    program.graph_module.recompile()


def _dft_part(x: torch.Tensor, dims: list[int] | None, norm: str | None, part: int) -> torch.Tensor:
    """The real (part 0) or imaginary (part 1) part of fftn(x, dim=dims, norm=norm) for a real x."""
    dims = list(range(x.dim())) if dims is None else [d % x.dim() for d in dims]
    real, imaginary = x, None
    for dim in dims:
        n = x.shape[dim]
        index = torch.arange(n, device=x.device)
        angle = (index.unsqueeze(1) * index.unsqueeze(0) % n).to(x.dtype) * (2 * math.pi / n)
        cos, sin = torch.cos(angle), torch.sin(angle)
        scale = {None: 1.0, "backward": 1.0, "ortho": 1 / math.sqrt(n), "forward": 1 / n}[norm]
        moved_real = real.movedim(dim, -1)
        new_real, new_imaginary = moved_real @ cos, -(moved_real @ sin)
        if imaginary is not None:
            moved_imaginary = imaginary.movedim(dim, -1)
            new_real = new_real + moved_imaginary @ sin
            new_imaginary = new_imaginary + moved_imaginary @ cos
        real, imaginary = (new_real * scale).movedim(-1, dim), (new_imaginary * scale).movedim(-1, dim)
    return real if part == 0 else imaginary


def attention_masks_at_full_batch(program: torch.export.ExportedProgram) -> None:
    """Broadcast each scaled_dot_product_attention mask to the query's batch dimensions, in place.

    For the torch hand-off, which keeps attention whole for IREE: IREE's torch input pipeline
    lowers it to `tm_tensor.attention`, which requires the mask's batch dimensions to equal the
    query's and does not broadcast ("query and mask batch dimension mismatch": TinyViT's attention
    bias, one per head, for every window of the batch). An explicit expand is what PyTorch's
    broadcasting means; kiln's own lowering (the linalg hand-off) broadcasts either way.
    """
    graph = program.graph_module.graph
    for node in list(graph.nodes):
        if node.target != aten.scaled_dot_product_attention.default:
            continue
        mask = argument(node, 3, "attn_mask")
        if not isinstance(mask, torch.fx.Node):
            continue
        query, mask_value = node.args[0].meta["val"], mask.meta["val"]
        full = [*query.shape[:-1], mask_value.shape[-1]]
        if list(mask_value.shape) == full:
            continue
        with graph.inserting_before(node):
            expanded = graph.call_function(aten.expand.default, (mask, full))
        expanded.meta["val"] = mask_value.expand(full)
        node.replace_input_with(mask, expanded)
    program.graph_module.recompile()
