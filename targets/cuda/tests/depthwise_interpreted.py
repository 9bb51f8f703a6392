"""kiln_depthwise_conv2d run by Triton's interpreter on the CPU (TRITON_INTERPRET=1, set before Triton is
imported: hence a script of its own, which test_cuda_kernels.py runs) against PyTorch's convolution and
max pooling: the unrolled filters and the ones that loop over their rows at run time (larger than
triton_source.UNROLLED_TAPS), with stride, padding and dilation. Exits non-zero on a mismatch."""

import os

os.environ["TRITON_INTERPRET"] = "1"

import torch
import torch.nn.functional as F

from kiln.targets.cuda.kernels import triton_source
from kiln.targets.cuda.kernels.build import stencil_constants, stencil_programs
from kiln.targets.cuda.kernels.contraction import Conv2d, MaxPool2d
from kiln.targets.cuda.kernels.tiles import Tiles

TILES = Tiles(16, 8, 1, 4, 1)
# (batch, channels, height, width, filter size, stride, padding, dilation)
CONVOLUTIONS = [(2, 8, 11, 9, 7, 1, 3, 1), (1, 12, 10, 10, 3, 2, 1, 1), (1, 4, 13, 13, 7, 1, 6, 2), (1, 5, 9, 9, 5, 1, 2, 1)]


def run(op: Conv2d | MaxPool2d, x: torch.Tensor, w: torch.Tensor | None, shape: torch.Size) -> torch.Tensor:
    y = torch.empty(shape[0], shape[2], shape[3], shape[1])
    weights = None if w is None else w.reshape(op.c, op.r, op.s).contiguous()
    kernel = triton_source.kiln_depthwise_conv2d[(stencil_programs(op, TILES),)]
    kernel(x.permute(0, 2, 3, 1).contiguous(), weights, None, None, y, **stencil_constants(op, TILES))
    return y.permute(0, 3, 1, 2)


def main() -> None:
    torch.manual_seed(0)
    failures = []
    for n, c, h, w, k, stride, pad, dil in CONVOLUTIONS:
        conv = Conv2d(n, c, h, w, c, k, k, (stride, stride), (pad, pad), (dil, dil), "f32", "f32", "ieee", layout="nhwc", groups=c)
        x, weight = torch.randn(n, c, h, w), torch.randn(c, 1, k, k)
        want = F.conv2d(x, weight, stride=stride, padding=pad, dilation=dil, groups=c)
        error = (run(conv, x, weight, want.shape) - want).abs().max().item()
        print(f"depthwise {k}x{k} stride {stride} dilation {dil}: max abs error {error:.1e}")
        failures += [conv] if error > 1e-4 else []
    pool = MaxPool2d(1, 6, 12, 12, 7, 7, (2, 2), (3, 3), (1, 1), "f32", layout="nhwc")
    x = torch.randn(1, 6, 12, 12)
    want = F.max_pool2d(x, 7, 2, 3)
    equal = torch.equal(run(pool, x, None, want.shape), want)
    print(f"max pool 7x7: {'equal' if equal else 'differs'}")
    failures += [] if equal else [pool]
    raise SystemExit(1 if failures else 0)


if __name__ == "__main__":
    main()
