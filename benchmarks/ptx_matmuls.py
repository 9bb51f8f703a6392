"""kiln's matmul kernels as kiln ships them: PTX compiled here by Triton 3.9, timed on the GPU machine.

gemm_tiles.py launches kiln_matmul's source through the device's own Triton (3.6), whose code is not
the code in kiln's artifacts: a kernel over two weights ran about a fifth slower inside Llama-3.2-1B
and Qwen2.5 than the device's Triton had timed it (at 015ee61, this file then timed that kernel:
results/ptx-matmuls-h200.json). This compiles each (shape, tiles) with kiln's build
(build.compile_kernel, the PTX iree-compile embeds), and times that PTX on the device, launched with
CuPy as IREE launches it (the operands' pointers, nothing else), each result checked against torch:

    python benchmarks/ptx_matmuls.py compile -o .device-carry/ptx-matmuls.json     # here
    python3 benchmarks/ptx_matmuls.py time .device-carry/ptx-matmuls.json -o $OUT/ptx-matmuls-h200.json   # there

Cases: each decoder's gate GEMM with SwiGLU's epilogue reading the up projection's product (a
further operand) in a pool of tiles, and the plain matmul in the tiles kiln gives it.
"""

from __future__ import annotations

import json
from pathlib import Path

import click

# model -> its gate/up GEMM (M, N, K): the throughput batch (8 x 512 tokens), then batch 1
SHAPES = {
    "qwen2_5_0_5b": [(4096, 4864, 896), (512, 4864, 896)],
    "llama_3_2_1b": [(4096, 8192, 2048), (512, 8192, 2048)],
    "qwen3_0_6b": [(4096, 3072, 1024)],
    "mistral_7b": [(4096, 14336, 4096)],
}
# (block_m, block_n, block_k, warps, stages)
POOL = [(128, 256, 64, 8, 3), (128, 128, 64, 8, 3), (256, 128, 64, 8, 3), (128, 128, 64, 4, 4)]
# SwiGLU's epilogue over v0 (gate) and v1 (up) in bf16, as outline-contractions describes it
SWIGLU = (
    ("cast", "f32", 0), ("neg", "f32", 2), ("exp", "f32", 3), ("add", "f32", 4, 1.0), ("reciprocal", "f32", 5),
    ("mul", "f32", 2, 6), ("cast", "bf16", 7), ("mul", "bf16", 8, 1),
)  # fmt: skip


def _entry(model: str, mm, tiles) -> dict:
    from kiln.targets.cuda.kernels.build import compile_kernel

    kernel = compile_kernel(mm, tiles)
    return {
        "model": model, "m": mm.m, "n": mm.n, "k": mm.k, "epilogue": bool(mm.epilogue), "tiles": tiles.label, "entry": kernel.entry,
        "ptx": kernel.ptx, "grid": list(kernel.grid), "warps": kernel.num_warps, "shared": kernel.shared_bytes,
    }  # fmt: skip


@click.group()
def main() -> None:
    """Compile here, time there."""


@main.command("compile")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def compile_(output: Path) -> None:
    from kiln.targets.cuda.kernels.contraction import Matmul
    from kiln.targets.cuda.kernels.tiles import Tiles, choose

    entries = []
    for model, shapes in SHAPES.items():
        for m, n, k in shapes:
            plain = Matmul(m, n, k, "bf16", "bf16")
            entries.append(_entry(model, plain, choose(plain).tiles))
            fused = Matmul(m, n, k, "bf16", "bf16", other="bf16", epilogue=SWIGLU, product_dtype="bf16")
            for pool in POOL:
                entries.append(_entry(model, fused, Tiles(*pool)))
            print(f"{model} {m}x{n}x{k}: {1 + len(POOL)} kernels", flush=True)
    output.write_text(json.dumps(entries) + "\n")


def _launcher(entry: dict, folder: Path):
    import cupy as cp

    path = folder / f"{entry['entry']}.ptx"
    path.write_text(entry["ptx"])
    fn = cp.RawModule(path=str(path)).get_function(entry["entry"])
    if entry["shared"] > 48 * 1024:
        fn.max_dynamic_shared_size_bytes = entry["shared"]

    def launch(*tensors) -> None:
        pointers = tuple(cp.uint64(t.data_ptr()) for t in tensors)
        fn(tuple(entry["grid"]), (32 * entry["warps"], 1, 1), pointers, shared_mem=entry["shared"])

    return launch


def _timed_us(launch, *tensors, iterations: int = 50) -> float:
    import torch

    for _ in range(5):
        launch(*tensors)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    times = []
    for _ in range(iterations):
        start.record()
        launch(*tensors)
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end) * 1e3)
    return sorted(times)[len(times) // 2]


@main.command("time")
@click.argument("compiled", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def time_(compiled: Path, output: Path) -> None:
    import tempfile

    import torch
    import torch.nn.functional as F

    folder = Path(tempfile.mkdtemp())
    rows = []
    shapes = list(dict.fromkeys((e["model"], e["m"], e["n"], e["k"]) for e in json.loads(compiled.read_text())))
    entries = json.loads(compiled.read_text())
    for model, m, n, k in shapes:
        generator = torch.Generator(device="cuda").manual_seed(0)
        a = torch.randn(m, k, device="cuda", generator=generator).to(torch.bfloat16)
        wg, wu = (torch.randn(n, k, device="cuda", generator=generator).mul_(k**-0.5).to(torch.bfloat16) for _ in range(2))
        reference = F.silu(a.float() @ wg.float().t()) * (a.float() @ wu.float().t())
        g, c = (torch.empty(m, n, device="cuda", dtype=torch.bfloat16) for _ in range(2))
        u = (a @ wu.t()).contiguous()  # the up projection's product, the further operand
        product_us = _timed_us(lambda x, y: F.silu(x) * y, g, u)
        for entry in (e for e in entries if (e["model"], e["m"], e["n"], e["k"]) == (model, m, n, k)):
            launch = _launcher(entry, folder)
            if entry["epilogue"]:
                c.fill_(float("nan"))
                launch(a, wg, u, c)
                torch.cuda.synchronize()
                error = float((c.float() - reference).norm() / reference.norm())
                us = _timed_us(launch, a, wg, u, c)
            else:
                launch(a, wg, g)
                torch.cuda.synchronize()
                error = float((g.float() - a.float() @ wg.float().t()).norm() / (a.float() @ wg.float().t()).norm())
                us = _timed_us(launch, a, wg, g)
            flops = 2 * m * n * k
            rows.append({"model": model, "m": m, "n": n, "k": k, "epilogue": entry["epilogue"], "tiles": entry["tiles"], "us": round(us, 2),
                         "tflops": round(flops / us / 1e6, 1), "rel_l2": error, "torch_silu_times_up_us": round(product_us, 2)})  # fmt: skip
            what = "SwiGLU" if entry["epilogue"] else "plain"
            print(f"{model:14} {m:>5}x{n:<6}x{k:<5} {what:9} {entry['tiles']:>14} {us:8.1f} us {flops / us / 1e6:5.0f} TFLOP/s  rel. L2 {error:.1e}", flush=True)
        print(f"{model:14} {m:>5}x{n:<6}x{k:<5} torch silu(g) * u: {product_us:.1f} us", flush=True)
        output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
