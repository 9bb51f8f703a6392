"""The zoo's kernel table: each contraction kiln compiled for a zoo model, in the model, against torch.

KERNELS.md measures kiln's kernels one shape at a time on the suite's shapes. This takes the zoo's
(benchmarks/zoo.py's bundle for cuda): every matmul and convolution kiln's kernels compute in GPT-2,
BERT, ResNet-50, ViT, Mixtral and Whisper, timed where they run, inside the model's call (CUPTI
kernel times under torch.profiler, kiln.runtime calling the artifact), against torch's `F.linear` /
`F.conv2d` on the same shape and dtype at PyTorch's default settings (f32 matmuls at "highest":
cuBLAS on the FP32 cores; f32 convolutions cuDNN with TF32), and the H100's peak for what kiln's
kernel runs:

    python3 benchmarks/zoo_kernels.py run .device-carry/zoo-cuda -o $OUT/zoo-kernels-h100.json  # on the GPU machine
    python benchmarks/zoo_kernels.py table benchmarks/results/zoo-kernels-h100.json            # here: ZOO_KERNELS.md

kiln's kernel includes what its epilogue computes (a Linear's bias; a convolution's batch norm and
ReLU), torch's call only the bias (`F.linear`) or nothing (`F.conv2d`). Contractions the artifact
leaves to IREE's code (`code` iree in the manifest) are listed without a kiln time.
"""

from __future__ import annotations

import json
import re
import statistics
from pathlib import Path

import click
from kernels_table import PEAKS, geomean_lines  # benchmarks/ holds scripts, not a package

BENCHMARKS = Path(__file__).resolve().parent
ROOT = BENCHMARKS.parent
TABLE = BENCHMARKS / "ZOO_KERNELS.md"

# The manifests' contraction labels (compiler/kernels/contraction.py's `label`)
MM = re.compile(r"mm(?P<m>\d+)x(?P<n>\d+)x(?P<k>\d+)-(?P<dtype>f32|bf16|f16)(?:-(?P<precision>tf32x3|tf32|ieee))?-(?P<layout>nk|kn)(?P<bias>-bias)?")
CONV = re.compile(
    r"conv(?P<n>\d+)x(?P<c>\d+)x(?P<h>\d+)x(?P<w>\d+)-k(?P<k>\d+)r(?P<r>\d+)x(?P<s>\d+)s(?P<stride>\d+)p(?P<pad>\d+)"
    r"(?:d(?P<dilation>\d+))?(?:g(?P<groups>\d+))?-(?P<dtype>f32|bf16|f16)(?:-(?P<precision>tf32x3|tf32|ieee))?"
)
DTYPES = {"f32": "float32", "bf16": "bfloat16", "f16": "float16"}


def shape_of(label: str) -> dict | None:
    """The GEMM a contraction label describes: kind, sizes, FLOPs, dtype and the precision kiln runs."""
    if found := MM.fullmatch(label):
        m, n, k = (int(found[name]) for name in "mnk")
        return {"kind": "mm", "m": m, "n": n, "k": k, "bias": bool(found["bias"]), "dtype": found["dtype"],
                "precision": found["precision"] or found["dtype"], "flops": 2 * m * n * k}  # fmt: skip
    if found := CONV.match(label):
        sizes = {name: int(found[name]) for name in ("n", "c", "h", "w", "k", "r", "s", "stride", "pad")}
        groups, dilation = int(found["groups"] or 1), int(found["dilation"] or 1)
        p = (sizes["h"] + 2 * sizes["pad"] - dilation * (sizes["r"] - 1) - 1) // sizes["stride"] + 1
        q = (sizes["w"] + 2 * sizes["pad"] - dilation * (sizes["s"] - 1) - 1) // sizes["stride"] + 1
        flops = 2 * sizes["n"] * p * q * sizes["k"] * sizes["c"] // groups * sizes["r"] * sizes["s"]
        return {"kind": "conv", **sizes, "groups": groups, "dilation": dilation, "dtype": found["dtype"],
                "precision": found["precision"] or found["dtype"], "flops": flops}  # fmt: skip
    return None


def _cupti_us(call, repeats: int = 20) -> float:
    """The GPU's own time of one `call` (all its kernels), median over `repeats` calls."""
    import torch

    for _ in range(3):
        call()
    torch.cuda.synchronize()
    times = []
    for _ in range(repeats):
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as profiler:
            call()
            torch.cuda.synchronize()
        times.append(sum(e.time_range.elapsed_us() for e in profiler.events() if e.device_type == torch.autograd.DeviceType.CUDA))
    return statistics.median(times)


def torch_us(shape: dict) -> float:
    """torch's time for `shape` on this GPU, at PyTorch's default precision settings."""
    import torch
    import torch.nn.functional as F

    dtype = getattr(torch, DTYPES[shape["dtype"]])
    options = {"device": "cuda", "dtype": dtype}
    if shape["kind"] == "mm":
        x, w = torch.randn(shape["m"], shape["k"], **options), torch.randn(shape["n"], shape["k"], **options)
        b = torch.randn(shape["n"], **options) if shape["bias"] else None
        return _cupti_us(lambda: F.linear(x, w, b))
    x = torch.randn(shape["n"], shape["c"], shape["h"], shape["w"], **options)
    w = torch.randn(shape["k"], shape["c"] // shape["groups"], shape["r"], shape["s"], **options)
    return _cupti_us(lambda: F.conv2d(x, w, None, shape["stride"], shape["pad"], shape["dilation"], shape["groups"]))


def run_zoo(bundle_path: Path) -> dict:
    """Every zoo model's kernels, timed in its call, and torch on each of their shapes."""
    import torch
    from dispatch_profile import profile_on_cuda
    from zoo import open_model

    from kiln.measure.bundle import Bundle
    from kiln.measure.timing import environment

    bundle = Bundle.read(bundle_path)
    rows = []
    for entry in bundle.entries:
        _, inputs, module = open_model(bundle_path, entry, "cuda")
        profile = profile_on_cuda(module, inputs, seconds=1.0)
        per_call = {group["name"]: group["total_ns"] / group["count"] / 1e3 for group in profile["dispatches"]}
        for kernel in module.manifest.kernels:
            shape = shape_of(kernel["contraction"])
            if shape is None:
                continue  # attention and row programs: not GEMMs torch times one call of
            rows.append({
                "model": entry.name, "contraction": kernel["contraction"], "calls": kernel["calls"],
                "code": kernel["code"], "tiles": kernel.get("tiles"), "shape": shape,
                "kiln_us": per_call.get(kernel.get("kernel", "")), "torch_us": torch_us(shape),
            })  # fmt: skip
            click.echo(f"{entry.name} {kernel['contraction']}: kiln {rows[-1]['kiln_us']} us, torch {rows[-1]['torch_us']:.1f} us", err=True)
        del module
        torch.cuda.empty_cache()
    machine, versions = environment("cuda")
    return {"bundle": str(bundle_path), "machine": machine, "versions": versions, "kernels": rows}


def table(results: dict, source: str) -> str:
    lines = [
        "# kiln's GPU kernels in the zoo's models, against torch",
        "",
        f"Generated by `python benchmarks/zoo_kernels.py table {source}` from a device run of "
        f"`benchmarks/zoo.py`'s cuda bundle ({results['machine'].get('gpu', 'GPU')}, torch "
        f"{results['versions'].get('torch')}); benchmarks/zoo_kernels.py says "
        "how. One row per contraction shape kiln's kernels compute in a zoo model (GEMM M x N x K; "
        "convolutions N x C x H x W, K filters of R x S): **kiln** is its kernel's CUPTI time per call "
        "inside the model's call, epilogue included (bias; batch norm and ReLU); **torch** is `F.linear` "
        "(bias included) or `F.conv2d` (none) on the same shape and dtype at PyTorch's default settings: "
        "f32 matmuls at \"highest\" on the FP32 cores, f32 convolutions in TF32 (cuDNN). **% of peak** is "
        f"against the H100 SXM's dense peak for what kiln's kernel runs: tf32x3 {PEAKS['tf32x3']:.0f} "
        f"TFLOP/s (three TF32 products for each f32 one, f32-class accuracy), TF32 {PEAKS['tf32']:.0f}, "
        f"bf16 {PEAKS['bf16']:.0f}; torch's f32 matmuls have {PEAKS['f32']:.0f} on the FP32 cores. "
        "Where the manifest says `iree`, kiln left the contraction to IREE's code (its heuristic: too small "
        "for a kernel to pay).",
        "",
        "| model | contraction | calls | precision | kiln us | kiln TFLOP/s | % of peak | torch us | torch TFLOP/s | kiln/torch | code |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    ratios: dict[str, list[float]] = {}
    for row in results["kernels"]:
        shape, kiln, torch_time = row["shape"], row["kiln_us"], row["torch_us"]
        flops, precision = shape["flops"], shape["precision"]
        torch_text = f"{torch_time:.1f} | {flops / torch_time / 1e6:.1f}"
        if kiln is None or row["code"] != "kiln":
            lines.append(f"| {row['model']} | {row['contraction']} | {row['calls']} | {precision} | | | | {torch_text} | | {row['code']} |")
            continue
        tflops = flops / kiln / 1e6
        ratios.setdefault(precision, []).append(kiln / torch_time)
        lines.append(
            f"| {row['model']} | {row['contraction']} | {row['calls']} | {precision} | {kiln:.1f} | {tflops:.1f} | "
            f"{100 * tflops / PEAKS[precision]:.0f}% | {torch_text} | {kiln / torch_time:.2f} | kiln |"
        )
    return "\n".join(lines + geomean_lines(ratios)) + "\n"


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
def main() -> None:
    """The zoo's kernel table (see the module docstring)."""


@main.command("run")
@click.argument("bundle", type=click.Path(exists=True, file_okay=False, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True, help="Results file (JSON).")
def run_command(bundle: Path, output: Path) -> None:
    """Time every zoo model's kernels in BUNDLE and torch on their shapes (on the GPU machine)."""
    output.write_text(json.dumps(run_zoo(bundle), indent=1) + "\n")


@main.command("table")
@click.argument("results", type=click.Path(exists=True, dir_okay=False, path_type=Path))
def table_command(results: Path) -> None:
    """Write benchmarks/ZOO_KERNELS.md from RESULTS."""
    source = results.resolve().relative_to(ROOT) if results.resolve().is_relative_to(ROOT) else results
    TABLE.write_text(table(json.loads(results.read_text()), str(source)))
    click.echo(f"wrote {TABLE}")


if __name__ == "__main__":
    main()
