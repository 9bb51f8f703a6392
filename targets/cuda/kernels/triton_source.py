"""kiln's GPU contraction kernels, in triton.language.

`kiln_matmul`: C = A @ B with B read through strides (W[N, K] or B[K, N]), f32 accumulation, K loop
pipelined; `kiln_gemv`, the same product for a few rows, without tensor cores, and
`kiln_gemv_quantized`, over int8 or int4 weights (`--quantize`). `kiln_conv2d`: a convolution as an implicit GEMM (rows are output pixels, columns output
channels, the reduction runs over filter taps and channels), for any stride, padding and dilation and
any activation/weight layout (strides again). `kiln_depthwise_conv2d`: a depthwise convolution as a
stencil of f32 FMAs over a tile of pixels by channels, or without weights a max pooling. `kiln_attention`: flash attention's forward pass
(online softmax over key blocks), causal or masked or neither, reading and writing any [batch,
heads, seq] strides; `kiln_attention_row`, the same for one query row a program (a decode step). Every shape, stride and parameter is a `tl.constexpr`, so a compiled kernel's
only launch parameters are its tensor pointers (build.py compiles them).

The matmul and convolution sources are the ones an H100 run measured
(benchmarks/results/kernels-h100.json), kept as they ran: the matmul's batch dimension (program_id 1;
kiln launches one batch) is still there. The matmul's bias epilogue adds nn.Linear's bias to the f32
accumulator before the one rounding (kiln passes bias_ptr None where there is none, which compiles
it away), and a generated epilogue computes the elementwise ops after the product on its tile (a
GELU; and in the GEMV, SwiGLU's silu(gate) * up over the products of two weights); the convolutions' epilogue scales, shifts and clamps it per channel the same way
(batch norm, a bias, ReLU/ReLU6 fused; a convolution's bias alone is added outside the kernel).

Importing this module imports Triton: only build.py does, when a kernel is generated.
"""

from __future__ import annotations

import triton
import triton.language as tl

from . import tiles


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
    PRECISION: tl.constexpr, EPILOGUE: tl.constexpr,
):  # fmt: skip
    """One BLOCK_M x BLOCK_N tile of C for batch program_id(1); f32 accumulation, K loop pipelined;
    EPILOGUE (a generated function, row_source.py) computes the result from the f32 product."""
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
    if EPILOGUE is not None:
        acc = EPILOGUE(acc, acc)  # no second product here (kiln_gemv's)
    c_tile = c_ptr + batch * C_SB + rows[:, None] * C_SM + cols[None, :] * C_SN
    tl.store(c_tile, acc.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < N))


@triton.jit
def _stacked_part(block, N: tl.constexpr, N1: tl.constexpr, N2: tl.constexpr, BLOCK_N: tl.constexpr, THREE: tl.constexpr):
    """A GEMV program's (block within its weight, which weight 0-2, that weight's width, its first
    column in C): without stacked weights (N1 == 0), the one weight of N columns."""
    if N1 == 0:
        part, width, first = 0, N, 0
    else:
        tiles1 = (N1 + BLOCK_N - 1) // BLOCK_N
        tiles2 = (N2 + BLOCK_N - 1) // BLOCK_N
        part = tl.where(block >= tiles1, 1, 0)
        if THREE:
            part = tl.where(block >= tiles1 + tiles2, 2, part)
        block -= tl.where(part >= 1, tiles1, 0) + tl.where(part == 2, tiles2, 0)
        width = tl.where(part == 0, N1, tl.where(part == 1, N2, N - N1 - N2))
        first = tl.where(part == 0, 0, tl.where(part == 1, N1, N1 + N2))
    return block, part, width, first


@triton.jit
def _pick(part, first, second, third):
    """One of the stacked weights' pointers (third None: two weights)."""
    chosen = tl.where(part == 1, second, first)
    if third is not None:
        chosen = tl.where(part == 2, third, chosen)
    return chosen


@triton.jit
def kiln_gemv(
    a_ptr, b_ptr, bias_ptr, b2_ptr, bias2_ptr, b3_ptr, bias3_ptr, c_ptr,
    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr,
    B_SK: tl.constexpr, B_SN: tl.constexpr, N1: tl.constexpr, N2: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE: tl.constexpr,
):  # fmt: skip
    """C[M, N] = A[M, K] @ W[N, K]^T for a few rows (M <= BLOCK_M <= 8): BLOCK_N outputs of every row.

    A GEMV reads each weight once and is bound by memory: no tensor cores (a 16-row MMA tile would be
    mostly padding), f32 products accumulated elementwise across the K loop and reduced once at the
    end, so a step is loads and FMAs only. With a second weight (b2_ptr, read as W is: SwiGLU's gate
    and up in a decode step) each step reads both, the row of A once; EPILOGUE (a generated function,
    row_source.py) computes the result from the f32 products.

    Stacked weights (N1 > 0: a decode step's Q, K and V projections of one input): W is b_ptr's N1
    rows, b2_ptr's N2 and b3_ptr's rest (with their biases), and C their N columns side by side. Each
    program computes BLOCK_N columns of one weight (the programs of each weight in turn), so that
    three small products are one dispatch."""
    block, part, width, first = _stacked_part(tl.program_id(0), N, N1, N2, BLOCK_N, b3_ptr is not None)
    w_ptr = _pick(part, b_ptr, b2_ptr, b3_ptr) if N1 > 0 else b_ptr
    w_bias = _pick(part, bias_ptr, bias2_ptr, bias3_ptr) if N1 > 0 and bias_ptr is not None else bias_ptr
    cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    ks = tl.arange(0, BLOCK_K)
    safe_cols = tl.where(cols < width, cols, 0)
    safe_rows = tl.where(rows < M, rows, 0)
    # [rows, columns, K] tiles, loaded in the accumulator's layout: nothing moves through shared memory
    ks3 = ks[None, None, :]
    w_tile = w_ptr + safe_cols[None, :, None] * B_SN + ks3 * B_SK
    a_tile = a_ptr + safe_rows[:, None, None] * K + ks3
    w2_tile = b2_ptr + safe_cols[None, :, None] * B_SN + ks3 * B_SK if b2_ptr is not None and N1 == 0 else w_tile
    acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
    acc2 = acc
    for step in range(tl.cdiv(K, BLOCK_K)):
        if K % BLOCK_K == 0:
            w = tl.load(w_tile)
            a = tl.load(a_tile)
        else:
            left = K - step * BLOCK_K
            w = tl.load(w_tile, mask=ks3 < left, other=0.0)
            a = tl.load(a_tile, mask=ks3 < left, other=0.0)
        acc += a.to(tl.float32) * w.to(tl.float32)
        if b2_ptr is not None and N1 == 0:
            if K % BLOCK_K == 0:
                w2 = tl.load(w2_tile)
            else:
                w2 = tl.load(w2_tile, mask=ks3 < K - step * BLOCK_K, other=0.0)
            acc2 += a.to(tl.float32) * w2.to(tl.float32)
            w2_tile += BLOCK_K * B_SK
        w_tile += BLOCK_K * B_SK
        a_tile += BLOCK_K
    out = tl.sum(acc, axis=2)
    if bias_ptr is not None:
        out += tl.load(w_bias + safe_cols).to(tl.float32)[None, :]
    if EPILOGUE is not None:
        out = EPILOGUE(out, tl.sum(acc2, axis=2))
    c_tile = c_ptr + rows[:, None] * N + first + cols[None, :]
    tl.store(c_tile, out.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < width))


@triton.jit
def kiln_gemv_quantized(
    a_ptr, b_ptr, s_ptr, bias_ptr, b2_ptr, s2_ptr, bias2_ptr, b3_ptr, s3_ptr, bias3_ptr, c_ptr,
    M: tl.constexpr, N: tl.constexpr, K: tl.constexpr, N1: tl.constexpr, N2: tl.constexpr,
    BITS: tl.constexpr, GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, EPILOGUE: tl.constexpr,
):  # fmt: skip
    """kiln_gemv over weights as `--quantize` stores them (compiler/quantize.py), dequantized in
    registers, never in memory; scales f32, the weights' rows contiguous (W[N, K]).

    BITS 8: int8 values [N, K], a scale per output column, applied to the f32 sum at the end.
    BITS 4: byte j of a row holds input j (low nibble) and j + K/2 (high nibble), each plus 8, with a
    scale per GROUP inputs: a step reads BLOCK_K bytes of each row (BLOCK_K a multiple of GROUP that
    divides K/2), its groups side by side, and multiplies the row of A at both places.
    Stacked weights and a second weight as kiln_gemv, each with its scales (s2_ptr, s3_ptr)."""
    block, part, width, first = _stacked_part(tl.program_id(0), N, N1, N2, BLOCK_N, b3_ptr is not None)
    w_ptr = _pick(part, b_ptr, b2_ptr, b3_ptr) if N1 > 0 else b_ptr
    w_scale = _pick(part, s_ptr, s2_ptr, s3_ptr) if N1 > 0 else s_ptr
    w_bias = _pick(part, bias_ptr, bias2_ptr, bias3_ptr) if N1 > 0 and bias_ptr is not None else bias_ptr
    second: tl.constexpr = b2_ptr is not None and N1 == 0
    cols = block * BLOCK_N + tl.arange(0, BLOCK_N)
    rows = tl.arange(0, BLOCK_M)
    safe_cols = tl.where(cols < width, cols, 0)
    safe_rows = tl.where(rows < M, rows, 0)
    # Every load is a [rows, columns, K] tile in the accumulator's own layout: A's rows [BLOCK_M, 1, K],
    # the weights' [1, BLOCK_N, K], so no operand is moved between layouts (through shared memory) per step.
    rows3 = safe_rows[:, None, None]
    cols3 = safe_cols[None, :, None]
    if BITS == 8:
        ks = tl.arange(0, BLOCK_K)[None, None, :]
        acc = tl.zeros((BLOCK_M, BLOCK_N, BLOCK_K), dtype=tl.float32)
        acc2 = acc
        for step in range(tl.cdiv(K, BLOCK_K)):
            inside = ks < K - step * BLOCK_K
            at = step * BLOCK_K + ks
            a = tl.load(a_ptr + rows3 * K + at, mask=inside, other=0.0).to(tl.float32)
            acc += a * _exact_f32(tl.load(w_ptr + cols3 * K + at, mask=inside, other=0), 8)
            if second:
                acc2 += a * _exact_f32(tl.load(b2_ptr + cols3 * K + at, mask=inside, other=0), 8)
        out = tl.sum(acc, axis=2) * tl.load(w_scale + safe_cols)[None, :]
        out2 = tl.sum(acc2, axis=2) * tl.load(s2_ptr + safe_cols)[None, :] if second else out
    else:  # [rows, columns, groups, inputs] tiles: a step's groups side by side, one layout for all
        SUB: tl.constexpr = BLOCK_K // GROUP
        at = (tl.arange(0, SUB)[:, None] * GROUP + tl.arange(0, GROUP)[None, :])[None, None, :, :]
        groups = tl.arange(0, SUB)[None, None, :, None]
        rows4, cols4 = rows3[:, :, :, None], cols3[:, :, :, None]
        acc = tl.zeros((BLOCK_M, BLOCK_N, SUB, GROUP), dtype=tl.float32)
        acc2 = acc
        for step in range(K // 2 // BLOCK_K):
            a_low = tl.load(a_ptr + rows4 * K + step * BLOCK_K + at).to(tl.float32)
            a_high = tl.load(a_ptr + rows4 * K + K // 2 + step * BLOCK_K + at).to(tl.float32)
            group = step * SUB + groups
            acc = _nibble_products(acc, w_ptr, w_scale, cols4, step * BLOCK_K + at, group, a_low, a_high, K, GROUP)
            if second:
                acc2 = _nibble_products(acc2, b2_ptr, s2_ptr, cols4, step * BLOCK_K + at, group, a_low, a_high, K, GROUP)
        out = tl.sum(tl.sum(acc, axis=3), axis=2)
        out2 = tl.sum(tl.sum(acc2, axis=3), axis=2)
    if bias_ptr is not None:
        out += tl.load(w_bias + safe_cols).to(tl.float32)[None, :]
    if EPILOGUE is not None:
        out = EPILOGUE(out, out2)
    c_tile = c_ptr + rows[:, None] * N + first + cols[None, :]
    tl.store(c_tile, out.to(c_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (cols[None, :] < width))


@triton.jit
def _exact_f32(byte, BITS: tl.constexpr):
    """An int8 (BITS 8) or a nibble stored plus 8 (BITS 4: `byte` already masked to 0-15) as its f32
    value, exactly, with bit operations and one subtraction: the float whose bits are 2^23's with a
    byte u in the low mantissa bits is 2^23 + u. An 8-bit integer's own conversion (I2F.S8) runs at a
    quarter of the FMAs' rate on Hopper and bounded the quantized GEMV (LLVM folds a detour through
    int32 back into it)."""
    if BITS == 8:  # the signed byte, its sign bit flipped: u = q + 128
        value = ((byte.to(tl.int32) & 0xFF) ^ 0x4B000080).to(tl.float32, bitcast=True) - 8388736.0
    else:
        value = (byte | 0x4B000000).to(tl.float32, bitcast=True) - 8388616.0
    return value


@triton.jit
def _nibble_products(acc, w_ptr, s_ptr, cols, at, group, a_low, a_high, K: tl.constexpr, GROUP: tl.constexpr):
    """`acc` plus a step of BLOCK_N int4 rows times A's rows at both halves ([BLOCK_M, BLOCK_N, groups,
    GROUP] f32; `cols` [1, BLOCK_N, 1, 1], `at` the step's bytes [1, 1, groups, GROUP], `group` the
    low half's groups [1, 1, groups, 1], `a_low` and `a_high` [BLOCK_M, 1, groups, GROUP])."""
    packed = tl.load(w_ptr.to(tl.pointer_type(tl.uint8)) + cols * (K // 2) + at).to(tl.int32)  # no sign to extend
    s_low = tl.load(s_ptr + cols * (K // GROUP) + group)
    s_high = tl.load(s_ptr + cols * (K // GROUP) + K // 2 // GROUP + group)
    acc += a_low * (_exact_f32(packed & 15, 4) * s_low)
    acc += a_high * (_exact_f32((packed >> 4) & 15, 4) * s_high)
    return acc


@triton.jit
def kiln_cache_write(
    pos_ptr, new_ptr, cache_ptr,
    ROWS: tl.constexpr, TOKENS: tl.constexpr, SEQ: tl.constexpr, DIM: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """cache[row, p + t, :] = new[row, t, :] (rows: batch x heads) for the slots p + t inside [0, SEQ),
    p = pos_ptr[0] read here, on the device: BLOCK elements of `new` a program. The cache buffer is the
    dispatch's tied result, so every other slot keeps what it held."""
    start = tl.load(pos_ptr).to(tl.int32)
    index = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    inside = index < ROWS * TOKENS * DIM
    row, token, dim = index // (TOKENS * DIM), (index // DIM) % TOKENS, index % DIM
    slot = start + token
    value = tl.load(new_ptr + index, mask=inside)
    tl.store(cache_ptr + (row * SEQ + slot) * DIM + dim, value, mask=inside & (slot >= 0) & (slot < SEQ))


@triton.jit
def kiln_rotary_cache_write(
    pos_ptr, q_ptr, k_ptr, v_ptr, cos_ptr, sin_ptr, kc_ptr, vc_ptr, qo_ptr,
    Q_HEADS: tl.constexpr, KV_HEADS: tl.constexpr, SEQ: tl.constexpr, DIM: tl.constexpr,
    COS_BATCH: tl.constexpr, BLOCK: tl.constexpr,
):  # fmt: skip
    """One program a head of one row: a query head rotated into qo; a key head rotated, or a value head
    as it is, written at slot p = pos_ptr[0] of its cache (when p lies in [0, SEQ)). The rotation is
    x * cos + rotate_half(x) * sin, rotate_half(x)[d] = -x[d + DIM/2] below DIM/2 and x[d - DIM/2]
    above; both products and their sum are rounded to the dtype, as eager's three ops round them."""
    heads: tl.constexpr = Q_HEADS + 2 * KV_HEADS
    row, head = tl.program_id(0) // heads, tl.program_id(0) % heads
    d = tl.arange(0, BLOCK)
    inside = d < DIM
    half: tl.constexpr = DIM // 2
    partner = tl.where(d < half, d + half, d - half)
    angle = (row % COS_BATCH) * DIM + d
    cos = tl.load(cos_ptr + angle, mask=inside).to(tl.float32)
    sin = tl.load(sin_ptr + angle, mask=inside).to(tl.float32)
    sign = tl.where(d < half, -1.0, 1.0)
    slot = tl.load(pos_ptr).to(tl.int32) + 0 * d  # a vector: the masks below are elementwise
    in_cache = inside & (slot >= 0) & (slot < SEQ)
    if head < Q_HEADS:
        source = q_ptr + (row * Q_HEADS + head) * DIM
        rotated = _rotated(source, d, partner, inside, cos, sin, sign, qo_ptr.dtype.element_ty)
        tl.store(qo_ptr + (row * Q_HEADS + head) * DIM + d, rotated, mask=inside)
    elif head < Q_HEADS + KV_HEADS:
        kv = row * KV_HEADS + head - Q_HEADS
        rotated = _rotated(k_ptr + kv * DIM, d, partner, inside, cos, sin, sign, kc_ptr.dtype.element_ty)
        tl.store(kc_ptr + (kv * SEQ + slot) * DIM + d, rotated, mask=in_cache)
    else:
        kv = row * KV_HEADS + head - Q_HEADS - KV_HEADS
        tl.store(vc_ptr + (kv * SEQ + slot) * DIM + d, tl.load(v_ptr + kv * DIM + d, mask=inside), mask=in_cache)


@triton.jit
def _rotated(source, d, partner, inside, cos, sin, sign, dtype: tl.constexpr):
    """x * cos + rotate_half(x) * sin for the head at `source`, each of the three steps rounded to `dtype`."""
    x = tl.load(source + d, mask=inside).to(tl.float32)
    turned = tl.load(source + partner, mask=inside).to(tl.float32) * sign
    straight = (x * cos).to(dtype).to(tl.float32)
    across = (turned * sin).to(dtype).to(tl.float32)
    return (straight + across).to(dtype)


@triton.jit
def _output_pixels(rows, P: tl.constexpr, Q: tl.constexpr, STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr,
                   PAD_H: tl.constexpr, PAD_W: tl.constexpr):  # fmt: skip
    """Flat output pixel indices -> (image, p, q) and the input row and column of their first tap."""
    image = rows // (P * Q)
    p = (rows // Q) % P
    q = rows % Q
    return image, p, q, p * STRIDE_H - PAD_H, q * STRIDE_W - PAD_W


@triton.jit
def _channel_epilogue(acc, channels, scale_ptr, shift_ptr, CLAMP_LO: tl.constexpr, CLAMP_HI: tl.constexpr):
    """A convolution's fused epilogue on its f32 tile (columns are `channels`): times scale[channel],
    plus shift[channel] (batch norm, a bias), clamped to [CLAMP_LO, CLAMP_HI] (ReLU, ReLU6). Each part
    the kernel is not given (None) compiles away."""
    if scale_ptr is not None:
        acc = acc * tl.load(scale_ptr + channels)[None, :]
    if shift_ptr is not None:
        acc = acc + tl.load(shift_ptr + channels)[None, :]
    if CLAMP_LO is not None:
        acc = tl.maximum(acc, CLAMP_LO)
    if CLAMP_HI is not None:
        acc = tl.minimum(acc, CLAMP_HI)
    return acc


@triton.jit
def kiln_conv2d(
    x_ptr, w_ptr, scale_ptr, shift_ptr, y_ptr,
    BATCH: tl.constexpr, H: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
    K_OUT: tl.constexpr, R: tl.constexpr, S: tl.constexpr, P: tl.constexpr, Q: tl.constexpr,
    STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
    DIL_H: tl.constexpr, DIL_W: tl.constexpr,
    X_SN: tl.constexpr, X_SC: tl.constexpr, X_SH: tl.constexpr, X_SW: tl.constexpr,
    W_SK: tl.constexpr, W_SC: tl.constexpr, W_SR: tl.constexpr, W_SS: tl.constexpr,
    Y_SN: tl.constexpr, Y_SK: tl.constexpr, Y_SP: tl.constexpr, Y_SQ: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_K: tl.constexpr, GROUP_M: tl.constexpr,
    PRECISION: tl.constexpr, CHANNEL_STEPS: tl.constexpr, CLAMP_LO: tl.constexpr, CLAMP_HI: tl.constexpr,
    GROUPS: tl.constexpr,
):  # fmt: skip
    """Implicit GEMM: rows are output pixels (n, p, q), columns output channels, the reduction runs over
    (r, s, c). With CHANNEL_STEPS (C >= BLOCK_K), one loop step is one filter tap (r, s) and BLOCK_K
    consecutive channels, so the loads run along c; otherwise (few channels, e.g. an RGB stem) each
    step takes BLOCK_K consecutive (r, s, c) indices. Taps outside the image read as zero (padding).
    A grouped convolution is GROUPS such GEMMs side by side, C and K_OUT the channels of one group:
    group g reads input channels [g*C, (g+1)*C) and writes output channels [g*K_OUT, (g+1)*K_OUT)."""
    M: tl.constexpr = BATCH * P * Q
    per_group: tl.constexpr = tl.cdiv(M, BLOCK_M) * tl.cdiv(K_OUT, BLOCK_N)
    group = tl.program_id(0) // per_group
    tile_m, tile_n = _tile_of(tl.program_id(0) % per_group, M, K_OUT, BLOCK_M, BLOCK_N, GROUP_M)
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    local_cols = tile_n * BLOCK_N + tl.arange(0, BLOCK_N)
    cols = group * K_OUT + local_cols
    safe_cols = group * K_OUT + tl.where(local_cols < K_OUT, local_cols, 0)
    image, p, q, h0, w0 = _output_pixels(rows, P, Q, STRIDE_H, STRIDE_W, PAD_H, PAD_W)
    x_rows = x_ptr + image * X_SN + group * C * X_SC
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
    acc = _channel_epilogue(acc, safe_cols, scale_ptr, shift_ptr, CLAMP_LO, CLAMP_HI)
    y_ptrs = y_ptr + (image * Y_SN + p * Y_SP + q * Y_SQ)[:, None] + cols[None, :] * Y_SK
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & (local_cols[None, :] < K_OUT))


UNROLLED_TAPS = tl.constexpr(tiles.UNROLLED_TAPS)


@triton.jit
def kiln_depthwise_conv2d(
    x_ptr, w_ptr, scale_ptr, shift_ptr, y_ptr,
    BATCH: tl.constexpr, H: tl.constexpr, W: tl.constexpr, C: tl.constexpr,
    R: tl.constexpr, S: tl.constexpr, P: tl.constexpr, Q: tl.constexpr,
    STRIDE_H: tl.constexpr, STRIDE_W: tl.constexpr, PAD_H: tl.constexpr, PAD_W: tl.constexpr,
    DIL_H: tl.constexpr, DIL_W: tl.constexpr,
    X_SN: tl.constexpr, X_SC: tl.constexpr, X_SH: tl.constexpr, X_SW: tl.constexpr,
    W_SC: tl.constexpr, W_SR: tl.constexpr, W_SS: tl.constexpr,
    Y_SN: tl.constexpr, Y_SC: tl.constexpr, Y_SP: tl.constexpr, Y_SQ: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, CLAMP_LO: tl.constexpr, CLAMP_HI: tl.constexpr,
):  # fmt: skip
    """A depthwise convolution (one R x S filter per channel): a BLOCK_M x BLOCK_N tile of output
    pixels (n, p, q) by channels, each the sum over the filter's taps of input times weight in f32
    FMAs; no tensor cores, since nothing is summed across channels. In NHWC a tap's loads run along
    the channels. Taps outside the image read as zero (padding). Without weights (w_ptr None) it is
    a max pooling: the maximum over the window, taps outside reading as -inf."""
    M: tl.constexpr = BATCH * P * Q
    pid = tl.program_id(0)
    tiles_n: tl.constexpr = tl.cdiv(C, BLOCK_N)
    rows = (pid // tiles_n) * BLOCK_M + tl.arange(0, BLOCK_M)
    cols = (pid % tiles_n) * BLOCK_N + tl.arange(0, BLOCK_N)
    live = cols < C
    image, p, q, h0, w0 = _output_pixels(rows, P, Q, STRIDE_H, STRIDE_W, PAD_H, PAD_W)
    x_rows = x_ptr + image * X_SN
    if w_ptr is None:
        acc = tl.full((BLOCK_M, BLOCK_N), float("-inf"), dtype=tl.float32)
    else:
        acc = tl.zeros((BLOCK_M, BLOCK_N), dtype=tl.float32)
    if R * S <= UNROLLED_TAPS:
        for r in tl.static_range(R):
            acc = _filter_row(acc, x_rows, w_ptr, rows, cols, live, h0 + r * DIL_H, w0, r, M, H, W, S, DIL_W, X_SC, X_SH, X_SW, W_SC, W_SR, W_SS)
    else:
        for r in range(R):
            acc = _filter_row(acc, x_rows, w_ptr, rows, cols, live, h0 + r * DIL_H, w0, r, M, H, W, S, DIL_W, X_SC, X_SH, X_SW, W_SC, W_SR, W_SS)
    acc = _channel_epilogue(acc, tl.where(live, cols, 0), scale_ptr, shift_ptr, CLAMP_LO, CLAMP_HI)
    y_ptrs = y_ptr + (image * Y_SN + p * Y_SP + q * Y_SQ)[:, None] + cols[None, :] * Y_SC
    tl.store(y_ptrs, acc.to(y_ptr.dtype.element_ty), mask=(rows[:, None] < M) & live[None, :])


@triton.jit
def _filter_row(
    acc, x_rows, w_ptr, rows, cols, live, h, w0, r, M: tl.constexpr, H: tl.constexpr, W: tl.constexpr,
    S: tl.constexpr, DIL_W: tl.constexpr, X_SC: tl.constexpr, X_SH: tl.constexpr, X_SW: tl.constexpr,
    W_SC: tl.constexpr, W_SR: tl.constexpr, W_SS: tl.constexpr,
):  # fmt: skip
    """The S taps of filter row `r` (input row `h`) into `acc`: kiln_depthwise_conv2d's inner loop."""
    for s in tl.static_range(S):
        w = w0 + s * DIL_W
        inside = (rows < M) & (h >= 0) & (h < H) & (w >= 0) & (w < W)
        x_ptrs = x_rows[:, None] + (h * X_SH + w * X_SW)[:, None] + cols[None, :] * X_SC
        if w_ptr is None:
            x = tl.load(x_ptrs, mask=inside[:, None] & live[None, :], other=float("-inf"))
            acc = tl.maximum(acc, x.to(tl.float32), propagate_nan=tl.PropagateNan.ALL)  # as PyTorch does
        else:
            x = tl.load(x_ptrs, mask=inside[:, None] & live[None, :], other=0.0)
            tap = tl.load(w_ptr + cols * W_SC + r * W_SR + s * W_SS, mask=live, other=0.0)
            acc += x.to(tl.float32) * tap.to(tl.float32)[None, :]
    return acc


@triton.jit
def _head_load(pointers, inside, PADDED: tl.constexpr):
    """A load along the head dimension; where it is padded to a power of two (PADDED: Phi-2's 80 as
    128), the padding reads 0 and adds nothing to either product."""
    if PADDED:
        value = tl.load(pointers, mask=inside, other=0.0)
    else:
        value = tl.load(pointers)
    return value


@triton.jit
def _attend(
    q, acc, m_i, l_i, k_base, v_base, mask_base, rows, safe_rows, start, end,
    K_SS: tl.constexpr, V_SS: tl.constexpr, SEQ_K: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_BLOCK: tl.constexpr,
    M_SQ: tl.constexpr, M_SK: tl.constexpr, MASK: tl.constexpr,
    BLOCK_N: tl.constexpr, QK_SCALE: tl.constexpr, CAUSAL: tl.constexpr, MASKED: tl.constexpr,
    PRECISION: tl.constexpr,
):  # fmt: skip
    """Key/value blocks [start, end) into the running softmax (base-2 exponentials, max-subtracted):
    `acc` the unnormalized output rows, `m_i` their running maxima, `l_i` their running sums. MASKED:
    columns past SEQ_K (and, causal, past each row) count as -inf, and the mask tensor applies (MASK 1:
    a nonzero byte keeps a score, 0 makes it -inf; MASK 2: added to the scores); unmasked blocks are
    wholly valid. A row with no score kept so far keeps m_i = -inf and adds nothing (no NaN)."""
    dims = tl.arange(0, HEAD_BLOCK)
    in_head = dims < HEAD_DIM
    for first in range(start, end, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        safe_cols = tl.where(cols < SEQ_K, cols, 0) if MASKED else cols
        k = _head_load(k_base + safe_cols[None, :] * K_SS + dims[:, None], in_head[:, None], HEAD_BLOCK != HEAD_DIM)
        s = tl.dot(q, k, input_precision=PRECISION) * QK_SCALE
        if MASKED:
            valid = cols[None, :] < SEQ_K
            if CAUSAL:
                valid = valid & (cols[None, :] <= rows[:, None])
            if MASK != 0:
                given = tl.load(mask_base + safe_rows[:, None] * M_SQ + safe_cols[None, :] * M_SK)
                if MASK == 1:
                    valid = valid & (given != 0)
                else:
                    s += given.to(tl.float32) * 1.4426950408889634  # log2(e): the scores are in base 2
            s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 1))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe[:, None])
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 1)
        v = _head_load(v_base + safe_cols[:, None] * V_SS + dims[None, :], in_head[None, :], HEAD_BLOCK != HEAD_DIM)
        acc = tl.dot(p.to(v.dtype), v, acc * alpha[:, None], input_precision=PRECISION)
        m_i = m_new
    return acc, m_i, l_i


@triton.jit
def _visible_end(mask_base, end, M_SK: tl.constexpr, MASK: tl.constexpr, BLOCK_N: tl.constexpr):
    """One past the last of the columns [0, end) that one mask row keeps, or `end` where it keeps none,
    so that the key blocks after it are not read at all: a decode step's cache beyond its position
    (kiln's --generate masks it), a padded batch's tail. An additive mask hides a column with a value at
    or below float16's lowest (-65504; -inf, or any dtype's finfo.min as transformers writes it): its
    exponential is exactly 0 in f32 beside any kept column, so skipping it changes nothing. Reading
    the row costs one element a key, against the 2 x head-dimension elements of K and V a key."""
    last = tl.max(tl.full((BLOCK_N,), -1, dtype=tl.int32), 0)
    for first in range(0, end, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        inside = cols < end
        given = tl.load(mask_base + tl.where(inside, cols, 0) * M_SK)
        if MASK == 1:
            kept = given != 0
        else:
            kept = given.to(tl.float32) > -65504.0
        last = tl.maximum(last, tl.max(tl.where(kept & inside, cols, -1), 0))
    return tl.where(last >= 0, last + 1, end)


@triton.jit
def kiln_attention(
    q_ptr, k_ptr, v_ptr, mask_ptr, o_ptr,
    HEADS: tl.constexpr, SEQ_Q: tl.constexpr, SEQ_K: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_BLOCK: tl.constexpr,
    Q_SB: tl.constexpr, Q_SH: tl.constexpr, Q_SS: tl.constexpr,
    K_SB: tl.constexpr, K_SH: tl.constexpr, K_SS: tl.constexpr,
    V_SB: tl.constexpr, V_SH: tl.constexpr, V_SS: tl.constexpr,
    O_SB: tl.constexpr, O_SH: tl.constexpr, O_SS: tl.constexpr,
    Q_OFF: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr,
    M_SB: tl.constexpr, M_SH: tl.constexpr, M_SQ: tl.constexpr, M_SK: tl.constexpr, MASK: tl.constexpr,
    QK_SCALE: tl.constexpr, CAUSAL: tl.constexpr, KV_GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Flash attention, forward: BLOCK_M query rows of one (batch, head) (program_id 0, program_id 1),
    streaming over key/value blocks with an online softmax, so the seq_q x seq_k scores never reach
    memory. QK_SCALE is the softmax scale times log2(e). Causal (top-left aligned, as PyTorch's
    is_causal): blocks wholly left of the diagonal run unmasked, those across it masked, those right of
    it not at all. A mask tensor (MASK 1: bytes, nonzero keeps; 2: additive) is read through its
    strides, 0 along the dimensions it broadcasts; with one every block is masked, and where the
    tile's rows share one mask row no key block after the last column it keeps is read
    (_visible_end). A row no score is kept in comes out 0 (PyTorch's safe softmax), not NaN. Every dimension's stride is a constant; the
    head dimension's is 1. Q, K and V start *_OFF elements into their buffers (one packed QKV tensor
    given three times). Grouped heads (GQA, MQA): KV_GROUP query heads share a key/value head, read
    where it is rather than repeated."""
    tile_m = tl.program_id(0)
    batch = tl.program_id(1) // HEADS
    head = tl.program_id(1) % HEADS
    rows = tile_m * BLOCK_M + tl.arange(0, BLOCK_M)
    dims = tl.arange(0, HEAD_BLOCK)
    in_head = dims < HEAD_DIM
    safe_rows = tl.where(rows < SEQ_Q, rows, 0)  # rows past the end read row 0 and are never stored
    q = _head_load(q_ptr + Q_OFF + batch * Q_SB + head * Q_SH + safe_rows[:, None] * Q_SS + dims[None, :], in_head[None, :], HEAD_BLOCK != HEAD_DIM)
    k_base = k_ptr + K_OFF + batch * K_SB + (head // KV_GROUP) * K_SH
    v_base = v_ptr + V_OFF + batch * V_SB + (head // KV_GROUP) * V_SH
    acc = tl.zeros((BLOCK_M, HEAD_BLOCK), dtype=tl.float32)
    m_i = tl.full((BLOCK_M,), float("-inf"), dtype=tl.float32)
    l_i = tl.zeros((BLOCK_M,), dtype=tl.float32)
    mask_base = q_ptr  # not read without a mask (mask_ptr is None then)
    if MASK != 0:
        mask_base = mask_ptr + batch * M_SB + head * M_SH
    whole = (SEQ_K // BLOCK_N) * BLOCK_N  # key blocks with no column past SEQ_K
    if MASK != 0:
        whole = 0  # the mask applies everywhere
    if CAUSAL:
        unmasked_end = tl.minimum(tile_m * BLOCK_M, whole)  # BLOCK_M is a multiple of BLOCK_N
        end = tl.minimum((tile_m + 1) * BLOCK_M, SEQ_K)
    else:
        unmasked_end = whole
        end = SEQ_K
    if MASK != 0 and M_SQ == 0:  # every row of the tile reads one mask row
        end = _visible_end(mask_base, end, M_SK, MASK, BLOCK_N)
    acc, m_i, l_i = _attend(
        q, acc, m_i, l_i, k_base, v_base, mask_base, rows, safe_rows, 0, unmasked_end,
        K_SS, V_SS, SEQ_K, HEAD_DIM, HEAD_BLOCK, M_SQ, M_SK, MASK, BLOCK_N, QK_SCALE, CAUSAL, False, PRECISION,
    )  # fmt: skip
    acc, m_i, l_i = _attend(
        q, acc, m_i, l_i, k_base, v_base, mask_base, rows, safe_rows, unmasked_end, end,
        K_SS, V_SS, SEQ_K, HEAD_DIM, HEAD_BLOCK, M_SQ, M_SK, MASK, BLOCK_N, QK_SCALE, CAUSAL, True, PRECISION,
    )  # fmt: skip
    out = tl.where(l_i[:, None] > 0, acc / l_i[:, None], 0.0)
    o_ptrs = o_ptr + batch * O_SB + head * O_SH + rows[:, None] * O_SS + dims[None, :]
    tl.store(o_ptrs, out.to(o_ptr.dtype.element_ty), mask=(rows[:, None] < SEQ_Q) & in_head[None, :])


@triton.jit
def kiln_attention_row(
    q_ptr, k_ptr, v_ptr, mask_ptr, o_ptr,
    HEADS: tl.constexpr, SEQ_Q: tl.constexpr, SEQ_K: tl.constexpr, HEAD_DIM: tl.constexpr, HEAD_BLOCK: tl.constexpr,
    Q_SB: tl.constexpr, Q_SH: tl.constexpr, Q_SS: tl.constexpr,
    K_SB: tl.constexpr, K_SH: tl.constexpr, K_SS: tl.constexpr,
    V_SB: tl.constexpr, V_SH: tl.constexpr, V_SS: tl.constexpr,
    O_SB: tl.constexpr, O_SH: tl.constexpr, O_SS: tl.constexpr,
    Q_OFF: tl.constexpr, K_OFF: tl.constexpr, V_OFF: tl.constexpr,
    M_SB: tl.constexpr, M_SH: tl.constexpr, M_SQ: tl.constexpr, M_SK: tl.constexpr, MASK: tl.constexpr,
    QK_SCALE: tl.constexpr, CAUSAL: tl.constexpr, KV_GROUP: tl.constexpr,
    BLOCK_M: tl.constexpr, BLOCK_N: tl.constexpr, PRECISION: tl.constexpr,
):  # fmt: skip
    """Attention for one query row a program (program_id 0; program_id 1 the batch and head), with
    `kiln_attention`'s arguments and meaning: a decode step's (one query over the cached keys), where
    the flash kernel's smallest tile computed 16 rows or more for one (tl.dot's least) and streamed
    the keys 64 a step. Scores and the output are f32 FMAs over BLOCK_N keys a step (the exact
    product: at least the precision PRECISION asks for); the softmax is the same online, base-2 one.
    With a mask, the keys after the last one it keeps are not read (_visible_end): a decode step
    reads the cache up to its own position, not to max_seq_len."""
    row = tl.program_id(0)
    batch = tl.program_id(1) // HEADS
    head = tl.program_id(1) % HEADS
    dims = tl.arange(0, HEAD_BLOCK)
    in_head = dims < HEAD_DIM
    q = _head_load(q_ptr + Q_OFF + batch * Q_SB + head * Q_SH + row * Q_SS + dims, in_head, HEAD_BLOCK != HEAD_DIM).to(tl.float32) * QK_SCALE
    k_base = k_ptr + K_OFF + batch * K_SB + (head // KV_GROUP) * K_SH
    v_base = v_ptr + V_OFF + batch * V_SB + (head // KV_GROUP) * V_SH
    mask_base = q_ptr  # not read without a mask
    if MASK != 0:
        mask_base = mask_ptr + batch * M_SB + head * M_SH + row * M_SQ
    end = SEQ_K
    if CAUSAL:
        end = tl.minimum(row + 1, SEQ_K)
    if MASK != 0:
        end = _visible_end(mask_base, end, M_SK, MASK, BLOCK_N)
    acc = tl.zeros((HEAD_BLOCK,), dtype=tl.float32)
    m_i = tl.max(tl.full((BLOCK_N,), float("-inf"), dtype=tl.float32), 0)
    l_i = tl.sum(tl.zeros((BLOCK_N,), dtype=tl.float32), 0)
    for first in range(0, end, BLOCK_N):
        cols = first + tl.arange(0, BLOCK_N)
        valid = cols < end
        safe_cols = tl.where(valid, cols, 0)
        k = _head_load(k_base + safe_cols[:, None] * K_SS + dims[None, :], in_head[None, :], HEAD_BLOCK != HEAD_DIM).to(tl.float32)
        s = tl.sum(k * q[None, :], 1)
        if MASK == 1:
            valid = valid & (tl.load(mask_base + safe_cols * M_SK) != 0)
        if MASK == 2:
            s += tl.load(mask_base + safe_cols * M_SK).to(tl.float32) * 1.4426950408889634  # log2(e)
        s = tl.where(valid, s, float("-inf"))
        m_new = tl.maximum(m_i, tl.max(s, 0))
        m_safe = tl.where(m_new == float("-inf"), 0.0, m_new)
        p = tl.math.exp2(s - m_safe)
        alpha = tl.math.exp2(m_i - m_safe)
        l_i = l_i * alpha + tl.sum(p, 0)
        v = _head_load(v_base + safe_cols[:, None] * V_SS + dims[None, :], in_head[None, :], HEAD_BLOCK != HEAD_DIM).to(tl.float32)
        acc = acc * alpha + tl.sum(p[:, None] * v, 0)
        m_i = m_new
    out = tl.where(l_i > 0, acc / l_i, 0.0)
    tl.store(o_ptr + batch * O_SB + head * O_SH + row * O_SS + dims, out.to(o_ptr.dtype.element_ty), mask=in_head)
