"""kiln's CPU GEMM kernel alone, per tiling, against torch's GEMM, on the real models' prefill matmuls.

In the real models on the 16-core Xeon the kernel ran at 2.2-2.4 TFLOP/s in bf16 (Llama-3.2-1B at
8 x 512, Mistral-shaped at 1 x 512: 81-91% of the call) and 0.73 in f32 (Phi-2 at 1 x 512), where
torch's `F.linear` reached 2.8-3.7 and 0.9-1.0 on the same shapes, and where the kernel timed alone on a
16-core host had run at 4.6-6.3 bf16 (benchmarks/NOTES.md). This says which: the kernel alone with its
weights hot in the caches, and cold (cycled through copies past the L3, as a model's layers find them),
with kiln's tiling (geometry.matmul_call) and its neighbours, next to torch on the same shapes, cold
and hot. The shapes are grouped by model, so that a tiling rule fitted on some is checked on the others.

    python3 benchmarks/cpu_gemm_rate.py --threads 16 -o $OUT/cpu-gemm-xeon.json    # on the machine measured

Needs a C compiler (kiln builds its kernel objects with it) and, for bf16 on AMX, Linux's AMX permission
(the driver asks for it).
"""

from __future__ import annotations

import json
import subprocess
import tempfile
import time
from dataclasses import replace
from pathlib import Path

import click

# model -> the (K, N) of its prefill's nn.Linear weights (q, k/v, o, MLP in and out; fused ones as the model has them)
MODELS: dict[str, list[tuple[int, int]]] = {
    "llama_3_2_1b": [(2048, 2048), (2048, 512), (2048, 8192), (8192, 2048)],
    "mistral_7b": [(4096, 4096), (4096, 1024), (4096, 14336), (14336, 4096)],
    "phi_2": [(2560, 2560), (2560, 10240), (10240, 2560)],
    "qwen2_5_0_5b": [(896, 896), (896, 128), (896, 4864), (4864, 896)],
    "bert_base": [(768, 768), (768, 3072), (3072, 768)],
}
ROWS = (512, 4096)  # batch 1 and 8 of 512 tokens
COLD_BYTES = 1 << 30  # weight copies cycled through: past any L3 here
HERE = Path(__file__).resolve().parent


def _driver(folder: Path, sources: Path | None = None) -> Path:
    """The C driver linked with kiln's kernel objects, built here: kiln's own, or built from the
    kiln_gemm*.c and kiln_gemm.h in `sources` (a variant of the kernel) with kiln's flags."""
    from kiln.targets.llvm_cpu.kernels.build import FLAGS, OBJECT_NAMES, c_compiler, kernel_objects

    compiler = c_compiler()
    if sources is None:
        objects = [kernel_objects() / name for name in OBJECT_NAMES if name.startswith("kiln_gemm")]
    else:
        objects = []
        for source in sorted(sources.glob("kiln_gemm*.c")):
            objects.append(folder / f"{source.stem}.o")
            subprocess.run([compiler, *FLAGS, "-c", str(source), "-o", str(objects[-1])], check=True)
    binary = folder / ("cpu_gemm_rate" if sources is None else "cpu_gemm_rate_variant")
    command = [
        compiler,
        "-O2",
        "-march=native",
        str(HERE / "cpu_gemm_rate.c"),
        *map(str, objects),
        "-lpthread",
        "-o",
        str(binary),
    ]
    subprocess.run(command, check=True)
    return binary


def _kiln_ms(binary: Path, dtype: str, calls: list, threads: int, copies: int, seconds: float) -> list[float]:
    """Milliseconds a call of each tiling of one GEMM (`calls`: geometry.Call of the same M, K, N and rows)."""
    first = calls[0]
    shape = [dtype, first.nb * first.oh * first.ow, first.cin, first.cout, first.xs, threads, copies, seconds]
    tilings = [f"{call.ow}:{call.nbw}:{call.kc}" for call in calls]
    out = subprocess.run(
        [str(binary), *map(str, shape), *tilings], check=True, capture_output=True, text=True
    ).stdout
    return [float(line) for line in out.split()]


def _torch_ms(m: int, k: int, n: int, dtype: str, copies: int, seconds: float) -> float:
    import torch

    t = torch.bfloat16 if dtype == "bf16" else torch.float32
    a = torch.randn(m, k, dtype=t)
    weights = [torch.full((n, k), 0.0115, dtype=t) for _ in range(copies)]  # every page written
    samples, call, begin = [], 0, time.perf_counter()
    while call < 8 or time.perf_counter() - begin < seconds:
        start = time.perf_counter()
        torch.nn.functional.linear(a, weights[call % copies])
        if call >= 3:
            samples.append(time.perf_counter() - start)
        call += 1
    return sorted(samples)[len(samples) // 2] * 1e3


def _tilings(default):
    """kiln's tiling and its neighbours: K chunks, channels a workgroup, rows of a strip."""
    from kiln.targets.llvm_cpu.kernels.geometry import WHOLE_K

    yield "kiln", default
    for kc in (8, 16, 64, WHOLE_K):
        if kc != default.kc:
            yield f"kc {kc if kc < WHOLE_K else 'whole'}", replace(default, kc=kc)
    for nbw in (32, 64, 128, 256):
        if nbw != default.nbw:
            yield f"nbw {nbw}", replace(default, nbw=nbw)
    # With K whole: on one core of the development machine, 256 channels and K whole ran 4096x2048x2048
    # at 1.05 TFLOP/s against kiln's tiling's 0.75.
    for nbw in (128, 256):
        yield f"nbw {nbw}, kc whole", replace(default, nbw=nbw, kc=WHOLE_K)
    m = default.nb * default.oh * default.ow
    for rows in (64, 128, 512):
        if rows != default.ow and m % rows == 0:
            yield f"strip {rows}", replace(default, oh=m // rows, hp=m // rows, ow=rows, wp=rows)


def _line(row: dict) -> str:
    """One GEMM's rates: kiln's tiling and the best of its neighbours, torch's, cold and hot."""
    flops = 2 * row["m"] * row["k"] * row["n"]
    cold = row["kiln_cold_ms"]
    best = min(cold, key=cold.get)
    rate = {
        name: f"{flops / ms / 1e9:5.2f}"
        for name, ms in {
            **cold,
            "torch cold": row["torch_cold_ms"],
            "kiln hot": row["kiln_hot_ms"],
            "torch hot": row["torch_hot_ms"],
            "variant": row.get("variant_cold_ms", float("inf")),
        }.items()
    }
    shape = f"{row['m']:5}x{row['k']:5}x{row['n']:5}"
    return (
        f"{row['dtype']:4} {row['model']:13} {shape}  TFLOP/s cold: kiln {rate['kiln']} (best {best}: {rate[best]})"
        f" torch {rate['torch cold']} | hot: kiln {rate['kiln hot']} torch {rate['torch hot']}"
        + (f" | variant cold {rate['variant']}" if "variant_cold_ms" in row else "")
    )


@click.command()
@click.option("--threads", type=int, default=16, show_default=True)
@click.option(
    "--dtype",
    "dtypes",
    multiple=True,
    type=click.Choice(["bf16", "f32"]),
    default=("bf16", "f32"),
    show_default=True,
)
@click.option(
    "--model", "models", multiple=True, type=click.Choice(sorted(MODELS)), help="Only these models' shapes."
)
@click.option(
    "--seconds", type=float, default=0.3, show_default=True, help="Timing budget of one measurement."
)
@click.option(
    "--sweep/--no-sweep", default=True, show_default=True, help="Time the neighbouring tilings too."
)
@click.option(
    "--variant",
    type=click.Path(file_okay=False, exists=True, path_type=Path),
    help="A folder with a variant of the kernel's kiln_gemm*.c and kiln_gemm.h: timed cold with kiln's tiling beside kiln's.",
)
@click.option("-o", "--output", type=click.Path(dir_okay=False, path_type=Path))
def main(
    threads: int,
    dtypes: tuple[str, ...],
    models: tuple[str, ...],
    seconds: float,
    sweep: bool,
    variant: Path | None,
    output: Path | None,
) -> None:
    import torch

    from kiln.targets.llvm_cpu.kernels import mlir
    from kiln.targets.llvm_cpu.kernels.geometry import matmul_call

    torch.set_num_threads(threads)
    rows = []
    with tempfile.TemporaryDirectory() as folder:
        binary = _driver(Path(folder))
        variant_binary = _driver(Path(folder), variant) if variant else None
        for dtype in dtypes:
            size = 2 if dtype == "bf16" else 4
            for model in models or sorted(MODELS):
                for k, n in MODELS[model]:
                    copies = max(1, COLD_BYTES // (k * n * size))
                    for m in ROWS:
                        default = matmul_call(m, k, n, pixel_stride=k + mlir.row_padding(k, dtype))
                        row = {"model": model, "dtype": dtype, "m": m, "k": k, "n": n, "copies": copies}
                        row["torch_cold_ms"] = _torch_ms(m, k, n, dtype, copies, seconds)
                        row["torch_hot_ms"] = _torch_ms(m, k, n, dtype, 1, seconds)
                        (row["kiln_hot_ms"],) = _kiln_ms(binary, dtype, [default], threads, 1, seconds)
                        tilings = dict(_tilings(default) if sweep else [("kiln", default)])
                        cold = _kiln_ms(binary, dtype, list(tilings.values()), threads, copies, seconds)
                        row["kiln_cold_ms"] = dict(zip(tilings, cold, strict=True))
                        if variant_binary:
                            (row["variant_cold_ms"],) = _kiln_ms(
                                variant_binary, dtype, [default], threads, copies, seconds
                            )
                        rows.append(row)
                        click.echo(_line(row))
    if output:
        output.write_text(json.dumps({"threads": threads, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
