"""Compiling a kernel ahead of time: Triton on this machine (no GPU needed) -> sm_90a PTX that IREE launches.

`compile_kernel` runs Triton's compiler for `GPUTarget("cuda", 90, 32)` and returns a `Kernel`: the
PTX with its `.entry` trimmed to IREE's CUDA calling convention (the binding pointers, nothing else),
its entry name, warps, dynamic shared memory and grid. Anything that makes the kernel unusable raises
`Unsupported`, which the caller turns into IREE's own code and a note: another Triton version than the
one checked, a dtype or precision not checked on a GPU, operands too large for 32-bit offsets, a
Triton error, a kernel that needs Triton's scratch memory or thread-block clusters.
"""

from __future__ import annotations

import importlib.metadata
import math
import re
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .contract import MAX_STACKED, gated_outlined, head_dim_taken
from .contraction import (
    Attention,
    CacheWrite,
    Contraction,
    Conv2d,
    Matmul,
    MaxPool2d,
    RotaryCacheWrite,
    RowProgram,
    results,
)
from .tiles import SMALL_M, Tiles

TRITON_VERSION = "3.9.0"  # the version the ABI trim below was written against and the GPU run used
PTX_VERSION = 90  # Triton 3.9's default `.version 9.4` is rejected by CUDA 13.0 drivers (580)
MAX_INT32 = 2**31 - 1  # offsets are 32-bit: every operand must have fewer elements
_TRITON_TYPES = {"f32": "fp32", "bf16": "bf16", "f16": "fp16", "i8": "i8", "i64": "i64"}
# (kind, dtype, precision) that ran correctly on an H100 (benchmarks/results/kernels-h100.json); the
# same source in other dtypes and precisions compiles but has not run on a GPU yet.
CHECKED = {
    ("mm", "f32", "tf32x3"), ("mm", "f32", "tf32"), ("mm", "bf16", ""),
    ("gemv", "f32", "tf32x3"), ("gemv", "f32", "tf32"), ("gemv", "bf16", ""),
    ("conv2d", "f32", "tf32"), ("conv2d", "bf16", ""),
    ("depthwise conv2d", "f32", "ieee"), ("depthwise conv2d", "bf16", ""), ("maxpool2d", "f32", ""), ("maxpool2d", "bf16", ""),
    ("attention", "f32", "tf32x3"), ("attention", "f32", "tf32"), ("attention", "bf16", ""),
    ("rows", "f32", ""), ("rows", "bf16", ""), ("cache write", "f32", ""), ("cache write", "bf16", ""),
    ("rotary cache write", "f32", ""), ("rotary cache write", "bf16", ""),
    ("quantized gemv", "f32", "tf32x3"), ("quantized gemv", "f32", "tf32"), ("quantized gemv", "bf16", ""),
}  # fmt: skip
MAX_ROW_WIDTH = 16384  # a row program holds whole rows in registers: wider ones would spill


class Unsupported(Exception):
    """No kernel for this contraction or configuration: IREE's own code computes it."""


@dataclass(frozen=True)
class Kernel:
    """A compiled kernel, ready to embed: launched with its operands' bindings then the result's, as
    64-bit pointers, and no push constants; `grid` programs of 32 * `num_warps` threads each."""

    entry: str  # the PTX `.entry` name, which the IREE export must also carry
    ptx: str
    num_warps: int
    shared_bytes: int  # dynamic shared memory per program
    grid: tuple[int, int, int]
    contraction: Contraction  # with the layout the kernel reads
    tiles: Tiles


def triton_version() -> str | None:
    try:
        return importlib.metadata.version("triton")
    except importlib.metadata.PackageNotFoundError:
        return None


def check(contraction: Contraction) -> None:
    """Raise Unsupported unless a kernel may be generated for `contraction` here."""
    version = triton_version()
    if version is None:
        raise Unsupported("Triton is not installed (pip install 'torchkiln[kernels]')")
    if version != TRITON_VERSION:
        raise Unsupported(f"Triton {version} is installed; kiln's kernels are checked with {TRITON_VERSION}")
    kind = _kind(contraction)
    if (kind, contraction.dtype, contraction.precision) not in CHECKED:
        precision = f" with {contraction.precision}" if contraction.precision else ""
        raise Unsupported(f"{contraction.dtype} {kind}{precision} kernels have not been checked on a GPU yet")
    for shape in (*contraction.operand_shapes(), *(shape for shape, _ in results(contraction))):
        if math.prod(shape) > MAX_INT32:
            raise Unsupported(f"an operand of {math.prod(shape)} elements: the kernels' offsets are 32-bit")
        if 0 in shape:
            raise Unsupported("an empty operand")
    if isinstance(contraction, RowProgram) and contraction.width > MAX_ROW_WIDTH:
        raise Unsupported(f"rows of {contraction.width}: the row kernel holds at most {MAX_ROW_WIDTH} columns in registers")
    if isinstance(contraction, Matmul) and (contraction.gated or contraction.stacked) and not gated_outlined(contraction.m):
        raise Unsupported(f"several weights with {contraction.m} rows: only the GEMV kernel takes more than one")
    if isinstance(contraction, Matmul) and contraction.quantized and (contraction.m >= SMALL_M or contraction.b_layout != "nk"):
        raise Unsupported(f"quantized weights with {contraction.m} rows: only the GEMV kernel reads them")
    if isinstance(contraction, Matmul) and len(contraction.stacked) > MAX_STACKED:
        raise Unsupported(f"{len(contraction.stacked)} stacked weights: the GEMV kernel takes {MAX_STACKED}")
    if isinstance(contraction, Attention) and not head_dim_taken(contraction.head_dim, contraction.dtype):
        raise Unsupported(f"head dimension {contraction.head_dim} in {contraction.dtype}: the attention kernel takes 16 to 128 in steps of 16, and up to 256 in 16-bit dtypes")


def _kind(contraction: Contraction) -> str:
    if isinstance(contraction, Matmul):
        return ("quantized gemv" if contraction.quantized else "gemv") if contraction.m < SMALL_M else "mm"
    if isinstance(contraction, Conv2d):
        return "depthwise conv2d" if contraction.depthwise else "conv2d"
    if isinstance(contraction, RowProgram):
        return "rows"
    if isinstance(contraction, CacheWrite):
        return "cache write"
    if isinstance(contraction, RotaryCacheWrite):
        return "rotary cache write"
    return "maxpool2d" if isinstance(contraction, MaxPool2d) else "attention"


def compile_kernel(contraction: Contraction, tiles: Tiles) -> Kernel:
    check(contraction)
    if isinstance(contraction, Matmul):
        return _compile_matmul(contraction, tiles)
    if isinstance(contraction, Conv2d):
        return _compile_conv(contraction, tiles)
    if isinstance(contraction, MaxPool2d):
        return _compile_stencil(contraction, tiles, ("x_ptr", "y_ptr"), "kiln_maxpool")
    if isinstance(contraction, RowProgram):
        return _compile_rows(contraction, tiles)
    if isinstance(contraction, CacheWrite):
        return _compile_cache_write(contraction, tiles)
    if isinstance(contraction, RotaryCacheWrite):
        return _compile_rotary_cache_write(contraction, tiles)
    return _compile_attention(contraction, tiles)


def _compile_cache_write(write: CacheWrite, tiles: Tiles) -> Kernel:
    """Tiles: block_n elements of the new keys or values a program."""
    rows = write.batch * write.heads
    constants = dict(ROWS=rows, TOKENS=write.tokens, SEQ=write.seq, DIM=write.dim, BLOCK=tiles.block_n)
    programs = math.ceil(rows * write.tokens * write.dim / tiles.block_n)
    return _compile(_fixed("kiln_cache_write"), ("pos_ptr", "new_ptr", "cache_ptr"), constants, write, tiles, (programs, 1, 1), "kiln_kv")


def _compile_rotary_cache_write(write: RotaryCacheWrite, tiles: Tiles) -> Kernel:
    """Tiles: a head a program, block_n its padded width."""
    constants = dict(Q_HEADS=write.q_heads, KV_HEADS=write.kv_heads, SEQ=write.seq, DIM=write.dim, COS_BATCH=write.cos_batch, BLOCK=tiles.block_n)
    pointers = ("pos_ptr", "q_ptr", "k_ptr", "v_ptr", "cos_ptr", "sin_ptr", "kc_ptr", "vc_ptr", "qo_ptr")
    programs = write.batch * (write.q_heads + 2 * write.kv_heads)
    return _compile(_fixed("kiln_rotary_cache_write"), pointers, constants, write, tiles, (programs, 1, 1), "kiln_rkv")


def _compile_matmul(mm: Matmul, tiles: Tiles) -> Kernel:
    """Tiles: block_n columns of each weight's product (two products a program with a second weight)."""
    if not mm.epilogue:
        return _compile_product(mm, tiles, None)
    from . import row_source

    with tempfile.TemporaryDirectory(prefix="kiln-epilogue-") as folder:
        return _compile_product(mm, tiles, row_source.write_epilogue(mm, Path(folder)))


def _compile_product(mm: Matmul, tiles: Tiles, epilogue: Any) -> Kernel:
    b_sk, b_sn = (1, mm.k) if mm.b_layout == "nk" else (mm.n, 1)
    # each weight's pointers: its values (and scales where quantized), then its bias
    weights = (("b_ptr", "s_ptr", "bias_ptr"), ("b2_ptr", "s2_ptr", "bias2_ptr"), ("b3_ptr", "s3_ptr", "bias3_ptr"))
    weights = tuple(tuple(name for name in names if mm.quantized or not name.startswith("s")) for names in weights)
    if mm.stacked:
        pointers = ("a_ptr", *(name for names in weights[: len(mm.stacked)] for name in (names if mm.bias else names[:-1])), "c_ptr")
    else:
        pointers = ("a_ptr", *weights[0][:-1], *(("bias_ptr",) if mm.bias else ()), *(weights[1][:-1] if mm.gated else ()), "c_ptr")
    n1, n2 = (*mm.stacked, 0)[:2] if mm.stacked else (0, 0)
    programs = sum(math.ceil(n / tiles.block_n) for n in mm.stacked or (mm.n,))
    if mm.quantized:
        bits, group = mm.quantized
        constants = dict(
            M=mm.m, N=mm.n, K=mm.k, N1=n1, N2=n2, BITS=bits, GROUP=group,
            BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, EPILOGUE=epilogue,
        )  # fmt: skip
        return _compile(_fixed("kiln_gemv_quantized"), pointers, constants, mm, tiles, (programs, 1, 1), "kiln_gemv")
    if mm.m < SMALL_M:
        constants = dict(
            M=mm.m, N=mm.n, K=mm.k, B_SK=b_sk, B_SN=b_sn, N1=n1, N2=n2,
            BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, EPILOGUE=epilogue,
        )  # fmt: skip
        return _compile(_fixed("kiln_gemv"), pointers, constants, mm, tiles, (programs, 1, 1), "kiln_gemv")
    constants = dict(
        M=mm.m, N=mm.n, K=mm.k,
        A_SB=mm.m * mm.k, A_SM=mm.k, A_SK=1,
        B_SB=mm.n * mm.k, B_SK=b_sk, B_SN=b_sn,
        C_SB=mm.m * mm.n, C_SM=mm.n, C_SN=1,
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, GROUP_M=tiles.group_m,
        PRECISION=mm.precision or "ieee", EPILOGUE=epilogue,
    )  # fmt: skip
    programs = math.ceil(mm.m / tiles.block_m) * math.ceil(mm.n / tiles.block_n)
    return _compile(_fixed("kiln_matmul"), pointers, constants, mm, tiles, (programs, 1, 1), "kiln_mm")


def _compile_conv(conv: Conv2d, tiles: Tiles) -> Kernel:
    if conv.depthwise:
        return _compile_stencil(conv, tiles, _conv_pointers(conv), "kiln_dwconv")
    if conv.p <= 0 or conv.q <= 0:
        raise Unsupported("an empty output")
    constants, programs = conv_constants(conv, tiles), conv_programs(conv, tiles)
    return _compile(_fixed("kiln_conv2d"), _conv_pointers(conv), constants, conv, tiles, (programs, 1, 1), "kiln_conv")


def conv_constants(conv: Conv2d, tiles: Tiles) -> dict[str, object]:
    """kiln_conv2d's constants: C and K_OUT are one group's channels (all of them where groups is 1)."""
    per_group = conv.c // conv.groups
    weight_layout = "krsc" if conv.layout == "nhwc" else "kcrs"
    x = _strides(conv.layout, dict(n=conv.n, h=conv.h, w=conv.w, c=conv.c))
    w = _strides(weight_layout, dict(k=conv.k_out, r=conv.r, s=conv.s, c=per_group))
    y = _strides(conv.result_layout.replace("c", "k"), dict(n=conv.n, h=conv.p, w=conv.q, k=conv.k_out))
    return dict(
        BATCH=conv.n, H=conv.h, W=conv.w, C=per_group, K_OUT=conv.k_out // conv.groups, R=conv.r, S=conv.s,
        P=conv.p, Q=conv.q,
        STRIDE_H=conv.stride[0], STRIDE_W=conv.stride[1], PAD_H=conv.padding[0], PAD_W=conv.padding[1],
        DIL_H=conv.dilation[0], DIL_W=conv.dilation[1],
        X_SN=x["n"], X_SC=x["c"], X_SH=x["h"], X_SW=x["w"],
        W_SK=w["k"], W_SC=w["c"], W_SR=w["r"], W_SS=w["s"],
        Y_SN=y["n"], Y_SK=y["k"], Y_SP=y["h"], Y_SQ=y["w"],
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, GROUP_M=tiles.group_m,
        PRECISION=conv.precision or "ieee", CHANNEL_STEPS=per_group >= tiles.block_k, **_clamp(conv),
        GROUPS=conv.groups,
    )  # fmt: skip


def conv_programs(conv: Conv2d, tiles: Tiles) -> int:
    """kiln_conv2d's launch: one program per tile of each group's implicit GEMM."""
    rows, cols, _ = conv.gemm
    return conv.groups * math.ceil(rows / tiles.block_m) * math.ceil(cols / tiles.block_n)


def _conv_pointers(conv: Conv2d) -> tuple[str, ...]:
    return ("x_ptr", "w_ptr", *(("scale_ptr",) if conv.scales else ()), *(("shift_ptr",) if conv.shifts else ()), "y_ptr")


def _clamp(op: Conv2d | MaxPool2d) -> dict[str, float | None]:
    """A convolution epilogue's clamp as the kernels take it: None for an open side."""
    low, high = (op.clamp if isinstance(op, Conv2d) else ()) or (-math.inf, math.inf)
    return dict(CLAMP_LO=None if low == -math.inf else low, CLAMP_HI=None if high == math.inf else high)


def _compile_stencil(op: Conv2d | MaxPool2d, tiles: Tiles, pointers: tuple[str, ...], prefix: str) -> Kernel:
    if op.p <= 0 or op.q <= 0:
        raise Unsupported("an empty output")
    constants = stencil_constants(op, tiles)
    return _compile(_fixed("kiln_depthwise_conv2d"), pointers, constants, op, tiles, (stencil_programs(op, tiles), 1, 1), prefix)


def stencil_programs(op: Conv2d | MaxPool2d, tiles: Tiles) -> int:
    """kiln_depthwise_conv2d's launch: one program per tile of block_m output pixels by block_n channels."""
    return math.ceil(op.n * op.p * op.q / tiles.block_m) * math.ceil(op.c / tiles.block_n)


def stencil_constants(op: Conv2d | MaxPool2d, tiles: Tiles) -> dict[str, int | float | None]:
    """kiln_depthwise_conv2d's constants, for a depthwise convolution or a max pooling. Tiles: block_m
    output pixels by block_n channels (block_k unused). A depthwise weight [C, 1, R, S] is read as
    [C, R, S] (KRSC and KCRS are the same with one channel a group)."""
    x = _strides(op.layout, dict(n=op.n, h=op.h, w=op.w, c=op.c))
    y = _strides(op.layout, dict(n=op.n, h=op.p, w=op.q, c=op.c))
    return dict(
        BATCH=op.n, H=op.h, W=op.w, C=op.c, R=op.r, S=op.s, P=op.p, Q=op.q,
        STRIDE_H=op.stride[0], STRIDE_W=op.stride[1], PAD_H=op.padding[0], PAD_W=op.padding[1],
        DIL_H=op.dilation[0], DIL_W=op.dilation[1],
        X_SN=x["n"], X_SC=x["c"], X_SH=x["h"], X_SW=x["w"],
        W_SC=op.r * op.s, W_SR=op.s, W_SS=1,
        Y_SN=y["n"], Y_SC=y["c"], Y_SP=y["h"], Y_SQ=y["w"],
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, **_clamp(op),
    )  # fmt: skip


def _compile_attention(attention: Attention, tiles: Tiles) -> Kernel:
    """Tiles: block_m query rows and block_n keys per step (block_k unused); block_m 1 is
    `kiln_attention_row`, a program a query row."""
    row = tiles.block_m == 1
    if not row and tiles.block_m % tiles.block_n:
        raise Unsupported(f"attention tiles {tiles.label}: the query block must be a multiple of the key block")
    grid = (math.ceil(attention.seq_q / tiles.block_m), attention.batch * attention.heads, 1)
    pointers = ("q_ptr", "k_ptr", "v_ptr", *(("mask_ptr",) if attention.mask else ()), "o_ptr")
    kernel = _fixed("kiln_attention_row" if row else "kiln_attention")
    return _compile(kernel, pointers, attention_constants(attention, tiles), attention, tiles, grid, "kiln_attn")


def attention_constants(attention: Attention, tiles: Tiles) -> dict[str, int | float | bool | str]:
    """The attention kernels' constant arguments: sizes, strides, mask, scale, causality, tiles."""
    sizes = dict(b=attention.batch, h=attention.heads, d=attention.head_dim)
    o = _strides(attention.out_layout, {**sizes, "s": attention.seq_q})
    if attention.layout == "strided":  # each operand its own window of its source
        offsets = tuple(view[0] for view in attention.views)
        q, k, v = (dict(b=view[1], h=view[2], s=view[3]) for view in attention.views)
    else:
        offsets = (0, 0, 0)
        q = _strides(attention.layout, {**sizes, "s": attention.seq_q})
        k = v = _strides(attention.layout, {**sizes, "h": attention.kv_heads, "s": attention.seq_k})
    mask = _broadcast_strides(attention.mask_shape) if attention.mask else (0, 0, 0, 0)
    return dict(
        HEADS=attention.heads, SEQ_Q=attention.seq_q, SEQ_K=attention.seq_k, HEAD_DIM=attention.head_dim,
        HEAD_BLOCK=1 << (attention.head_dim - 1).bit_length(),  # the next power of two
        Q_SB=q["b"], Q_SH=q["h"], Q_SS=q["s"], K_SB=k["b"], K_SH=k["h"], K_SS=k["s"],
        V_SB=v["b"], V_SH=v["h"], V_SS=v["s"], O_SB=o["b"], O_SH=o["h"], O_SS=o["s"],
        Q_OFF=offsets[0], K_OFF=offsets[1], V_OFF=offsets[2],
        M_SB=mask[0], M_SH=mask[1], M_SQ=mask[2], M_SK=mask[3], MASK={"": 0, "bool": 1}.get(attention.mask, 2),
        QK_SCALE=attention.scale * math.log2(math.e), CAUSAL=attention.causal, KV_GROUP=attention.kv_group,
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, PRECISION=attention.precision or "ieee",
    )  # fmt: skip


def _compile_rows(program: RowProgram, tiles: Tiles) -> Kernel:
    """Tiles: block_m rows a program, block_n the power of two the row is padded to."""
    from . import row_source

    pointers = (*(f"in{index}" for index in range(len(program.inputs))), "out", *(f"also{index}" for index in range(len(program.outputs))))
    constants = dict(R=program.rows, H=program.width, BLOCK_R=tiles.block_m, BLOCK_H=tiles.block_n)
    grid = (math.ceil(program.rows / tiles.block_m), 1, 1)
    with tempfile.TemporaryDirectory(prefix="kiln-rows-") as folder:
        fn = getattr(row_source.write_module(program, Path(folder)), row_source.ENTRY)
        return _compile(fn, pointers, constants, program, tiles, grid, "kiln_rows")


def _broadcast_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    """Contiguous strides of `shape`, 0 along each dimension of size 1 (broadcast)."""
    strides, step = [], 1
    for size in reversed(shape):
        strides.append(step if size != 1 else 0)
        step *= size
    return tuple(reversed(strides))


def _strides(layout: str, sizes: dict[str, int]) -> dict[str, int]:
    """Contiguous strides of a 4-D layout spelled by its dimension letters, e.g. "nhwc"."""
    strides, step = {}, 1
    for dim in reversed(layout):
        strides[dim] = step
        step *= sizes[dim]
    return strides


def _fixed(name: str) -> Any:
    """One of the fixed kernels of triton_source.py (imported here: it imports Triton)."""
    from . import triton_source

    return getattr(triton_source, name)


def _compile(
    fn: Any,
    pointers: tuple[str, ...],
    constants: dict[str, object],
    contraction: Contraction,
    tiles: Tiles,
    grid: tuple[int, int, int],
    prefix: str,
) -> Kernel:
    import triton
    from triton import knobs
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource

    entry = prefix + "_" + re.sub(r"[^A-Za-z0-9_]", "_", f"{contraction.label}_{tiles.label}")
    dtypes = (*contraction.operand_dtypes(), *(dtype for _, dtype in results(contraction)))
    signature = {name: f"*{_TRITON_TYPES[dtype]}" for name, dtype in zip(pointers, dtypes, strict=True)}
    constexprs = dict(constants)
    optional = ("bias_ptr", "b2_ptr", "bias2_ptr", "b3_ptr", "bias3_ptr", "s_ptr", "s2_ptr", "s3_ptr", "mask_ptr", "scale_ptr", "shift_ptr", "w_ptr")
    for name in optional:  # an operand the kernel is not given compiles away
        if name in fn.arg_names and name not in pointers:
            constexprs[name] = None
    signature.update(dict.fromkeys(constexprs, "constexpr"))
    signature = {name: signature[name] for name in fn.arg_names}  # in parameter order
    # IREE binds every buffer at an offset aligned to 64 bytes: the pointers are 16-byte divisible.
    attrs = {(fn.arg_names.index(name),): [["tt.divisibility", 16]] for name in pointers}
    source = ASTSource(fn, signature, constexprs=constexprs, attrs=attrs)
    # FMA contraction on (Triton 3.9's default, which 3.10 changes): said rather than inherited.
    options = dict(num_warps=tiles.num_warps, num_stages=tiles.num_stages, ptx_version=PTX_VERSION, enable_fp_fusion=True)
    try:
        with knobs.compilation.scope():
            knobs.compilation.disable_line_info = True  # no .loc/DWARF: the PTX is half the size
            compiled = triton.compile(source, target=GPUTarget("cuda", 90, 32), options=options)
    except Exception as error:  # Triton reports unsupported tiles (shared memory, ...) in many ways
        first = str(error).splitlines()[0] if str(error) else ""
        raise Unsupported(f"Triton could not compile {entry}: {type(error).__name__}: {first}") from error
    metadata = compiled.metadata
    return Kernel(
        entry=entry,
        ptx=iree_entry(compiled.asm["ptx"], metadata, len(pointers), entry),
        num_warps=metadata.num_warps,
        shared_bytes=metadata.shared,
        grid=grid,
        contraction=contraction,
        tiles=tiles,
    )


_ENTRY = re.compile(r"\.visible \.entry (\w+)\(\s*(.*?)\)", re.DOTALL)


def iree_entry(ptx: str, metadata: object, bindings: int, entry: str) -> str:
    """The PTX with its `.entry` renamed to `entry` and taking exactly `bindings` pointers.

    Triton appends two pointers to every kernel (global and profile scratch). IREE's CUDA HAL passes
    the bindings and then the push constants, nothing else, so the two must go: safe only when the
    kernel needs neither (both sizes 0) and no instruction reads them."""
    global_scratch = getattr(metadata, "global_scratch_size", 0)
    profile_scratch = getattr(metadata, "profile_scratch_size", 0)
    if global_scratch or profile_scratch:
        raise Unsupported(
            f"the kernel needs Triton scratch memory (global {global_scratch} B, profile {profile_scratch} B), "
            "which IREE cannot pass"
        )
    if getattr(metadata, "num_ctas", 1) != 1 or tuple(getattr(metadata, "cluster_dims", (1, 1, 1))) != (1, 1, 1):
        raise Unsupported("thread-block clusters: IREE launches without cluster dimensions")
    found = _ENTRY.findall(ptx)
    match = _ENTRY.search(ptx)
    if match is None or len(found) != 1:
        raise Unsupported("expected exactly one .entry in Triton's PTX")
    name, params_text = match.group(1), match.group(2)
    params = [param.strip() for param in params_text.split(",")]
    if len(params) != bindings + 2 or not all(".u64" in param for param in params):
        raise Unsupported(f"expected {bindings} + 2 pointer parameters, found {params}")
    for scratch in params[bindings:]:
        scratch_name = scratch.split()[-1]
        if re.search(rf"\[{re.escape(scratch_name)}(\+\d+)?\]", ptx[match.end() :]):
            raise Unsupported(f"the kernel reads its scratch parameter {scratch_name}")
    kept = ",\n\t".join(params[:bindings])
    trimmed = ptx[: match.start()] + f".visible .entry {entry}(\n\t{kept}\n)" + ptx[match.end() :]
    return re.sub(rf"\b{re.escape(name)}_param_", f"{entry}_param_", trimmed)
