"""kiln's depthwise convolution kernel as kiln ships it (PTX compiled here by Triton 3.9), per tile
configuration, timed on the GPU machine.

ConvNeXt-T's 7x7 depthwise convolutions took about 0.85 ms of its 3.7 ms call on the H200 at batch
32 in bf16, at about 0.4 TB/s (results/profile-real-convnext_tiny-bf16-h200.json). This compiles
`kiln_depthwise_conv2d` for ConvNeXt's four 7x7 shapes and, held out, MobileNetV2's 3x3 and
EfficientNet-B0's 5x5 ones, in the tiles tiles.depthwise_candidates gives and a wider pool, and times
that PTX on the device, launched with CuPy as IREE launches it, each result checked against torch:

    python benchmarks/depthwise_ptx.py compile -o .device-carry/depthwise-ptx.json    # here
    python3 benchmarks/depthwise_ptx.py time .device-carry/depthwise-ptx.json -o $OUT/depthwise-ptx-h200.json   # there
"""

from __future__ import annotations

import json
from pathlib import Path

import click

# model -> (batch, channels, size, kernel, stride), bf16 NHWC, batch 32
SHAPES = {
    "convnext_tiny": [(32, 96, 56, 7, 1), (32, 192, 28, 7, 1), (32, 384, 14, 7, 1), (32, 768, 7, 7, 1)],
    "mobilenet_v2": [(32, 96, 112, 3, 2), (32, 144, 56, 3, 1), (32, 384, 14, 3, 1)],
    "efficientnet_b0": [(32, 144, 56, 5, 2), (32, 240, 28, 5, 1), (32, 672, 14, 5, 1)],
}
# Held out from the large-filter rule (tiles.depthwise_candidates), which the first run's ConvNeXt-T
# shapes fitted: ConvNeXt-B's widths at batch 32, and ConvNeXt-T at batch 1
HELDOUT = {
    "convnext_base": [(32, 128, 56, 7, 1), (32, 256, 28, 7, 1), (32, 512, 14, 7, 1), (32, 1024, 7, 7, 1)],
    "convnext_tiny-latency": [(1, 96, 56, 7, 1), (1, 192, 28, 7, 1), (1, 384, 14, 7, 1), (1, 768, 7, 7, 1)],
}
# (block_m pixels, block_n channels, warps)
POOL = [(64, 32, 4), (128, 32, 4), (16, 64, 4), (32, 64, 4), (64, 64, 4), (128, 64, 8), (16, 128, 4), (32, 128, 4), (64, 128, 8), (256, 32, 8), (32, 32, 4)]


def _conv(n: int, c: int, size: int, kernel: int, stride: int):
    from kiln.targets.cuda.kernels.contraction import Conv2d

    pad = kernel // 2
    return Conv2d(n, c, size, size, c, kernel, kernel, (stride, stride), (pad, pad), (1, 1), "bf16", "bf16", layout="nhwc", groups=c)


@click.group()
def main() -> None:
    """Compile here, time there."""


@main.command("compile")
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
@click.option("--heldout", is_flag=True, help="The held-out shapes (HELDOUT) instead of SHAPES.")
def compile_(output: Path, heldout: bool) -> None:
    from kiln.targets.cuda.kernels.build import Unsupported, compile_kernel
    from kiln.targets.cuda.kernels.tiles import Tiles, depthwise_candidates

    entries = []
    for model, shapes in (HELDOUT if heldout else SHAPES).items():
        for shape in shapes:
            conv = _conv(*shape)
            default = depthwise_candidates(conv)[0]
            pool = [default, *(Tiles(m, n, 1, warps, 1) for m, n, warps in POOL)]
            for tiles in dict.fromkeys(pool):
                try:
                    kernel = compile_kernel(conv, tiles)
                except Unsupported as error:
                    print(f"{model} {shape} {tiles.label}: {error}", flush=True)
                    continue
                entries.append({
                    "model": model, "shape": list(shape), "tiles": tiles.label, "default": tiles == default, "entry": kernel.entry,
                    "ptx": kernel.ptx, "grid": list(kernel.grid), "warps": kernel.num_warps, "shared": kernel.shared_bytes,
                })  # fmt: skip
            print(f"{model} {shape}: default {default.label}", flush=True)
    output.write_text(json.dumps(entries) + "\n")


@main.command("time")
@click.argument("compiled", type=click.Path(exists=True, path_type=Path))
@click.option("-o", "--output", type=click.Path(path_type=Path), required=True)
def time_(compiled: Path, output: Path) -> None:
    import tempfile

    import cupy as cp
    import torch
    import torch.nn.functional as F
    from gemv_tiles import timed_us

    def timed(fn) -> float:  # no L2 flush between calls, as its recorded runs were timed
        return timed_us(fn, iterations=50, warmups=5, flush_l2=False)

    folder = Path(tempfile.mkdtemp())
    entries = json.loads(compiled.read_text())
    rows = []
    for shape in list(dict.fromkeys(tuple(e["shape"]) for e in entries)):
        n, c, size, kernel, stride = shape
        generator = torch.Generator(device="cuda").manual_seed(0)
        x = torch.randn(n, c, size, size, device="cuda", generator=generator).to(torch.bfloat16)
        w = (torch.randn(c, 1, kernel, kernel, device="cuda", generator=generator) / kernel).to(torch.bfloat16)
        want = F.conv2d(x.float(), w.float(), stride=stride, padding=kernel // 2, groups=c)
        x_nhwc = x.permute(0, 2, 3, 1).contiguous()
        y = torch.empty(want.shape[0], want.shape[2], want.shape[3], c, device="cuda", dtype=torch.bfloat16)
        moved = 2 * (x.numel() + y.numel())
        channels_last = x.contiguous(memory_format=torch.channels_last)
        torch_us = timed(lambda x=channels_last, w=w, s=stride, p=kernel // 2, g=c: F.conv2d(x, w, stride=s, padding=p, groups=g))
        for entry in (e for e in entries if tuple(e["shape"]) == shape):
            path = folder / f"{entry['entry']}.ptx"
            path.write_text(entry["ptx"])
            fn = cp.RawModule(path=str(path)).get_function(entry["entry"])
            pointers = tuple(cp.uint64(t.data_ptr()) for t in (x_nhwc, w, y))

            def launch(fn=fn, entry=entry, pointers=pointers) -> None:
                fn(tuple(entry["grid"]), (32 * entry["warps"], 1, 1), pointers, shared_mem=entry["shared"])

            y.fill_(float("nan"))
            launch()
            torch.cuda.synchronize()
            got = y.permute(0, 3, 1, 2).float()
            error = float((got - want).norm() / want.norm())
            us = timed(launch)
            rows.append({"model": entry["model"], "shape": list(shape), "tiles": entry["tiles"], "default": entry["default"], "us": round(us, 2),
                         "tb_s": round(moved / us / 1e6, 2), "rel_l2": error, "torch_channels_last_us": round(torch_us, 2)})  # fmt: skip
            mark = " (default)" if entry["default"] else ""
            print(f"{entry['model']:16} {shape!s:22} {entry['tiles']:>12}{mark:10} {us:8.1f} us {moved / us / 1e6:5.2f} TB/s  rel. L2 {error:.1e}", flush=True)
        print(f"{'':16} {shape!s:22} torch channels-last {torch_us:.1f} us", flush=True)
        output.write_text(json.dumps({"gpu": torch.cuda.get_device_name(), "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
