"""kiln_conv2d run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is imported:
hence a script of its own, which test_cuda_kernels.py runs) against PyTorch's convolution: grouped
convolutions (each group an implicit GEMM of its own, side by side in one launch) in NHWC and NCHW, on
the channel-step path and the flat one, with a fused epilogue, and groups 1. Exits non-zero on a
mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.nn.functional as F

from kiln.targets.cuda.kernels import triton_source
from kiln.targets.cuda.kernels.build import conv_constants, conv_programs
from kiln.targets.cuda.kernels.contraction import Conv2d
from kiln.targets.cuda.kernels.tiles import Tiles

# (batch, channels, height, width, output channels, filter size, stride, padding, groups, layout, tiles)
CONVOLUTIONS = [
    (2, 32, 7, 6, 32, 3, 1, 1, 2, "nhwc", Tiles(16, 16, 16, 4, 1)),  # RegNet-like: 16 channels a group, channel steps
    (1, 24, 9, 9, 48, 3, 2, 1, 3, "nhwc", Tiles(16, 16, 16, 4, 1)),  # 8 in, 16 out a group: flat path, N tiles
    (2, 12, 8, 8, 18, 3, 1, 0, 6, "nchw", Tiles(16, 16, 16, 4, 1)),  # 2 in, 3 out a group, NCHW
    (1, 16, 5, 7, 20, 1, 1, 0, 1, "nhwc", Tiles(16, 16, 16, 4, 1)),  # groups 1, edge tiles in N
    (1, 64, 7, 7, 64, 3, 1, 1, 2, "nhwc", Tiles(16, 16, 32, 4, 1)),  # RegNet at batch 1: two N tiles a group
]


def to_layout(t: torch.Tensor, layout: str) -> torch.Tensor:
    return (t.permute(0, 2, 3, 1) if layout == "nhwc" else t).contiguous()


def run(conv: Conv2d, x: torch.Tensor, w: torch.Tensor, scale, shift, tiles: Tiles) -> torch.Tensor:
    shape = (conv.n, conv.p, conv.q, conv.k_out) if conv.layout == "nhwc" else (conv.n, conv.k_out, conv.p, conv.q)
    y = torch.empty(shape)
    kernel = triton_source.kiln_conv2d[(conv_programs(conv, tiles),)]
    kernel(to_layout(x, conv.layout), to_layout(w, conv.layout), scale, shift, y, **conv_constants(conv, tiles))
    return y.permute(0, 3, 1, 2) if conv.layout == "nhwc" else y


def main() -> None:
    torch.manual_seed(0)
    failures = []
    for n, c, h, w, k, f, stride, pad, groups, layout, tiles in CONVOLUTIONS:
        fused = groups == 2  # batch norm and ReLU in the epilogue, one scale and shift a channel
        conv = Conv2d(
            n, c, h, w, k, f, f, (stride, stride), (pad, pad), (1, 1), "f32", "f32", "ieee", layout=layout,
            groups=groups, epilogue=("mul", "add") if fused else (), clamp=(0.0, float("inf")) if fused else (),
        )  # fmt: skip
        x, weight = torch.randn(n, c, h, w), torch.randn(k, c // groups, f, f)
        scale, shift = (torch.rand(k) + 0.5, torch.randn(k)) if fused else (None, None)
        want = F.conv2d(x, weight, stride=stride, padding=pad, groups=groups)
        if fused:
            want = torch.relu(want * scale[:, None, None] + shift[:, None, None])
        error = (run(conv, x, weight, scale, shift, tiles) - want).abs().max().item()
        print(f"conv {c}->{k} groups {groups} {f}x{f} {layout}: max abs error {error:.1e}")
        failures += [conv] if error > 1e-3 else []
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
