"""kiln's depthwise convolution kernel against torch's, per tile configuration, on a CUDA GPU.

The depthwise kernel (targets/cuda/kernels/triton_source.py, `kiln_depthwise_conv2d`) has no measured
tiles: targets/cuda/kernels/tiles.py chooses them by a heuristic. This times that heuristic's candidates
(and the same tiles over 8 warps) on MobileNet-style shapes, launched from Triton directly (the
device's Triton JIT-compiles the same source), next to torch's depthwise convolution in NCHW and in
channels-last, and checks each result against torch's. Needs torch with CUDA and Triton:

    python3 benchmarks/depthwise_tiles.py -o depthwise-h100.json      # on the GPU machine
    python benchmarks/depthwise_tiles.py --summary results/depthwise-h100.json   # here: DEPTHWISE.md

prints one table row per shape and configuration: ms, GB/s (input read once, output written once),
and the relative L2 error against torch in f32. `--summary` writes benchmarks/DEPTHWISE.md from a
saved run: per shape, torch's times, kiln's default tiles (as tiles.py chooses them now) and the
fastest tiles timed.
"""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path

import click
import torch
import torch.nn.functional as F

from kiln.targets.cuda.kernels.build import stencil_constants, stencil_programs
from kiln.targets.cuda.kernels.contraction import Conv2d
from kiln.targets.cuda.kernels.tiles import Tiles, depthwise_candidates

# (batch, channels, size, stride): the suite's mobilenet_block, then MobileNetV2's depthwise layers at batch 32
SHAPES = [(64, 192, 56, 56, 1), (1, 192, 56, 56, 1), (32, 96, 112, 112, 2), (32, 144, 56, 56, 1), (32, 384, 14, 14, 1), (32, 960, 7, 7, 1)]
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
SUMMARY = Path(__file__).with_name("DEPTHWISE.md")


def shapes() -> list[Conv2d]:
    """The timed convolutions, as kiln describes them."""
    return [
        Conv2d(n, c, h, w, c, 3, 3, (stride, stride), (1, 1), (1, 1), dtype, dtype, "ieee" if dtype == "f32" else "", layout="nhwc", groups=c)
        for n, c, h, w, stride in SHAPES
        for dtype in DTYPES
    ]


def summarize(run: dict, source: Path) -> str:
    """DEPTHWISE.md: per shape, torch's two layouts, kiln's default tiles and the fastest tiles timed."""
    lines = [
        f"# kiln's depthwise kernel against torch ({run['gpu']})",
        "",
        f"From `{source.name}` (`python3 benchmarks/depthwise_tiles.py` on the GPU machine); ms per call,",
        "CUDA events, median of 50. kiln's default is the tiles targets/cuda/kernels/tiles.py chooses now.",
        "",
        "| shape | torch NCHW | torch channels-last | kiln default (tiles) | fastest kiln (tiles) | default / channels-last |",
        "|---|---|---|---|---|---|",
    ]
    for conv in shapes():
        timed = {row["config"].removesuffix(" (default)"): row["ms"] for row in run["rows"] if row["shape"] == conv.label and row["dtype"] == conv.dtype}
        default = depthwise_candidates(conv)[0].label
        best = min((config for config in timed if not config.startswith("torch")), key=timed.get)
        lines.append(
        f"| {conv.label} | {timed['torch nchw']:.4f} | {timed['torch channels_last']:.4f} | "
        f"{timed[default]:.4f} ({default}) | {timed[best]:.4f} ({best}) | {timed[default] / timed['torch channels_last']:.2f}x |"
        )
    return "\n".join(lines) + "\n"


def cuda_ms(fn, iterations: int = 50) -> float:
    """Median of `iterations` timed calls, CUDA events around each, after warming up."""
    for _ in range(5):
        fn()
    times = []
    for _ in range(iterations):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        end.record()
        end.synchronize()
        times.append(start.elapsed_time(end))
    return sorted(times)[len(times) // 2]


def launcher(conv: Conv2d, tiles: Tiles, x: torch.Tensor, w: torch.Tensor, y: torch.Tensor):
    from kiln.targets.cuda.kernels.triton_source import kiln_depthwise_conv2d

    programs = stencil_programs(conv, tiles)
    constants = stencil_constants(conv, tiles)
    return lambda: kiln_depthwise_conv2d[(programs,)](x, w, None, None, y, **constants, num_warps=tiles.num_warps, num_stages=1)


@click.command()
@click.option("-o", "--output", type=click.Path(path_type=Path), help="Write the rows as JSON too.")
@click.option("--summary", type=click.Path(exists=True, path_type=Path), help="Write DEPTHWISE.md from this saved run instead.")
def main(output: Path | None, summary: Path | None) -> None:
    if summary is not None:
        SUMMARY.write_text(summarize(json.loads(summary.read_text()), summary))
        click.echo(f"wrote {SUMMARY}")
        return
    rows = []
    for conv in shapes():
        n, c, h, w, stride, dtype_name, dtype = conv.n, conv.c, conv.h, conv.w, conv.stride[0], conv.dtype, DTYPES[conv.dtype]
        x = torch.randn(n, c, h, w, device="cuda", dtype=dtype)
        weight = torch.randn(c, 1, 3, 3, device="cuda", dtype=dtype)
        reference = F.conv2d(x.float(), weight.float(), stride=stride, padding=1, groups=c)
        moved = (x.numel() + reference.numel()) * x.element_size()
        x_last = x.contiguous(memory_format=torch.channels_last)
        for name, given in (("torch nchw", x), ("torch channels_last", x_last)):
            ms = cuda_ms(functools.partial(F.conv2d, given, weight, stride=stride, padding=1, groups=c))
            rows.append(dict(shape=conv.label, dtype=dtype_name, config=name, ms=ms, error=None, bytes=moved))
        x_nhwc = x.permute(0, 2, 3, 1).contiguous()
        w_crs = weight.reshape(c, 9).contiguous()
        y = torch.empty(n, conv.p, conv.q, c, device="cuda", dtype=dtype)
        candidates = depthwise_candidates(conv)
        for tiles in [*candidates, *(replace(t, num_warps=8) for t in candidates)]:
            run = launcher(conv, tiles, x_nhwc, w_crs, y)
            run()
            got = y.permute(0, 3, 1, 2).float()
            error = ((got - reference).norm() / reference.norm()).item()
            label = tiles.label + (" (default)" if tiles == candidates[0] else "")
            rows.append(dict(shape=conv.label, dtype=dtype_name, config=label, ms=cuda_ms(run), error=error, bytes=moved))
    print("| shape | config | ms | GB/s | rel L2 error |")
    print("|---|---|---|---|---|")
    for row in rows:
        error = "" if row["error"] is None else f"{row['error']:.1e}"
        print(f"| {row['shape']} | {row['config']} | {row['ms']:.4f} | {row['bytes'] / row['ms'] / 1e6:.0f} | {error} |")
    if output is not None:
        output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
