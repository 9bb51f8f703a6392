"""SwiGLU's two matmuls of one input as kiln's one kernel over both weights, per tile configuration,
against the two matmuls apart, on a CUDA GPU.

kiln_matmul with a second weight (b2_ptr) and an epilogue computes silu(x @ Wg^T) * (x @ Wu^T) on each
tile: the input read once for both, neither product written. Its first tiles (each weight half the
columns of the tiles a matmul twice as wide gets) made Qwen2.5's and Llama's prefill slower on the
H200 (results/repeats/real-cuda-h200-epilogues.md). This times the gated kernel in a pool of tiles on
the decoders' gate/up shapes, the two plain matmuls in the tiles kiln gives them, and torch's
`silu(g) * u` over their products, launched from Triton directly (the device's Triton JIT-compiles the
same source), each result checked against an f32 reference:

    python3 benchmarks/gated_gemm.py -o $OUT/gated-h200.json        # on the GPU machine
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import click
import triton
import triton.language as tl

# model -> its gate/up GEMM (M, N, K) at the throughput batch, then at batch 1 (latency)
SHAPES = {
    "qwen2_5_0_5b": [(4096, 4864, 896), (512, 4864, 896)],
    "llama_3_2_1b": [(4096, 8192, 2048), (512, 8192, 2048)],
    "qwen3_0_6b": [(4096, 3072, 1024)],
    "mistral_7b": [(4096, 14336, 4096)],
}
# (block_m, block_n of each weight, block_k, warps, stages)
POOL = [
    (128, 128, 64, 8, 3), (128, 64, 64, 8, 3), (128, 64, 64, 4, 4), (128, 64, 64, 8, 4), (64, 128, 64, 4, 4),
    (64, 64, 64, 4, 4), (256, 64, 64, 8, 3), (128, 128, 64, 8, 2), (128, 64, 32, 4, 5),
]  # fmt: skip


@triton.jit
def _swiglu(v0, v1):
    """The SwiGLU epilogue as kiln generates it for bf16: each product rounded, silu rounded, the product."""
    g = v0.to(tl.bfloat16).to(tl.float32)
    u = v1.to(tl.bfloat16).to(tl.float32)
    s = (g * tl.div_rn(1.0, 1.0 + tl.exp(-g))).to(tl.bfloat16).to(tl.float32)
    return s * u


def timed_us(fn) -> float:
    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def launch(a, w, w2, c, tiles: tuple[int, int, int, int, int], epilogue) -> None:
    from kiln.targets.cuda.kernels.triton_source import kiln_matmul

    m, k = a.shape
    n = w.shape[0]
    block_m, block_n, block_k, warps, stages = tiles
    grid = (math.ceil(m / block_m) * math.ceil(n / block_n), 1)
    kiln_matmul[grid](
        a, w, None, w2, c, M=m, N=n, K=k, A_SB=m * k, A_SM=k, A_SK=1, B_SB=n * k, B_SK=1, B_SN=k, C_SB=m * n, C_SM=n, C_SN=1,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, PRECISION="ieee", EPILOGUE=epilogue,
        num_warps=warps, num_stages=stages,
    )  # fmt: skip


def plain_tiles(m: int, n: int, k: int) -> tuple[int, int, int, int, int]:
    from kiln.targets.cuda.kernels.contraction import Matmul
    from kiln.targets.cuda.kernels.tiles import choose

    t = choose(Matmul(m, n, k, "bf16", "bf16", "nk")).tiles
    return t.block_m, t.block_n, t.block_k, t.num_warps, t.num_stages


def time_shape(model: str, m: int, n: int, k: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=generator).to(torch.bfloat16)
    wg, wu = (torch.randn(n, k, device="cuda", generator=generator).mul_(k**-0.5).to(torch.bfloat16) for _ in range(2))
    reference = F.silu(a.float() @ wg.float().t()) * (a.float() @ wu.float().t())
    g, u, c = (torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(3))
    plain = plain_tiles(m, n, k)

    def apart() -> None:
        launch(a, wg, None, g, plain, None)
        launch(a, wu, None, u, plain, None)

    apart()
    gemms_us = timed_us(apart)
    product_us = timed_us(lambda: F.silu(g) * u)
    rows = []
    for tiles in POOL:
        label = "{}x{}x{}w{}s{}".format(*tiles)
        call = functools.partial(launch, a, wg, wu, c, tiles, _swiglu)
        try:
            c.fill_(float("nan"))
            call()
            error = float((c.float() - reference).norm() / reference.norm())
            us = timed_us(call)
        except Exception as exc:  # a configuration Triton refuses (shared memory) is a line, not the end
            print(f"{model} {m}x{n}x{k} {label}: {type(exc).__name__}: {exc}"[:200], flush=True)
            continue
        rows.append({"model": model, "m": m, "n": n, "k": k, "tiles": label, "us": round(us, 2), "rel_l2": error,
                     "apart_gemms_us": round(gemms_us, 2), "apart_product_us": round(product_us, 2), "apart_tiles": "{}x{}x{}w{}s{}".format(*plain)})  # fmt: skip
        print(f"{model:14} {m:>5}x{n:<6}x{k:<5} {label:>14} {us:8.1f} us  rel. L2 {error:.1e}", flush=True)
    best = min(rows, key=lambda row: row["us"])
    print(f"{model:14} {m:>5}x{n:<6}x{k:<5} apart: GEMMs {gemms_us:.1f} us + silu*up {product_us:.1f} us; gated best {best['tiles']} {best['us']:.1f} us", flush=True)
    return rows


@click.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def main(output: Path) -> None:
    import torch

    rows: list[dict] = []
    for model, shapes in SHAPES.items():
        for m, n, k in shapes:
            rows += time_shape(model, m, n, k)
            output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "dtype": "bf16", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
