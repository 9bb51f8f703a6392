"""kiln's GEMV kernel against torch's, per tile configuration, on a CUDA GPU.

A decoder's decode step is matrix-vector products (one token a row) over every weight: memory-bound,
and where IREE 3.13's own CUDA code reached 30-70 GB/s of the H200's ~4,200 (benchmarks/generation.py
--profile). `kiln_gemv` (targets/cuda/kernels/triton_source.py) computes them; this times its
configurations, launched from Triton directly (the device's Triton JIT-compiles the same source), on
the weight shapes of several decoders, next to torch's `F.linear`, and checks each result against
torch's in f32. Needs torch with CUDA and Triton:

    python3 benchmarks/gemv_tiles.py -o gemv-h200.json        # on the GPU machine
    python3 benchmarks/gemv_tiles.py --quantize int4 --models llama-3.2-1b -o gemv-int4-h200.json

prints one line per shape and configuration: microseconds, GB/s (the weight read once), rel. L2
error; and per shape the fastest configuration and the one targets/cuda/kernels/tiles.py chooses.
The shapes are grouped by model, so a heuristic fitted on some models is checked on the others.
With `--quantize int8|int4` it times `kiln_gemv_quantized` over weights as `--quantize` stores them
(compiler/quantize.py; int4 in groups of 128), against torch's `F.linear` over the bf16 weight, the
error measured against the f32 product with the dequantized weight.
"""

from __future__ import annotations

import functools
import json
from pathlib import Path

import click
import torch
import torch.nn.functional as F

from kiln.compiler.quantize import QuantizedLinear, Scheme, quantize_rows
from kiln.targets.cuda.kernels.contraction import Matmul
from kiln.targets.cuda.kernels.tiles import Tiles, gemv_tiles

# model -> its decode step's weights (N, K, layout): attention projections, MLP, LM head
MODELS = {
    "llama-3.2-1b": [(2048, 2048, "nk"), (512, 2048, "nk"), (8192, 2048, "nk"), (2048, 8192, "nk"), (128256, 2048, "nk")],
    "llama-3.1-8b": [(4096, 4096, "nk"), (1024, 4096, "nk"), (14336, 4096, "nk"), (4096, 14336, "nk"), (128256, 4096, "nk")],
    "qwen2.5-0.5b": [(896, 896, "nk"), (128, 896, "nk"), (4864, 896, "nk"), (896, 4864, "nk"), (151936, 896, "nk")],
    "phi-3-mini": [(9216, 3072, "nk"), (3072, 3072, "nk"), (16384, 3072, "nk"), (3072, 8192, "nk"), (32064, 3072, "nk")],
    "gpt2": [(2304, 768, "kn"), (768, 768, "kn"), (3072, 768, "kn"), (768, 3072, "kn"), (50257, 768, "nk")],
}
ELEMENTS = (2048, 4096, 8192)  # a program's weight tile, elements a K step
BLOCK_NS = (1, 2, 4, 8, 16, 32, 64)


def configurations(n: int, k: int) -> list[Tiles]:
    """Every (BLOCK_N, BLOCK_K) with a tile of ELEMENTS, 4 warps; the K step no longer than K needs."""
    depth = 1 << (k - 1).bit_length()
    found = []
    for elements in ELEMENTS:
        for block_n in BLOCK_NS:
            block_k = elements // block_n
            if 32 <= block_k <= depth and block_n <= max(1, 1 << (n - 1).bit_length()):
                found.append(Tiles(1, block_n, block_k, 4, 1))
    return list(dict.fromkeys(found))


def quantized_configurations(k: int, scheme: Scheme) -> list[Tiles]:
    """A few configurations of each kind: int8's K steps of 1,024 and 2,048 bytes, int4's of 1, 8, 16 and
    32 groups where they divide half a row; 2-16 rows a program, 4 warps, and 8 for the largest tiles."""
    if scheme.bits == 8:
        steps = [block_k for block_k in (1024, 2048) if block_k <= 1 << (k - 1).bit_length()]
    else:
        steps = [scheme.group * count for count in (1, 8, 16, 32) if (k // 2 // scheme.group) % count == 0]
    found = [Tiles(1, block_n, block_k, 4, 1) for block_k in steps for block_n in (2, 4, 8, 16)]
    return found + [Tiles(1, 16, block_k, 8, 1) for block_k in steps]


def launch_quantized(x: torch.Tensor, layer: QuantizedLinear, out: torch.Tensor, tiles: Tiles) -> None:
    from kiln.targets.cuda.kernels.triton_source import kiln_gemv_quantized

    m, k = x.shape
    n = out.shape[1]
    grid = ((n + tiles.block_n - 1) // tiles.block_n,)
    kiln_gemv_quantized[grid](
        x, layer.weight_q, layer.weight_scale, None, None, None, None, None, None, None, out,
        M=m, N=n, K=k, N1=0, N2=0, BITS=layer.scheme.bits, GROUP=layer.scheme.group, EPILOGUE=None,
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, num_warps=tiles.num_warps, num_stages=tiles.num_stages,
    )  # fmt: skip


def time_quantized_shape(model: str, n: int, k: int, scheme: Scheme) -> list[dict]:
    """One weight shape quantized: torch's time over the bf16 weight, then each configuration's."""
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, k, device="cuda", generator=generator).to(torch.bfloat16)
    w = torch.randn(n, k, device="cuda", generator=generator).mul_(0.02).to(torch.bfloat16)
    values, scales = quantize_rows(w, scheme)
    layer = QuantizedLinear(k, n, scheme, values, scales, None)
    reference = x.float() @ layer.dequantized(torch.float32).t()
    out = torch.empty(1, n, device="cuda", dtype=torch.bfloat16)
    weight_bytes = values.numel() + scales.numel() * 4
    torch_us = timed_us(functools.partial(F.linear, x, w))
    chosen = gemv_tiles(Matmul(1, n, k, "bf16", "bf16", quantized=(scheme.bits, scheme.group)))
    calls = {tiles: functools.partial(launch_quantized, x, layer, out, tiles) for tiles in [chosen, *quantized_configurations(k, scheme)]}
    row = {"model": model, "n": n, "k": k, "scheme": scheme.name, "torch_us": round(torch_us, 2)}
    rows = timed_configurations(row, calls, chosen, out, reference, weight_bytes, f"{model} {n}x{k}")
    _summary(model, n, k, scheme.name, torch_us, w.numel() * 2, rows)
    return rows


def timed_configurations(
    row: dict, calls: dict[Tiles, functools.partial], chosen: Tiles, out: torch.Tensor, reference: torch.Tensor, bytes_read: int, label: str
) -> list[dict]:
    """`row` for each configuration (`calls`: each launches its kernel into `out`) that ran: its time,
    its rate (`bytes_read` a call) and its result's error against `reference`; `label` names the shape
    in the line a configuration that failed prints (attention_row_tiles.py's too)."""
    rows = []
    for tiles, call in calls.items():
        try:
            us = timed_us(call)
        except Exception as exc:  # a configuration Triton refuses is a line, not the end of the run
            print(f"{label} {tiles.label}: {type(exc).__name__}: {exc}"[:300], flush=True)
            continue
        call()
        error = float((out.float() - reference).norm() / reference.norm())
        rows.append({**row, "tiles": tiles.label, "chosen": tiles == chosen, "us": round(us, 2), "gb_s": round(bytes_read / us / 1e3, 1), "rel_l2": error})
    return rows


def _summary(model: str, n: int, k: int, kind: str, torch_us: float, torch_bytes: int, rows: list[dict]) -> None:
    best = min(rows, key=lambda row: row["us"])
    mine = next(row for row in rows if row["chosen"])
    print(
        f"{model:13} {n:>6}x{k:<6} {kind}  torch {torch_us:7.1f} us ({torch_bytes / torch_us / 1e3:6.0f} GB/s)"
        f"  best {best['tiles']:>14} {best['us']:7.1f} us ({best['gb_s']:6.0f} GB/s)  chosen {mine['tiles']:>14} {mine['us']:7.1f} us"
        f"  max rel. L2 {max(row['rel_l2'] for row in rows):.1e}",
        flush=True,
    )


def launch(x: torch.Tensor, w: torch.Tensor, out: torch.Tensor, layout: str, tiles: Tiles) -> None:
    from kiln.targets.cuda.kernels.triton_source import kiln_gemv

    m, k = x.shape
    n = out.shape[1]
    b_sk, b_sn = (1, k) if layout == "nk" else (n, 1)
    grid = ((n + tiles.block_n - 1) // tiles.block_n,)
    kiln_gemv[grid](
        x, w, None, None, None, None, None, out, M=m, N=n, K=k, B_SK=b_sk, B_SN=b_sn, N1=0, N2=0, EPILOGUE=None,
        BLOCK_M=tiles.block_m, BLOCK_N=tiles.block_n, BLOCK_K=tiles.block_k, num_warps=tiles.num_warps, num_stages=tiles.num_stages,
    )  # fmt: skip


def timed_us(fn, iterations: int = 30, warmups: int = 1, flush_l2: bool = True) -> float:
    """Median microseconds of `fn` (CUDA events), after `warmups` calls; with `flush_l2` the L2 flushed
    between calls by writing 256 MiB, so each call reads its weight from memory as a decode step does."""
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda") if flush_l2 else None
    for _ in range(warmups):
        fn()
    times = []
    for _ in range(iterations):
        if flush is not None:
            flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


def time_shape(model: str, n: int, k: int, layout: str, dtype: str) -> list[dict]:
    """One weight shape: torch's time, then each configuration's, with its error against f32."""
    torch_dtype = {"bf16": torch.bfloat16, "f32": torch.float32}[dtype]
    generator = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(1, k, device="cuda", generator=generator).to(torch_dtype)
    w_nk = torch.randn(n, k, device="cuda", generator=generator).mul_(0.02).to(torch_dtype)
    w = w_nk if layout == "nk" else w_nk.t().contiguous()
    reference = x.float() @ w_nk.float().t()
    out = torch.empty(1, n, device="cuda", dtype=torch_dtype)
    weight_bytes = w.numel() * w.element_size()
    torch_us = timed_us(functools.partial(F.linear, x, w_nk) if layout == "nk" else functools.partial(torch.matmul, x, w))
    chosen = gemv_tiles(Matmul(1, n, k, dtype, dtype, layout))
    calls = {tiles: functools.partial(launch, x, w, out, layout, tiles) for tiles in [chosen, *configurations(n, k)]}
    row = {"model": model, "n": n, "k": k, "layout": layout, "torch_us": round(torch_us, 2)}
    rows = timed_configurations(row, calls, chosen, out, reference, weight_bytes, f"{model} {n}x{k}")
    _summary(model, n, k, layout, torch_us, weight_bytes, rows)
    return rows


def check_rows() -> None:
    """kiln_gemv with 1 to 7 rows (a decode step at batch 1 to 7), in bf16 and f32, with the tiles
    tiles.py chooses, against f32 products: the largest rel. L2 error per dtype (bf16 rounds its result)."""
    for dtype, torch_dtype in (("bf16", torch.bfloat16), ("f32", torch.float32)):
        worst = 0.0
        for m in range(1, 8):
            for n, k, layout in ((2048, 2048, "nk"), (1000, 4864, "nk"), (768, 3072, "kn")):
                generator = torch.Generator(device="cuda").manual_seed(m)
                x = torch.randn(m, k, device="cuda", generator=generator).to(torch_dtype)
                w_nk = torch.randn(n, k, device="cuda", generator=generator).to(torch_dtype)
                out = torch.empty(m, n, device="cuda", dtype=torch_dtype)
                launch(x, w_nk if layout == "nk" else w_nk.t().contiguous(), out, layout, gemv_tiles(Matmul(m, n, k, dtype, dtype, layout)))
                reference = x.float() @ w_nk.float().t()
                worst = max(worst, float((out.float() - reference).norm() / reference.norm()))
        print(f"kiln_gemv {dtype}, 1-7 rows: largest rel. L2 {worst:.1e}", flush=True)


@click.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--dtype", type=click.Choice(("bf16", "f32")), default="bf16", show_default=True)
@click.option("--check-rows", "rows_only", is_flag=True, help="Only check 1 to 7 rows' results (seconds), write nothing.")
@click.option("--quantize", type=click.Choice(("int8", "int4")), help="Time kiln_gemv_quantized (bf16 activations) instead.")
@click.option("--models", "only", multiple=True, type=click.Choice(sorted(MODELS)), help="These models' shapes [default: all].")
def main(output: Path, dtype: str, rows_only: bool, quantize: str | None, only: tuple[str, ...]) -> None:
    if rows_only:
        check_rows()
        return
    rows: list[dict] = []
    for model, shapes in MODELS.items():
        for n, k, layout in shapes if not only or model in only else ():
            if quantize is None:
                rows += time_shape(model, n, k, layout, dtype)
            elif layout == "nk" and Scheme.parse(quantize).takes(k):
                rows += time_quantized_shape(model, n, k, Scheme.parse(quantize))
            output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "dtype": dtype, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
