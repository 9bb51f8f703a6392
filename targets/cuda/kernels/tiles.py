"""Which launch configuration (tiles, warps, stages, and for convolutions the layout) a kernel gets.

Where the shape was measured on a GPU (measured.json, written from a device run's results by
benchmarks/kernels_table.py), the fastest configuration that was correct there; where that run found
IREE's own code faster, IREE's code. Elsewhere a heuristic: the largest tiles that still give about
one program per SM. `candidates` lists the few configurations worth timing for a shape (what the
device run measured, and what a per-shape tuner would try).
"""

from __future__ import annotations

import functools
import json
import math
import re
from dataclasses import dataclass
from pathlib import Path

from .contraction import (
    Attention,
    CacheWrite,
    Contraction,
    Conv2d,
    Matmul,
    MaxPool2d,
    RotaryCacheWrite,
    RowProgram,
)

MEASURED = Path(__file__).with_name("measured.json")
SMS = 132  # an H100's streaming multiprocessors: the heuristic aims for about one program on each
SMALL_M = 8  # matmuls with fewer rows are GEMVs: kiln_gemv, not the tensor-core matmul


@dataclass(frozen=True)
class Tiles:
    """One launch configuration: a program's output tile, its K step, warps and pipeline depth."""

    block_m: int
    block_n: int
    block_k: int
    num_warps: int = 4
    num_stages: int = 3
    group_m: int = 8  # programs that share a column of B tiles, for L2 reuse

    @property
    def label(self) -> str:
        return f"{self.block_m}x{self.block_n}x{self.block_k}w{self.num_warps}s{self.num_stages}"

    @staticmethod
    def parse(label: str) -> Tiles:
        match = re.fullmatch(r"(\d+)x(\d+)x(\d+)w(\d+)s(\d+)", label)
        if match is None:
            raise ValueError(f"not a tiles label: {label!r}")
        m, n, k, warps, stages = (int(group) for group in match.groups())
        return Tiles(m, n, k, warps, stages)


@dataclass(frozen=True)
class Choice:
    """A kernel configuration, or IREE's own code (`tiles` None), and why."""

    tiles: Tiles | None
    layout: str  # convolutions: "nhwc" or "nchw"; matmuls: "nk"
    why: str


@functools.cache
def measured() -> dict[str, dict]:
    """Shape key -> what the device run found for it (measured.json's `shapes`)."""
    return json.loads(MEASURED.read_text())["shapes"]


CACHE_WRITE_TILES = Tiles(1, 1024, 1, 4, 1)  # kiln_cache_write: 1,024 elements a program (a decode step's keys: 1 program)


def choose(contraction: Contraction) -> Choice:
    """The configuration `contraction` gets by default: measured where its shape was, else the heuristic."""
    found = measured().get(contraction.shape_key)
    if found is not None:
        gpu = measured_on()
        if found["use"] == "iree":
            return Choice(None, "", f"IREE's code measured faster on the {gpu} ({found['why']})")
        return Choice(Tiles.parse(found["tiles"]), found["layout"], f"measured fastest on the {gpu}")
    if isinstance(contraction, RowProgram):
        return Choice(row_candidates(contraction)[0], "", "heuristic (shape not measured)")
    if isinstance(contraction, CacheWrite):
        return Choice(CACHE_WRITE_TILES, "", "a copy of the new tokens: one configuration")
    if isinstance(contraction, RotaryCacheWrite):
        width = max(16, 1 << (contraction.dim - 1).bit_length())
        return Choice(Tiles(1, width, 1, 1, 1), "", "a head a program: one configuration")
    if isinstance(contraction, Attention):
        return Choice(attention_candidates(contraction)[0], contraction.layout, "heuristic (shape not measured)")
    if isinstance(contraction, MaxPool2d) or (isinstance(contraction, Conv2d) and contraction.depthwise):
        return Choice(depthwise_candidates(contraction)[0], "nhwc", "heuristic (shape not measured)")
    layout = default_layout(contraction)
    if isinstance(contraction, Matmul) and contraction.m < SMALL_M:
        return Choice(gemv_tiles(contraction), contraction.b_layout, f"{contraction.m} rows: kiln's GEMV kernel, heuristic (shape not measured)")
    if isinstance(contraction, Matmul) and contraction.dtype != "f32" and contraction.m > SKINNY_ROWS:
        return Choice(matmul_tiles(contraction), layout, "heuristic (shape not measured)")
    return Choice(default_tiles(contraction, layout), layout, "heuristic (shape not measured)")


def measured_on() -> str:
    return json.loads(MEASURED.read_text())["gpu"]


# Attentions of fewer query rows than this run kiln_attention_row, a program a row: the flash kernel's
# tl.dot computes 16 rows at least, and a program per head streams its keys alone.
ROW_ATTENTION_BELOW = 16


def attention_candidates(attention: Attention) -> list[Tiles]:
    """Attention configurations worth timing, the default first: `block_m` query rows a program,
    `block_n` keys a step (`block_k` is the head dimension, for the label). f32 runs three TF32
    products a step (tf32x3) and holds f32 tiles, so it takes smaller blocks."""
    d = attention.head_dim
    padded = 1 << (d - 1).bit_length()  # the kernels hold head rows padded to a power of two
    if attention.seq_q < ROW_ATTENTION_BELOW:
        # A decode step (one query row; or a GQA group's query heads as rows of their key/value head):
        # kiln_attention_row, BLOCK_N keys of the head a step. The default (16,384 elements a step,
        # 8 warps) was within 1.03x of the fastest of these on the H200 for the one-row decode
        # attention of Llama-3.2-1B and 3.1-8B, and of the held-out Qwen2.5-0.5B, GPT-2 and Mistral-7B
        # (4,096 positions), at batch 1 and 8 (benchmarks/attention_row_tiles.py). Against the flash
        # kernel's 64-row tile: head dim 64, 1.08-2.3x faster in both runs (results/attention-row-h200.json,
        # attention-row-gqa-h200.json, GQA rows too); head dim 128 (Llama-8B, Mistral), 1.04-1.24x faster
        # in the first and 0.84-0.95x in the second: no clear winner there.
        return [Tiles(1, 16384 // padded, d, 8, 2), Tiles(1, 8192 // padded, d, 8, 1), Tiles(1, 8192 // padded, d, 4, 2), Tiles(1, 4096 // padded, d, 4, 2), Tiles(1, 8192 // padded, d, 4, 3)]
    if attention.dtype == "f32":
        pool = [Tiles(64, 32, d, 4, 2), Tiles(64, 64, d, 4, 2), Tiles(128, 32, d, 8, 2), Tiles(64, 32, d, 4, 3), Tiles(32, 32, d, 4, 3)]
    elif padded > 128:
        # Heads of up to 256 (Gemma's): the 128-wide pool's tiles need more shared memory than an SM has.
        # These fit and compile without spills, causal or masked (sm_90a, ptxas -v; 64 keys a step
        # spilled with a mask); the default has the fewest registers. Not timed against each other.
        pool = [Tiles(64, 32, d, 8, 2), Tiles(128, 32, d, 8, 2), Tiles(64, 32, d, 8, 3)]
    else:
        pool = [Tiles(128, 64, d, 4, 3), Tiles(128, 64, d, 8, 3), Tiles(128, 128, d, 8, 3), Tiles(64, 64, d, 4, 3), Tiles(128, 32, d, 4, 4)]
    return [tiles for tiles in pool if attention.seq_q > 64 or tiles.block_m <= 64]


def row_candidates(program: RowProgram) -> list[Tiles]:
    """Row-program configurations worth timing, the default first: `block_m` rows a program, each padded
    to `block_n`, the power of two at or above the width (`block_k` 1, unused). The default holds about
    1024 elements a program, 8 a thread (one row of 1024 on 4 warps: on an H100 the GELU + layer norm
    of benchmarks/models ran at 3.2-3.4 TB/s so, where 2 or 4 rows a program or 16 warps were up to 50%
    slower in bf16); the others hold twice and four times that."""
    block_n = 1 << (program.width - 1).bit_length()
    pool = []
    for elements in (1024, 2048, 4096):
        rows = max(1, min(elements // block_n, 1 << (program.rows - 1).bit_length()))
        pool.append(Tiles(rows, block_n, 1, max(1, min(16, rows * block_n // 256)), 1))
    return list(dict.fromkeys(pool))


# Filters of more taps than this loop over their rows at run time in kiln_depthwise_conv2d: unrolled
# whole, a 7x7 filter's 49 tile loads were all in flight at once and ptxas spilled (ConvNeXt's
# 96-channel 7x7: 7.8 KB of spill stores a thread, 2.4 ms a call on the H200 against Inductor's whole
# model at 10 ms); 5x5 filters unrolled need at most 252 registers and spill nothing (ptxas -v, sm_90a).
UNROLLED_TAPS = 25
LARGE_FILTER_CHANNELS = 64  # the channel block of a larger filter's tiles, at most


def depthwise_candidates(conv: Conv2d | MaxPool2d) -> list[Tiles]:
    """Depthwise (and max pooling) configurations worth timing, the default first: `block_m` output pixels by `block_n`
    channels (`block_k` 1, unused), NHWC so a tap's loads run along the channels, 4 warps. The channel
    block is the power of two up to 128 that pads the channels least (the larger one where two tie);
    tiles hold 4096, 2048 or 1024 outputs. The default is the 2048 one, or the 1024 one where that
    gives too few programs for every SM to run four (MobileNet's layers at batch 1): the fastest or
    within 10% of it on 10 of the 12 shapes and dtypes benchmarks/depthwise_tiles.py timed on an H100.

    A filter of more taps than UNROLLED_TAPS (7x7: its rows a run-time loop) takes the 4096 one with a
    channel block of at most LARGE_FILTER_CHANNELS, at every batch. Fitted on ConvNeXt-T's four 7x7
    layers at batch 32 on the H200 (kiln's PTX, benchmarks/depthwise_ptx.py, results/depthwise-ptx-h200.json:
    9-28% faster than the rule above, 968 -> 772 us a call); held out, ConvNeXt-B's four at batch 32
    and ConvNeXt-T's at batch 1 (results/depthwise-ptx-heldout-h200.json): faster on all eight, by 7-17%
    at batch 32 and 1-2 us of 15-20 at batch 1, and the fastest of 12 tiles on five."""
    block_n = min((128, 64, 32, 16), key=lambda block: (math.ceil(conv.c / block) * block, -block))
    large_filter = conv.r * conv.s > UNROLLED_TAPS
    if large_filter:
        block_n = min(block_n, LARGE_FILTER_CHANNELS)
    pixels = conv.n * conv.p * conv.q
    default, smaller, larger = (Tiles(max(1, area // block_n), block_n, 1, 4, 1) for area in (2048, 1024, 4096))
    if large_filter:
        return [larger, default, smaller]
    if math.ceil(pixels / default.block_m) * math.ceil(conv.c / block_n) < 4 * SMS:
        default, smaller = smaller, default
    return [default, smaller, larger]


def gemv_tiles(mm: Matmul) -> Tiles:
    """kiln_gemv's configuration: `block_m` the rows (a power of two), a K step of `block_k` (the
    reduction, up to 2,048), `block_n` outputs a program so that a step holds 8,192 weight elements
    over the rows, 4 warps. A GEMV is bound by reading the weight once: long contiguous rows and
    enough bytes in flight are what count. Fitted on Llama-3.2-1B's and Llama-3.1-8B's ten decode
    weights at one row, bf16 (benchmarks/gemv_tiles.py, results/gemv-h200.json: within 1.03x of the
    fastest of ~20 configurations on average, 1.08x at worst); on 15 weights of three models it was not
    fitted on (Qwen2.5-0.5B, Phi-3-mini, GPT-2) 1.10x on average, 1.26x at worst, and 0.94x of cuBLAS's
    time (F.linear) on average. The choice by program count it replaced was 1.16x and 1.96x there."""
    block_m = 1 << (mm.m - 1).bit_length()
    weights = 2 if mm.gated else 1  # two weights (SwiGLU's gate and up): as many elements a step, half the outputs
    if mm.quantized and mm.quantized[0] == 4:
        return _int4_gemv_tiles(mm, block_m, weights)
    block_k = min(2048, 1 << (mm.k - 1).bit_length())
    return Tiles(block_m, max(1, 8192 // block_m // block_k // weights), block_k, 4, 1)


def _int4_gemv_tiles(mm: Matmul, block_m: int, weights: int) -> Tiles:
    """kiln_gemv_quantized's int4 configuration: half bf16's products a step (4,096 over the rows and
    weights), whose f32 values of A at both halves of a row otherwise take the registers (8,192 took
    244 a thread: two programs an SM; 4,096, 128), the K step `block_k` bytes of each row, whole groups
    that divide half a row, up to 1,024; and at most N / 256 rows a program, so that a narrow weight
    still has a few programs an SM.

    Timed against 20 configurations (benchmarks/gemv_tiles.py --quantize int4, the H200): on the ten
    Llama-3.2-1B and Llama-3.1-8B weights it was fitted on, 1.06x the fastest on average, 1.29x at
    worst (results/gemv-int4-h200.json); on Phi-3-mini's five, held out, at most 1.03x; Qwen2.5-0.5B's
    MLP down projection (896 x 4,864: one group a step) took 1.79x the fastest in 32 rows a program
    before the N / 256 bound, which gives the fastest, 2 (results/gemv-int4-heldout-h200.json)."""
    group = mm.quantized[1]
    per_half = mm.k // 2 // group
    block_k = group * max(count for count in (1, 2, 4, 8) if per_half % count == 0 and group * count <= 1024)
    narrow = 1 << (max(1, mm.n // 256).bit_length() - 1)
    return Tiles(block_m, max(1, min(4096 // block_m // block_k // weights, narrow)), block_k, 4, 1)


# kiln_matmul's 16-bit configurations, largest first (block_k 64: a wgmma's K for bf16 is 16, four a step)
MATMUL_POOL = (Tiles(128, 256, 64, 8, 3), Tiles(128, 128, 64, 8, 3), Tiles(64, 128, 64, 4, 4), Tiles(128, 64, 64, 4, 4), Tiles(64, 64, 64, 4, 4))
WIDE_TILE_FROM = 1024  # 256-column tiles only for outputs this wide or wider
SKINNY_ROWS = 64  # matmuls of at most this many rows (a classifier head) keep `candidates`' 16-row tiles


def matmul_tiles(mm: Matmul) -> Tiles:
    """A 16-bit matmul's tiles: of MATMUL_POOL, those that pad the output's columns least (within 5%:
    Qwen2.5's 896 columns in 256-wide tiles computed 1,024 and ran 1.7-1.9x slower than in 128-wide
    ones), 256-wide ones only from WIDE_TILE_FROM columns (768 ran 1.14-1.19x slower in them), then
    the largest that gives every SM a program, else the smallest.

    Measured on the H200 (benchmarks/gemm_tiles.py, results/gemm-tiles-h200.json: 51 GEMMs of 12 real
    models' throughput cases, each timed in 9 configurations, launched from the device's Triton 3.6):
    1.01x the fastest configuration on average on the 6 decoders' 23 GEMMs (1.13x at worst: Llama's
    4096x512x2048, 128x128 with 4 warps fastest), 1.04x on the other 6 models' 28 (1.40x at worst:
    BART's 512-row LM head, 64x128 fastest); the program-count rule it replaced was 1.07x and 1.16x
    (1.89x and 1.84x at worst). The rule was written with all 12 in view; on the GEMMs of its HELDOUT
    group, timed after (results/gemm-tiles-heldout-h200.json: 32 GEMMs of GPT-2, T5, Whisper, CLIP and
    Swin, and of five models at batch 1), it is 1.04x the fastest on average, 1.24x at worst (ViT at
    batch 1, 197 rows: 64x128 fastest), where the old rule was 1.14x and 2.09x."""
    cols = mm.n
    pool = [tiles for tiles in MATMUL_POOL if tiles.block_n < 256 or cols >= WIDE_TILE_FROM]
    padded = {tiles: math.ceil(cols / tiles.block_n) * tiles.block_n for tiles in pool}
    least = min(padded.values())
    pool = [tiles for tiles in pool if padded[tiles] <= least * 1.05]
    return next((tiles for tiles in pool if _programs(mm, tiles) >= SMS), pool[-1])


# A convolution with fewer channels (a group's) than this, an RGB stem, runs kiln_conv2d's flat path
# (each K step BLOCK_K (r, s, c) indices): with 4 warps Triton 3.9's code for it computed wrong
# results on the H200 for RegNet's and MobileNet's 3x3 stride-2 stem at batch 1 (rel. L2 0.5-1.0, f32
# and bf16, block_m 16, 64 and 128; results/stem-conv-warps-h200.md), as every NHWC variant of the flat
# path with 4 warps had on the H100; with 8 warps every variant tried was right.
FLAT_PATH_BELOW = 16
FLAT_PATH_WARPS = 8


def default_layout(contraction: Contraction) -> str:
    """NHWC for convolutions that step through channels (NCHW reads measured 2-10x slower there); NCHW
    for few channels (an RGB stem; a group's channels, C / groups < 16), where every NHWC variant of the flat path that the device
    run tried with 4 warps computed wrong results and every NCHW one was right."""
    if isinstance(contraction, Matmul):
        return "nk"
    return "nhwc" if contraction.c // contraction.groups >= FLAT_PATH_BELOW else "nchw"


def default_tiles(contraction: Contraction, layout: str) -> Tiles:
    """For a problem that fills the GPU, the largest tiles that still do (of the measured shapes that
    did, each candidate won about a third); for one too small to, the smallest tiles, the most programs
    (they won 38 of the 46 measured shapes that small)."""
    chosen = candidates(contraction, layout)
    return chosen[0] if _programs(contraction, chosen[0]) >= SMS - 12 else chosen[-1]


def _programs(contraction: Contraction, tiles: Tiles) -> int:
    rows, cols, _ = contraction.gemm
    groups = contraction.groups if isinstance(contraction, Conv2d) else 1
    return groups * math.ceil(rows / tiles.block_m) * math.ceil(cols / tiles.block_n)


def candidates(contraction: Contraction, layout: str, count: int = 3) -> list[Tiles]:
    """A few configurations worth timing: from a fixed pool, largest tiles first, the two largest that
    still give about one program per SM, then the next smaller one; a problem too small for that gets
    the smallest tiles. 64-row tiles use one warpgroup's wgmma, 16-row tiles (skinny outputs) mma.sync.
    f32 runs TF32 MMAs, which take half the K per byte of bf16: its K step is halved, and it has no
    128x256 tile (tf32x3 keeps three products per step and spills there)."""
    rows, cols, depth = contraction.gemm
    k = 64 if contraction.dtype != "f32" else 32
    pool = [
        *([Tiles(128, 256, k, 8, 3)] if contraction.dtype != "f32" else []),
        Tiles(128, 128, k, 8, 3), Tiles(128, 64, k, 4, 4), Tiles(64, 128, k, 4, 4), Tiles(64, 64, k, 4, 4),
        Tiles(64, 32, 2 * k, 4, 4), Tiles(16, 64, 2 * k, 4, 4), Tiles(16, 32, 4 * k, 4, 4),
    ]  # fmt: skip
    fitted = []
    for t in pool:  # no tile wider than the (power-of-two rounded) output, nor a K step past the reduction
        block_n = min(t.block_n, max(16, 1 << (cols - 1).bit_length()))
        block_k = min(t.block_k, max(16, 1 << (depth - 1).bit_length()))
        channels = contraction.c // contraction.groups if isinstance(contraction, Conv2d) else 0
        if layout == "nhwc" and FLAT_PATH_BELOW <= channels < block_k:
            block_k = 1 << (channels.bit_length() - 1)  # whole channel chunks where there are enough
        warps = FLAT_PATH_WARPS if 0 < channels < FLAT_PATH_BELOW else t.num_warps
        if t.block_m >= 64 or rows <= 64:  # 16-row tiles only for skinny outputs
            fitted.append(Tiles(t.block_m, block_n, block_k, warps, t.num_stages, t.group_m))
    fitted = list(dict.fromkeys(fitted))
    busy = [t for t in fitted if _programs(contraction, t) >= SMS - 12]
    if not busy:
        return fitted[-count:]
    chosen = busy[: count - 1]
    rest = [t for t in fitted if t not in chosen]
    smaller = [t for t in rest if _programs(contraction, t) > _programs(contraction, chosen[-1])]
    return chosen + (smaller[:1] if smaller else rest[-1:])
