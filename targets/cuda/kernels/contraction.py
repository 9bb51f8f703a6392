"""What one kernel computes: a matmul, a 2-D convolution, a max pooling, an attention or a row
program (a layer norm and the elementwise ops around it), every size a constant.

The passes outline-contractions and outline-row-programs (passes/) describe each computation they
outline as a `kiln.contraction` dictionary attribute on the outlined function; `from_description`
reads that dictionary back as a `Matmul`, a `Conv2d`, a `MaxPool2d`, an `Attention` or a
`RowProgram`. The kernels (triton_source.py, row_source.py) take every
shape, stride and convolution parameter as a compile-time constant, so one compiled kernel serves one
of these values, and its label names it (the key of the measured tiles, measured.json).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

DTYPES = ("f32", "bf16", "f16")  # element types as MLIR spells them
# f32 inputs: tf32x3 (PyTorch's "highest", f32-class accuracy), tf32 ("high", and cuDNN's default for
# convolutions) or ieee (plain f32 FMAs, slow). 16-bit inputs: "" (tensor cores, f32 accumulation).
PRECISIONS = ("tf32x3", "tf32", "ieee", "")


@dataclass(frozen=True)
class Matmul:
    """C[M, N] = A[M, K] @ B (+ bias[N]), with B given as W[N, K] (`b_layout="nk"`, nn.Linear's weight,
    read as is) or as B[K, N] ("kn"). 16-bit inputs accumulate in f32; the result has `out_dtype` (the
    input dtype, or f32 for kiln's bf16 Linear layers, which compute in f32 from bf16 values; with
    their bias, rounded back to bf16 as those layers do)."""

    m: int
    n: int
    k: int
    dtype: str
    out_dtype: str
    b_layout: str = "nk"
    precision: str = ""
    bias: bool = False  # a bias[N] operand in the input dtype, added to the f32 accumulator before rounding
    # The elementwise ops the graph applies to the product (a GELU; SwiGLU's silu(gate) * up), computed
    # on the kernel's tile before the one store: row-program steps (RowProgram) over v0, the product
    # (with its bias) rounded to `product_dtype`, and v1, with `gated` the product of a second weight
    # W2 (shaped and laid out as W) with the same A, rounded likewise (the GEMV only:
    # contract.gated_outlined). `out_dtype` is then the last step's dtype.
    epilogue: tuple[tuple[Any, ...], ...] = ()
    gated: bool = False
    product_dtype: str = ""  # where there is an epilogue: the dtype of the matmul's result in the graph
    # Several weights W_i[n_i, K] of one A, stacked along N (the GEMV only: a decode step's Q, K and V
    # projections, up to contract.MAX_STACKED): n is their sum, C their products side by side, each
    # weight followed by its bias where `bias`.
    stacked: tuple[int, ...] = ()
    # (bits, group) where each W is given as --quantize made it (the GEMV only; compiler/quantize.py):
    # int8 values [n, K] and f32 scales [n, 1] (bits 8, group 0), or int4 two a byte, input j and
    # j + K/2 in byte j's low and high nibbles, [n, K/2], with f32 scales [n, K/group] (bits 4)
    quantized: tuple[int, ...] = ()

    def operands(self) -> tuple[tuple[tuple[int, ...], str], ...]:
        """(shape, dtype) of each operand: A, then each weight (its values and scales where quantized)
        and its bias, then a second weight."""
        bias = [((self.n,), self.dtype)] if self.bias else []
        if self.stacked:
            each = [(self._weight(n), [((n,), self.dtype)] if self.bias else []) for n in self.stacked]
            return (((self.m, self.k), self.dtype), *(operand for weight, own in each for operand in (*weight, *own)))
        weight = self._weight(self.n)
        return (((self.m, self.k), self.dtype), *weight, *bias, *(weight if self.gated else []))

    def _weight(self, n: int) -> list[tuple[tuple[int, ...], str]]:
        if not self.quantized:
            return [((n, self.k) if self.b_layout == "nk" else (self.k, self.n), self.dtype)]
        bits, group = self.quantized
        values = (n, self.k if bits == 8 else self.k // 2)
        return [(values, "i8"), ((n, self.k // group if group else 1), "f32")]

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(shape for shape, _ in self.operands())

    def result_shape(self) -> tuple[int, ...]:
        return (self.m, self.n)

    def operand_dtypes(self) -> tuple[str, ...]:
        return tuple(dtype for _, dtype in self.operands())

    @property
    def scheme(self) -> str:
        """The quantized weights' label part: `-int8`, `-int4g128`; empty for plain weights."""
        if not self.quantized:
            return ""
        bits, group = self.quantized
        return f"-int{bits}" + (f"g{group}" if group else "")

    @property
    def flops(self) -> int:
        return 2 * self.m * self.n * self.k * (2 if self.gated else 1)

    @property
    def gemm(self) -> tuple[int, int, int]:
        """The GEMM's (M, N, K)."""
        return self.m, self.n, self.k

    @property
    def label(self) -> str:
        precision = f"-{self.precision}" if self.dtype == "f32" else ""
        out = f"-out{self.out_dtype}" if self.out_dtype != self.dtype else ""
        bias = "-bias" if self.bias else ""
        gated = "-gated" if self.gated else ""
        stacked = f"-stack{'+'.join(map(str, self.stacked))}" if self.stacked else ""
        epilogue = f"-ep{_digest([self.epilogue, self.product_dtype])}" if self.epilogue else ""
        return f"mm{self.m}x{self.n}x{self.k}-{self.dtype}{precision}-{self.b_layout}{self.scheme}{bias}{gated}{stacked}{epilogue}{out}"

    @property
    def shape_key(self) -> str:
        """The label of the same contraction with a W[N, K] operand and its own output dtype: the key of
        its measured tiles (the output dtype and an epilogue change only the final store; a second
        weight doubles what a tile holds; stacked weights are their own shape)."""
        precision = f"-{self.precision}" if self.dtype == "f32" else ""
        several = "-gated" if self.gated else "-stacked" if self.stacked else ""
        return f"mm{self.m}x{self.n}x{self.k}-{self.dtype}{precision}-nk{self.scheme}{several}"


class _Window:
    """The output size of a 2-D window (convolution or pooling, floor mode) over an h x w input."""

    h: int
    w: int
    r: int
    s: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]

    @property
    def p(self) -> int:
        return (self.h + 2 * self.padding[0] - self.dilation[0] * (self.r - 1) - 1) // self.stride[0] + 1

    @property
    def q(self) -> int:
        return (self.w + 2 * self.padding[1] - self.dilation[1] * (self.s - 1) - 1) // self.stride[1] + 1

    @property
    def geometry(self) -> str:
        """Stride, padding and (where not 1) dilation, as labels spell them: `s2p1`, `s1p2d2`."""
        return f"s{self.stride[0]}p{self.padding[0]}" + (f"d{self.dilation[0]}" if self.dilation != (1, 1) else "")


@dataclass(frozen=True)
class Conv2d(_Window):
    """y = conv2d(x, w) in PyTorch's NCHW/KCRS; `layout` is how the kernel reads it: "nchw" (the tensors
    as they are) or "nhwc" (activations and result transposed to NHWC and the weights to KRSC around
    the kernel). 16-bit inputs accumulate in f32; f32 runs with `precision`. `groups` is 1 (an implicit
    GEMM on tensor cores), more (RegNet, ResNeXt: one implicit GEMM per group, side by side) or, for a
    depthwise convolution, the channel count (c == k_out, one filter per channel: no GEMM, a stencil of
    f32 FMAs, so f32 runs "ieee")."""

    n: int
    c: int
    h: int
    w: int
    k_out: int
    r: int
    s: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    dtype: str
    out_dtype: str
    precision: str = ""
    bias: bool = False  # a bias[k_out] operand: added after the kernel, or the epilogue's first shift
    layout: str = "nchw"
    groups: int = 1
    # "nhwc": an NCHW-reading kernel writes its result in NHWC all the same (coalesced along the
    # channels), which the next NHWC kernel reads without a transpose
    out_layout: str = ""
    # What the kernel applies to its f32 accumulator before the one rounding (outline-contractions'
    # channel epilogue): per-channel steps "add", "sub", "mul", "div" by vectors (batch norm), folded
    # into one scale and shift per channel, then a clamp (low, high) (ReLU, ReLU6; +-inf: open).
    epilogue: tuple[str, ...] = ()
    clamp: tuple[float, ...] = ()

    @property
    def depthwise(self) -> bool:
        return self.groups > 1 and self.groups == self.c == self.k_out

    @property
    def fused(self) -> bool:
        """Whether the kernel computes an epilogue (a bias is then its first shift)."""
        return bool(self.epilogue or self.clamp)

    @property
    def scales(self) -> bool:
        return self.fused and any(step in ("mul", "div") for step in self.epilogue)

    @property
    def shifts(self) -> bool:
        return self.fused and (self.bias or any(step in ("add", "sub") for step in self.epilogue))

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        """The kernel's operands in its layout: input, weight, then the epilogue's scale and shift where
        it has them (a bias alone is added outside the kernel)."""
        per_group = self.c // self.groups
        vectors = ((self.k_out,),) * (self.scales + self.shifts)  # the epilogue's scale and shift, f32
        if self.layout == "nhwc":
            return (self.n, self.h, self.w, self.c), (self.k_out, self.r, self.s, per_group), *vectors
        return (self.n, self.c, self.h, self.w), (self.k_out, per_group, self.r, self.s), *vectors

    @property
    def result_layout(self) -> str:
        return self.out_layout or self.layout

    def result_shape(self) -> tuple[int, ...]:
        if self.result_layout == "nhwc":
            return (self.n, self.p, self.q, self.k_out)
        return (self.n, self.k_out, self.p, self.q)

    def operand_dtypes(self) -> tuple[str, ...]:
        return (self.dtype, self.dtype, *("f32",) * (self.scales + self.shifts))

    @property
    def flops(self) -> int:
        return 2 * self.n * self.p * self.q * self.k_out * self.r * self.s * (self.c // self.groups)

    @property
    def gemm(self) -> tuple[int, int, int]:
        """One group's implicit GEMM (M, N, K): output pixels, output channels, filter taps times channels."""
        return self.n * self.p * self.q, self.k_out // self.groups, self.r * self.s * (self.c // self.groups)

    @property
    def label(self) -> str:
        epilogue = ("-scale" if self.scales else "") + ("-shift" if self.shifts else "")
        epilogue += f"-clamp{self.clamp[0]:g}_{self.clamp[1]:g}" if self.clamp else ""
        epilogue += f"-to{self.out_layout}" if self.out_layout and self.out_layout != self.layout else ""
        return self._name(self.layout, "krsc" if self.layout == "nhwc" else "kcrs") + epilogue + (
            f"-out{self.out_dtype}" if self.out_dtype != self.dtype else ""
        )

    @property
    def shape_key(self) -> str:
        """The key of its measured tiles: the measurement named every convolution by its NHWC form."""
        return self._name("nhwc", "krsc")

    def _name(self, layout: str, weight_layout: str) -> str:
        precision = f"-{self.precision}" if self.dtype == "f32" else ""
        geometry = self.geometry + (f"g{self.groups}" if self.groups != 1 else "")
        return (
            f"conv{self.n}x{self.c}x{self.h}x{self.w}-k{self.k_out}r{self.r}x{self.s}{geometry}-{self.dtype}{precision}"
            f"-{layout}-{weight_layout}"
        )


@dataclass(frozen=True)
class MaxPool2d(_Window):
    """y = max_pool2d(x) in PyTorch's NCHW (floor mode; padding reads as -inf), read by the depthwise
    stencil kernel with a maximum for the sum and no weights; `layout` as Conv2d's."""

    n: int
    c: int
    h: int
    w: int
    r: int
    s: int
    stride: tuple[int, int]
    padding: tuple[int, int]
    dilation: tuple[int, int]
    dtype: str
    layout: str = "nchw"
    precision: str = ""  # nothing to round: kept for the kernels' common checks

    @property
    def out_dtype(self) -> str:
        return self.dtype

    @property
    def result_layout(self) -> str:
        return self.layout

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return ((self.n, self.h, self.w, self.c) if self.layout == "nhwc" else (self.n, self.c, self.h, self.w),)

    def result_shape(self) -> tuple[int, ...]:
        return (self.n, self.p, self.q, self.c) if self.layout == "nhwc" else (self.n, self.c, self.p, self.q)

    def operand_dtypes(self) -> tuple[str, ...]:
        return (self.dtype,)

    @property
    def flops(self) -> int:
        return 0  # comparisons, not floating-point arithmetic

    @property
    def label(self) -> str:
        return f"{self.shape_key}-{self.layout}"

    @property
    def shape_key(self) -> str:
        return f"maxpool{self.n}x{self.c}x{self.h}x{self.w}-r{self.r}x{self.s}{self.geometry}-{self.dtype}"


@dataclass(frozen=True)
class Attention:
    """softmax(Q K^T * scale [+ mask]) V per (batch, head), PyTorch's scaled_dot_product_attention
    without dropout, causal (top-left aligned) or not, with or without a mask tensor. Q is [batch, heads, seq_q, head_dim], K and V
    [batch, heads, seq_k, head_dim] as SDPA takes them (`layout` "bhsd"), or the kernel reads them as
    [batch, seq, heads, head_dim] ("bshd": the tensors before the heads were moved forward, as
    attention code writes it); `out_layout` likewise for the result. 16-bit inputs accumulate in f32;
    f32 runs with `precision`."""

    batch: int
    heads: int
    seq_q: int
    seq_k: int
    head_dim: int
    dtype: str
    causal: bool
    scale: float
    precision: str = ""
    layout: str = "bhsd"
    out_layout: str = "bhsd"
    # A mask tensor: "" none, "bool" (True keeps a score; the kernel reads it as bytes, "i8"), or the
    # dtype of an additive one; `mask_shape` is [batch or 1, heads or 1, seq_q or 1, seq_k or 1]: the
    # kernel broadcasts it with zero strides.
    mask: str = ""
    mask_shape: tuple[int, ...] = ()
    # layout "strided": Q, K and V are read inside earlier tensors of shapes `sources` (a fused QKV
    # projection's output, say), each at `views` [offset, batch stride, head stride, seq stride], the
    # head dimension contiguous (targets/cuda/passes/strided_views.py): nothing is copied to lay them out.
    sources: tuple[tuple[int, ...], ...] = ()
    views: tuple[tuple[int, ...], ...] = ()
    # Grouped heads (GQA; MQA: all of them): this many query heads share each key/value head, and K
    # and V have heads // kv_group heads, read where they are rather than repeated for every query head.
    kv_group: int = 1

    @property
    def out_dtype(self) -> str:
        return self.dtype

    @property
    def kv_heads(self) -> int:
        return self.heads // self.kv_group

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        if self.layout == "strided":
            qkv: tuple[tuple[int, ...], ...] = self.sources
        else:
            q = self._shape(self.layout, self.seq_q)
            kv = self._shape(self.layout, self.seq_k, self.kv_heads)
            qkv = (q, kv, kv)
        return (*qkv, self.mask_shape) if self.mask else qkv

    def operand_dtypes(self) -> tuple[str, ...]:
        mask = ("i8" if self.mask == "bool" else self.mask,) if self.mask else ()
        return (self.dtype,) * 3 + mask

    def result_shape(self) -> tuple[int, ...]:
        return self._shape(self.out_layout, self.seq_q)

    def _shape(self, layout: str, seq: int, heads: int | None = None) -> tuple[int, ...]:
        heads = self.heads if heads is None else heads
        if layout == "bshd":
            return (self.batch, seq, heads, self.head_dim)
        return (self.batch, heads, seq, self.head_dim)

    @property
    def flops(self) -> int:
        """The two products' multiply-adds, counting only the scores a causal mask keeps."""
        scores = self.seq_q * self.seq_k
        if self.causal:
            scores = sum(min(row + 1, self.seq_k) for row in range(self.seq_q))
        return 4 * self.batch * self.heads * scores * self.head_dim

    @property
    def label(self) -> str:
        mask = f"-mask{'x'.join(map(str, self.mask_shape))}{self.mask}" if self.mask else ""
        views = "".join(f"-v{'_'.join(map(str, view))}" for view in self.views)
        grouped = f"-kv{self.kv_heads}" if self.kv_group > 1 else ""
        return f"{self.shape_key}{grouped}-{self.layout}-{self.out_layout}{mask}{views}"

    @property
    def shape_key(self) -> str:
        precision = f"-{self.precision}" if self.dtype == "f32" else ""
        causal = "-causal" if self.causal else ""
        scale = "" if math.isclose(self.scale, self.head_dim**-0.5) else f"-scale{self.scale:g}"
        return (
            f"attn{self.batch}x{self.heads}x{self.seq_q}x{self.seq_k}x{self.head_dim}-{self.dtype}{precision}{causal}{scale}"
        )


# One operand of a row-program step: the number of a value (the inputs first, then the steps' results)
# or a constant.
Operand = int | float


@dataclass(frozen=True)
class RowProgram:
    """Elementwise ops, sums and maxima along the last dimension of `shape`, which a kernel computes a
    whole row at a time in registers: a layer norm or RMS norm with the elementwise ops before and
    after it (a bias, a GELU, a residual add), a softmax, read and written once. Each input is the result's full shape,
    one value per row (`shape[:-1] + (1,)`) or one per column (`(width,)`, broadcast over the rows).
    Each step is (op, dtype, operands...): computed in f32 from its operands, then rounded to its
    dtype, as PyTorch computes each op; the last step is the result. `outputs` are steps (by index)
    whose values the model also reads elsewhere (a pre-norm block's residual sum, which feeds the
    norm and the next residual add): stored as further results, after the last step's."""

    shape: tuple[int, ...]
    inputs: tuple[tuple[tuple[int, ...], str], ...]  # (shape, dtype) of each
    steps: tuple[tuple[Any, ...], ...]  # (op, dtype, *operands), operands as `Operand`
    precision: str = ""
    outputs: tuple[int, ...] = ()

    @property
    def rows(self) -> int:
        return math.prod(self.shape[:-1])

    @property
    def width(self) -> int:
        return self.shape[-1]

    @property
    def dtype(self) -> str:
        return self.out_dtype

    @property
    def out_dtype(self) -> str:
        return self.steps[-1][1]

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return tuple(shape for shape, _ in self.inputs)

    def operand_dtypes(self) -> tuple[str, ...]:
        return tuple(dtype for _, dtype in self.inputs)

    def result_shape(self) -> tuple[int, ...]:
        return self.shape

    def extra_results(self) -> tuple[tuple[tuple[int, ...], str], ...]:
        """(shape, dtype) of each further result (`outputs`)."""
        return tuple((self.shape, self.steps[index][1]) for index in self.outputs)

    def role(self, index: int) -> str:
        """How input `index` spans the rows: "full", "row" (one value per row) or "column"."""
        shape = self.inputs[index][0]
        if shape == self.shape:
            return "full"
        return "row" if shape == (*self.shape[:-1], 1) else "column"

    @property
    def label(self) -> str:
        return self.shape_key

    @property
    def shape_key(self) -> str:
        """Rows x width, the dtype and a digest of the steps (different programs, different kernels)."""
        described = [self.inputs, self.steps, *([list(self.outputs)] if self.outputs else [])]
        return f"rows{self.rows}x{self.width}-{self.dtype}-{len(self.steps)}ops-{_digest(described)}"


def _digest(described: Any) -> str:
    """8 hex digits naming a program's steps (different programs, different kernels)."""
    return hashlib.sha256(json.dumps(described).encode()).hexdigest()[:8]


@dataclass(frozen=True)
class CacheWrite:
    """cache[b, h, p + t, :] = new[b, h, t, :] for each of `tokens` tokens whose slot p + t lies in the
    cache, p the first element of a position tensor read on the device: a step's keys or values written
    into the KV cache of `--generate` (compiler/generation.py `_written`). The result is the cache
    operand itself, updated in place (the dispatch's result is tied to it): only the written slots move,
    where the graph's select over the whole cache read and wrote all of it."""

    batch: int
    heads: int
    seq: int
    dim: int
    tokens: int
    positions: int  # the position tensor's length (its first element is p)
    dtype: str
    precision: str = ""

    @property
    def out_dtype(self) -> str:
        return self.dtype

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        return ((self.positions,), (self.batch, self.heads, self.tokens, self.dim), self.result_shape())

    def operand_dtypes(self) -> tuple[str, ...]:
        return ("i64", self.dtype, self.dtype)

    def result_shape(self) -> tuple[int, ...]:
        return (self.batch, self.heads, self.seq, self.dim)

    @property
    def flops(self) -> int:
        return 0

    @property
    def label(self) -> str:
        return f"kv{self.batch}x{self.heads}x{self.seq}x{self.dim}-{self.tokens}tok-{self.dtype}"

    @property
    def shape_key(self) -> str:
        return self.label


@dataclass(frozen=True)
class RotaryCacheWrite:
    """A decode step's queries and keys rotated (rotary position embedding, transformers'
    `x * cos + rotate_half(x) * sin`, each step rounded to the dtype as eager rounds it) and its keys
    and values written into one layer's KV cache at slot p (`CacheWrite`'s select, for K and V): one
    dispatch where IREE made two of the rotations and kiln two of the writes. One token a row; cos and
    sin are [cos_batch, 1, 1, dim] (cos_batch 1 or batch). The rotated queries are the kernel's result;
    the two caches, its last two operands, are updated in place (tied)."""

    batch: int
    q_heads: int
    kv_heads: int
    seq: int
    dim: int
    positions: int  # the position tensor's length (its first element is p)
    cos_batch: int
    dtype: str
    precision: str = ""

    @property
    def out_dtype(self) -> str:
        return self.dtype

    def operand_shapes(self) -> tuple[tuple[int, ...], ...]:
        queries, new = (self.batch, self.q_heads, 1, self.dim), (self.batch, self.kv_heads, 1, self.dim)
        angles = (self.cos_batch, 1, 1, self.dim)
        cache = (self.batch, self.kv_heads, self.seq, self.dim)
        return ((self.positions,), queries, new, new, angles, angles, cache, cache)

    def operand_dtypes(self) -> tuple[str, ...]:
        return ("i64", *[self.dtype] * 7)

    def result_shape(self) -> tuple[int, ...]:
        return (self.batch, self.q_heads, 1, self.dim)

    @property
    def flops(self) -> int:
        return 0

    @property
    def label(self) -> str:
        return f"rkv{self.batch}x{self.q_heads}x{self.kv_heads}x{self.seq}x{self.dim}-cos{self.cos_batch}-{self.dtype}"

    @property
    def shape_key(self) -> str:
        return self.label


Contraction = Matmul | Conv2d | MaxPool2d | Attention | RowProgram | CacheWrite | RotaryCacheWrite


def tied(contraction: Contraction) -> int:
    """How many of the kernel's last operands it updates in place (results tied to them)."""
    return {CacheWrite: 1, RotaryCacheWrite: 2}.get(type(contraction), 0)


def results(contraction: Contraction) -> tuple[tuple[tuple[int, ...], str], ...]:
    """(shape, dtype) of each result a kernel writes to a binding of its own, in binding order: the
    result (none for a CacheWrite, which writes its last operand), then a row program's further
    `outputs`."""
    if isinstance(contraction, CacheWrite):
        return ()
    extra = contraction.extra_results() if isinstance(contraction, RowProgram) else ()
    return ((contraction.result_shape(), contraction.out_dtype), *extra)


def from_description(description: Mapping[str, Any]) -> Contraction:
    """The contraction a `kiln.contraction` attribute describes (as plain Python values)."""
    fields = dict(description)
    kind = fields.pop("kind")
    if kind == "mm":
        fields["epilogue"] = tuple(tuple(step) for step in fields.get("epilogue", ()))
        fields["stacked"] = tuple(fields.get("stacked", ()))
        fields["quantized"] = tuple(fields.get("quantized", ()))
        return Matmul(**fields)
    if kind == "conv2d":
        for name in ("stride", "padding", "dilation", "epilogue", "clamp"):
            if name in fields:
                fields[name] = tuple(fields[name])
        return Conv2d(**fields)
    if kind == "maxpool2d":
        for name in ("stride", "padding", "dilation"):
            fields[name] = tuple(fields[name])
        return MaxPool2d(**fields)
    if kind == "attention":
        fields["mask_shape"] = tuple(fields.get("mask_shape", ()))
        fields["sources"] = tuple(tuple(shape) for shape in fields.get("sources", ()))
        fields["views"] = tuple(tuple(view) for view in fields.get("views", ()))
        return Attention(**fields)
    if kind == "cache_write":
        return CacheWrite(**fields)
    if kind == "rotary_cache_write":
        return RotaryCacheWrite(**fields)
    if kind == "rows":
        return RowProgram(
            tuple(fields["shape"]),
            tuple((tuple(shape), dtype) for shape, dtype in fields["inputs"]),
            tuple(tuple(step) for step in fields["steps"]),
            outputs=tuple(fields.get("outputs", ())),
        )
    raise ValueError(f"unknown contraction kind {kind!r}")
