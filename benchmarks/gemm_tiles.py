"""kiln's matmul kernel per tile configuration, on the real models' prefill GEMMs, on a CUDA GPU.

`tiles.candidates` picks kiln_matmul's tiles from a fixed pool by program count alone. On the real
models (benchmarks/real/) that left GEMMs whose output width is not a multiple of the tile's (Qwen2.5's
896 = 3.5 x 256) at 240-380 TFLOP/s where their neighbours ran at 560 (results/profile-real-*.json).
This times every configuration of a wider pool on each GEMM the real models' throughput cases run
(bf16, as their manifests list them), launched from Triton directly (the device's Triton JIT-compiles
the same source), next to torch's `F.linear` (cuBLAS), and checks each result against an f32 product:

    python3 benchmarks/gemm_tiles.py -o $OUT/gemm-h200.json        # on the GPU machine
    python benchmarks/gemm_tiles.py --summary benchmarks/results/gemm-h200.json   # here: the table

The shapes are grouped by model, so that a rule fitted on some models is checked on the others.
"""

from __future__ import annotations

import functools
import json
import math
from pathlib import Path

import click

# model -> its throughput case's GEMMs (M, N, K): rows are batch x tokens (or pixels), nn.Linear weights [N, K]
MODELS = {
    "bert_base": [(4096, 768, 768), (4096, 3072, 768), (4096, 768, 3072)],
    "bart_base": [(512, 768, 768), (512, 3072, 768), (512, 768, 3072), (512, 50265, 768)],
    "vit_base": [(6304, 2304, 768), (6304, 768, 768), (6304, 3072, 768), (6304, 768, 3072)],
    "deit_small": [(12672, 384, 384), (12672, 1536, 384), (12672, 384, 1536)],
    "convnext_tiny": [(100352, 384, 96), (100352, 96, 384), (25088, 768, 192), (25088, 192, 768), (6272, 1536, 384), (6272, 384, 1536), (1568, 3072, 768), (1568, 768, 3072)],
    "siglip_base": [(6272, 768, 768), (6272, 3072, 768), (6272, 768, 3072), (2048, 768, 768), (2048, 3072, 768), (2048, 768, 3072)],
    "qwen2_5_0_5b": [(4096, 896, 896), (4096, 128, 896), (4096, 4864, 896), (4096, 896, 4864)],
    "qwen3_0_6b": [(4096, 2048, 1024), (4096, 1024, 2048), (4096, 1024, 1024), (4096, 3072, 1024), (4096, 1024, 3072)],
    "llama_3_2_1b": [(4096, 2048, 2048), (4096, 512, 2048), (4096, 8192, 2048), (4096, 2048, 8192)],
    "gemma_2b": [(4096, 2048, 2048), (4096, 256, 2048), (4096, 16384, 2048), (4096, 2048, 16384)],
    "mistral_7b": [(4096, 4096, 4096), (4096, 1024, 4096), (4096, 14336, 4096), (4096, 4096, 14336)],
    "phi_2": [(4096, 2560, 2560), (4096, 10240, 2560), (4096, 2560, 10240)],
}  # fmt: skip
# Held out from tiles.matmul_tiles' fit: other models' throughput GEMMs, and decoders' and encoders' at batch 1
HELDOUT = {
    "gpt2": [(4096, 2304, 768)],
    "t5_base": [(512, 32128, 768)],
    "whisper_small_encoder": [(24000, 768, 768), (24000, 3072, 768), (24000, 768, 3072)],
    "clip_vit_b32": [(1600, 768, 768), (1600, 3072, 768), (1600, 768, 3072), (2464, 512, 512), (2464, 2048, 512), (2464, 512, 2048)],
    "swin_tiny": [(100352, 288, 96), (100352, 96, 96), (25088, 576, 192), (25088, 192, 192), (6272, 1152, 384), (1568, 2304, 768)],
    "llama_3_2_1b-latency": [(512, 2048, 2048), (512, 512, 2048), (512, 8192, 2048), (512, 2048, 8192)],
    "qwen2_5_0_5b-latency": [(512, 896, 896), (512, 4864, 896), (512, 896, 4864)],
    "mistral_7b-latency": [(512, 4096, 4096), (512, 14336, 4096), (512, 4096, 14336)],
    "bert_base-latency": [(128, 768, 768), (128, 3072, 768), (128, 768, 3072)],
    "vit_base-latency": [(197, 2304, 768), (197, 768, 768), (197, 3072, 768), (197, 768, 3072)],
}  # fmt: skip
# (block_m, block_n, block_k, warps, stages): tiles.candidates' bf16 pool, and wider and taller ones
POOL = [
    (128, 256, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 8, 3), (128, 128, 64, 4, 4), (128, 64, 64, 4, 4),
    (64, 256, 64, 4, 3), (64, 128, 64, 4, 4), (64, 64, 64, 4, 4), (128, 128, 128, 8, 2),
]  # fmt: skip


def timed_us(fn) -> float:
    import triton

    return triton.testing.do_bench(fn, warmup=25, rep=100, return_mode="median") * 1e3


def launch(a, w, c, tiles: tuple[int, int, int, int, int]) -> None:
    from kiln.targets.cuda.kernels.triton_source import kiln_matmul

    m, k = a.shape
    n = w.shape[0]
    block_m, block_n, block_k, warps, stages = tiles
    grid = (math.ceil(m / block_m) * math.ceil(n / block_n), 1)
    kiln_matmul[grid](
        a, w, None, c, M=m, N=n, K=k, A_SB=m * k, A_SM=k, A_SK=1, B_SB=n * k, B_SK=1, B_SN=k, C_SB=m * n, C_SM=n, C_SN=1,
        BLOCK_M=block_m, BLOCK_N=block_n, BLOCK_K=block_k, GROUP_M=8, PRECISION="ieee", EPILOGUE=None, num_warps=warps, num_stages=stages,
    )  # fmt: skip


def chosen_tiles(m: int, n: int, k: int) -> str:
    from kiln.targets.cuda.kernels.contraction import Matmul
    from kiln.targets.cuda.kernels.tiles import choose

    return choose(Matmul(m, n, k, "bf16", "bf16", "nk")).tiles.label


def time_shape(model: str, m: int, n: int, k: int) -> list[dict]:
    import torch
    import torch.nn.functional as F

    generator = torch.Generator(device="cuda").manual_seed(0)
    a = torch.randn(m, k, device="cuda", generator=generator).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=generator).mul_(k**-0.5).to(torch.bfloat16)
    reference = a.float() @ w.float().t()
    c = torch.empty(m, n, device="cuda", dtype=torch.bfloat16)
    flops = 2 * m * n * k
    torch_us = timed_us(functools.partial(F.linear, a, w))
    rows = []
    for tiles in POOL:
        label = "{}x{}x{}w{}s{}".format(*tiles)
        call = functools.partial(launch, a, w, c, tiles)
        try:
            c.fill_(float("nan"))
            call()
            error = float((c.float() - reference).norm() / reference.norm())
            us = timed_us(call)
        except Exception as exc:  # a configuration Triton refuses (shared memory) is a line, not the end
            print(f"{model} {m}x{n}x{k} {label}: {type(exc).__name__}: {exc}"[:200], flush=True)
            continue
        rows.append({"model": model, "m": m, "n": n, "k": k, "tiles": label, "us": round(us, 2), "tflops": round(flops / us / 1e6, 1),
                     "rel_l2": error, "torch_us": round(torch_us, 2)})  # fmt: skip
    best = min(rows, key=lambda row: row["us"])
    print(
        f"{model:14} {m:>6}x{n:<6}x{k:<6} torch {torch_us:8.1f} us ({flops / torch_us / 1e6:5.0f} TFLOP/s)"
        f"  best {best['tiles']:>14} {best['us']:8.1f} us ({best['tflops']:5.0f})  max rel. L2 {max(r['rel_l2'] for r in rows):.1e}",
        flush=True,
    )
    return rows


def summary(path: Path) -> None:
    """Per shape: torch, the best tiles, the ones kiln chooses now, each in us and as a ratio to the best."""
    rows = json.loads(path.read_text())["rows"]
    shapes = list(dict.fromkeys((row["model"], row["m"], row["n"], row["k"]) for row in rows))
    print("| model | M x N x K | torch us | best | best us | chosen | chosen / best |")
    print("|---|---|---|---|---|---|---|")
    ratios = []
    for model, m, n, k in shapes:
        mine = [row for row in rows if (row["model"], row["m"], row["n"], row["k"]) == (model, m, n, k)]
        best = min(mine, key=lambda row: row["us"])
        chosen = chosen_tiles(m, n, k)
        at = next((row["us"] for row in mine if row["tiles"] == chosen), math.nan)
        ratios += [at / best["us"]] if at == at else []
        print(f"| {model} | {m}x{n}x{k} | {mine[0]['torch_us']} | {best['tiles']} | {best['us']} | {chosen} | {at / best['us']:.2f} |")
    geomean = math.exp(sum(math.log(ratio) for ratio in ratios) / len(ratios))
    print(f"\nchosen / best: geomean {geomean:.3f}, worst {max(ratios):.2f}, over {len(ratios)} GEMMs")


@click.command()
@click.option("-o", "--output", type=click.Path(path_type=Path))
@click.option("--only", default=None, help="Only the models whose names contain this.")
@click.option("--heldout", is_flag=True, help="Time the held-out group (HELDOUT) instead of MODELS.")
@click.option("--summary", "saved", type=click.Path(exists=True, path_type=Path), help="Render a saved run instead.")
def main(output: Path | None, only: str | None, heldout: bool, saved: Path | None) -> None:
    if saved is not None:
        summary(saved)
        return
    import torch

    assert output is not None, "-o is needed to time"
    rows: list[dict] = []
    done: set[tuple[int, int, int]] = set()
    for model, shapes in (HELDOUT if heldout else MODELS).items():
        if only and only not in model:
            continue
        for m, n, k in shapes:
            if (m, n, k) in done:  # one shape shared by two models is timed once, under the first
                continue
            done.add((m, n, k))
            rows += time_shape(model, m, n, k)
            output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "dtype": "bf16", "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
