"""One call of the kernel: an implicit-GEMM convolution over NHWC bf16 input, and its workgroup tiling.

The implicit-GEMM kernel (kiln_gemm.h) computes Y[nb][oh][ow][cout] (f32) from a padded input
X[nb][hp][wp][cin] (bf16) and the weights packed in AMX's tile layout. A matmul is its 1x1 case: M
rows viewed as `oh` strips of `ow` rows, so that workgroups can split M. Each IREE workgroup
computes `nbw` output channels of `rows` output rows (flattened n, oh), walking K in chunks of `kc`
32-wide steps.

The tiling rules come from the kernel timed alone on the 16-core Emerald Rapids host
(benchmarks/NOTES.md, "llvm-cpu on the 16-core host"): convolutions ran best with 4 output rows of
64 channels (8 rows of 32 channels for 7-pixel rows) and K whole, 4.2-7.3 TFLOP/s; matmuls with one 256-row strip, 64 channels (128 when K is
small and N large) and 1024-wide K chunks, 4.6-6.3 TFLOP/s. Where that leaves fewer than
MIN_WORKGROUPS workgroups (batch 1), rows and then channels are halved so every thread has work.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

MIN_WORKGROUPS = 64  # a few per thread on a 16-core host, so that uneven workgroups balance
WHOLE_K = 1 << 20  # kc for "all of K in one chunk"
MATMUL_KC = 32  # K steps (of 32) a chunk for matmuls: a 1024-wide slab of A and B stays in L2


@dataclass(frozen=True)
class Call:
    """One dispatch of the kernel: shapes, layout and workgroup tiling.

    K is walked in 32-wide steps over (kh, kw, cin): `cin` is a multiple of 32. A convolution whose
    input channels are not (a stem's 3) is given as a "row window" instead: for each kernel row, the
    kw x cin input values under it are contiguous in NHWC, so they are read as one channel run of
    `cin` = kw x cin rounded up to 32 (kw = 1, pixels `pixel_stride` = the real cin apart), with zero
    weights for the values past the window; the input gets zero rows at the bottom so that those
    reads stay inside it. (Those values are multiplied by zero: an infinity among them, which eager
    PyTorch would not have read for that output, makes it NaN. Images and finite activations are
    unaffected.)
    """

    nb: int
    hp: int  # input rows, padding included
    wp: int
    cin: int  # channels a K walk covers at each (kh, kw): a multiple of 32
    cout: int
    kh: int
    kw: int
    stride: int
    oh: int
    ow: int
    rows: int  # output rows (flattened n, oh) a workgroup
    nbw: int  # output channels a workgroup (a multiple of 16)
    kc: int  # K steps (32 each) a chunk
    batched: bool = False  # every image has its own packed right-hand side (attention)
    pixel_stride: int = 0  # elements between pixels (rows) of the input; 0: cin

    @property
    def xs(self) -> int:
        return self.pixel_stride or self.cin

    @property
    def ksteps(self) -> int:
        return self.kh * self.kw * self.cin // 32

    @property
    def n16(self) -> int:
        return -(-self.cout // 16)

    @property
    def p_bstride(self) -> int:
        """Elements between consecutive images' packed right-hand sides (0: one shared)."""
        return self.n16 * self.ksteps * 512 if self.batched else 0

    @property
    def packed_elements(self) -> int:
        return self.n16 * self.ksteps * 512 * (self.nb if self.batched else 1)

    @property
    def grid(self) -> tuple[int, int]:
        return -(-self.cout // self.nbw), -(-(self.nb * self.oh) // self.rows)

    @property
    def flops(self) -> int:
        """Multiply-adds done times 2, the padding of a row window included."""
        return 2 * self.nb * self.oh * self.ow * self.cout * self.ksteps * 32

    @property
    def tiles(self) -> str:
        k = "K whole" if self.kc >= self.ksteps else f"K in chunks of {self.kc * 32}"
        return f"{self.rows} output rows x {self.nbw} channels, {k}"


def conv_call(nb: int, hp: int, wp: int, cin: int, cout: int, kh: int, kw: int, stride: int) -> Call:
    """A convolution over an already padded NHWC input (cin % 32 == 0), tiled by the rules above."""
    oh, ow = (hp - kh) // stride + 1, (wp - kw) // stride + 1
    rows, nbw = (8, 32) if ow <= 7 else (4, 64)
    return _spread(Call(nb, hp, wp, cin, cout, kh, kw, stride, oh, ow, rows=rows, nbw=nbw, kc=WHOLE_K))


def row_window_call(nb: int, hp: int, wp: int, cin: int, cout: int, kh: int, kw: int, stride: int) -> Call:
    """A convolution whose `cin` is not a multiple of 32, as a row window (see Call); `hp` without the
    zero rows at the bottom, which the call adds: as many as the last window reads past the input's
    last row, at least one. One row was not enough where rows are short: squeeze-excitation's expand
    convolution over 8 channels of 1x1 pixels reads 24 values past its row, and the last image's
    output was NaN wherever the memory after the input held a NaN (EfficientNet-B0 bf16 at batch 32)."""
    direct = conv_call(nb, hp, wp, 32, cout, kh, kw, stride)
    window = row_window(kw, cin)
    past = -(-(window - kw * cin) // (wp * cin))
    return replace(direct, hp=hp + max(past, 1), cin=window, kw=1, pixel_stride=cin)


def row_window(kw: int, cin: int) -> int:
    """The channels a row window walks: kw x cin rounded up to 32."""
    return -(-kw * cin // 32) * 32


def matmul_call(m: int, k: int, n: int, batch: int = 1, batched: bool = False, pixel_stride: int = 0) -> Call:
    """[batch x] M x K times K x N, M viewed as strips of at most 256 rows."""
    ow = strip(m)
    nbw = 128 if k <= 1024 and n >= 2048 else 64
    call = Call(batch, m // ow, ow, k, n, 1, 1, 1, m // ow, ow, rows=1, nbw=nbw, kc=MATMUL_KC, batched=batched, pixel_stride=pixel_stride)
    return _spread(call)


def strip(m: int) -> int:
    """The rows of one M strip: the largest divisor of `m` up to 256 that is at least 64, else `m` whole."""
    if m <= 256:
        return m
    return next((d for d in range(256, 63, -1) if m % d == 0), m)


def _spread(call: Call) -> Call:
    """`call` with rows, then channels, halved until it has MIN_WORKGROUPS workgroups (or cannot split)."""
    while call.grid[0] * call.grid[1] < MIN_WORKGROUPS:
        if call.rows > 1:
            call = replace(call, rows=call.rows // 2)
        elif call.nbw > 32 and call.cout > 32:
            call = replace(call, nbw=call.nbw // 2)
        else:
            break
    return call

