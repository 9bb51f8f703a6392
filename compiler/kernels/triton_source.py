"""kiln's two GPU contraction kernels, in triton.language.

`kiln_matmul`: C = A @ B with B read through strides (W[N, K] or B[K, N]), f32 accumulation, K loop
pipelined. `kiln_conv2d`: a convolution as an implicit GEMM (rows are output pixels, columns output
channels, the reduction runs over filter taps and channels), for any stride, padding and dilation and
any activation/weight layout (strides again). Every shape, stride and parameter is a `tl.constexpr`,
so a compiled kernel's only launch parameters are its tensor pointers (build.py compiles them).

The source is the one an H100 run measured (benchmarks/results/kernels-h100.json), kept as it ran:
its batch dimension (program_id 1; kiln launches one batch) and its bias epilogue (kiln passes
bias_ptr None, which compiles it away, and adds a bias outside the kernel) are still there.

Importing this module imports Triton: only build.py does, when a kernel is generated.
"""

from __future__ import annotations

import triton
import triton.language as tl


@triton.jit
def _tile_of(
    pid, M: tl.constexpr, N: tl.constexpr, BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, GROUP_M: tl.constexpr
):
    """Program id -> (row tile, column tile), walking GROUP_M row tiles down each column before moving
    right, so the B tiles a group loads stay in L2."""
    tiles_m = tl.cdiv(M, BLOCK_M)
    tiles_n = tl.cdiv(N, BLOCK_N)
    per_group = GROUP_M * tiles_n
    first_m = (pid // per_group) * GROUP_M
    rows = tl.minimum(tiles_m - first_m, GROUP_M)
    return first_m + (pid % per_group) % rows, (pid % per_group) // rows


@triton.jit
def kiln_matmul(
    a_ptr, b_ptr, bias_ptr, c_ptr,
    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
    A_SB: tl.constexpr, A_SM: tl.constexpr, A_SK: tl.constexpr,
    B_SB: tl.constexpr, B_SK: tl.constexpr, B_SN: tl.constexpr,
    C_SB: tl.constexpr, C_SM: tl.constexpr, C_SN: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """One BLOCK_M x BLOCK_N tile of C for batch program_id(1); f32 accumulation, K loop pipelined."""
    tile_m, tile_n = _tile_of(tl.program_id(0), M, N, BLOCK_M, BLOCK_N, GROUP_M)
    batch = tl.program_id(1)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    ks = tl.arange(0, BLOCK_K)
    # Rows and columns past the edge read row/column 0 (always in bounds) instead of masking the loads:
    # their results are never stored.
    safe_rows = tl.where(rows < M, rows, 0)
    safe_cols = tl.where(cols < N, cols, 0)
    a_tile = a_ptr + batch * A_SB + safe_rows[:, None] * A_SM + ks[None, :] * A_SK
    b_tile = b_ptr + batch * B_SB + ks[:, None] * B_SK + safe_cols[None, :] * B_SN
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    for step in range(tl.cdiv(K, BLOCK_K)):
        if K % BLOCK_K == 0:
            a = tl.load(a_tile)
            b = tl.load(b_tile)
        else:
            left = K - step * BLOCK_K
            a = tl.load(a_tile, mask=ks[None, :] < left, other=0.0)
            b = tl.load(b_tile, mask=ks[:, None] < left, other=0.0)
        acc = tl.dot(a, b, acc, input_precision=PRECISION)
        a_tile += BLOCK_K * A_SK
        b_tile += BLOCK_K * B_SK
    if bias_ptr is not None:
        acc += tl.load(bias_ptr + safe_cols).to(tl.float32)[None, :]
    c_tile = c_ptr + batch * C_SB + rows[:, None] * C_SM + cols[None, :] * C_SN
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def kiln_conv2d(
    x_ptr, w_ptr, bias_ptr, y_ptr,
    BATCH: tl.constexpr, H: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
    K_OUT: tl.constexpr, R: tl.constexpr, S: tl.constexpr, P: tl.constexpr, Q: tl.constexpr,
    STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
    DIL_H: tl.constexpr, DIL_W: tl.constexpr,
    X_SN: tl.constexpr, X_SC: tl.constexpr, X_SH: tl.constexpr, X_SW: tl.constexpr,
    W_SK: tl.constexpr, W_SC: tl.constexpr, W_SR: tl.constexpr, W_SS: tl.constexpr,
    Y_SN: tl.constexpr, Y_SK: tl.constexpr, Y_SP: tl.constexpr, Y_SQ: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr, CHANNEL_STEPS: tl.constexpr,
):  # fmt: skip
    """Implicit GEMM: rows are output pixels (n, p, q), columns output channels, the reduction runs over
    (r, s, c). With CHANNEL_STEPS (C >= BLOCK_K), one loop step is one filter tap (r, s) and BLOCK_K
    consecutive channels, so the loads run along c; otherwise (few channels, e.g. an RGB stem) each
    step takes BLOCK_K consecutive (r, s, c) indices. Taps outside the image read as zero (padding)."""
    M: tl.constexpr = BATCH * P * Q
    tile_m, tile_n = _tile_of(tl.program_id(0), M, K_OUT, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    safe_cols = tl.where(cols < K_OUT, cols, 0)
    image = rows // (P * Q)
    p = (rows // Q) % P
    q = rows % Q
    h0 = p * STRIDE_H - PAD_H
    w0 = q * STRIDE_W - PAD_W
    x_rows = x_ptr + image * X_SN
    w_cols = w_ptr + safe_cols * W_SK
    ks = tl.arange(0, BLOCK_K)
    acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if CHANNEL_STEPS:
        chunks: tl.constexpr = tl.cdiv(C, BLOCK_K)
        for step in range(R * S * chunks):
            tap = step // chunks
            c = (step % chunks) * BLOCK_K + ks
            r = tap // S
            s = tap % S
            h = h0 + r * DIL_H
            w = w0 + s * DIL_W
            inside = (rows < M) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            a_ptrs = x_rows[:, None] + h[:, None] * X_SH + w[:, None] * X_SW + c[None, :] * X_SC
            b_ptrs = w_cols[None, :] + r * W_SR + s * W_SS + c[:, None] * W_SC
            if C % BLOCK_K == 0:
                a = tl.load(a_ptrs, mask=inside[:, None], other=0.0)
                b = tl.load(b_ptrs)
            else:
                a = tl.load(a_ptrs, mask=inside[:, None] & (c[None, :] < C), other=0.0)
                b = tl.load(b_ptrs, mask=c[:, None] < C, other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    else:
        for step in range(tl.cdiv(R * S * C, BLOCK_K)):
            k = step * BLOCK_K + ks
            c = k % C
            r = k // (S * C)
            s = (k // C) % S
            h = h0[:, None] + r[None, :] * DIL_H
            w = w0[:, None] + s[None, :] * DIL_W
            live = k < R * S * C
            inside = (rows[:, None] < M) & live[None, :] & (h >= 0) & (h < H) & (w >= 0) & (w < W)
            a = tl.load(x_rows[:, None] + h * X_SH + w * X_SW + c[None, :] * X_SC, mask=inside, other=0.0)
            b_ptrs = w_cols[None, :] + (r * W_SR + s * W_SS + c * W_SC)[:, None]
            b = tl.load(b_ptrs, mask=live[:, None], other=0.0)
            acc = tl.dot(a, b, acc, input_precision=PRECISION)
    if bias_ptr is not None:
        acc += tl.load(bias_ptr + safe_cols).to(tl.float32)[None, :]
    y_ptrs = y_ptr + (image * Y_SN + p * Y_SP + q * Y_SQ)[:, None] + cols[None, :] * Y_SK
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < K_OUT))
