"""Row programs as kiln's GPU row kernel takes them, in one small model (tests/test_kernels.py).

A residual add, a GELU and a layer norm (one program: the bias add and the GELU read once), an RMS
norm of relu(x) * sigmoid(x) (a reciprocal) over a width no power of two (96), a layer norm without affine weights after a tanh-GELU, and
x / ||x|| along the rows (vector_norm's sum and square root), and a softmax (the maximum along the
rows), and an elementwise chain with an exp and a tanh over 2^21 elements (a program with no
reduction, one row at a time). The residual stream `h` is read again
after its norm, so it is an input of that program rather than computed inside it. Rows no block
divides (2 x 37). Takes `dtype` and `batch` like the suite's model files.
"""

import torch
from torch import nn
from torch.nn import functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 2, "large": 8}
WIDTH, NARROW = 64, 96
LONG = (2048, 1024)  # outline-row-programs' LONG_CHAIN_ELEMENTS


class Rows(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(WIDTH) * 0.1)
        self.norm = nn.LayerNorm(WIDTH)
        self.scale = nn.Parameter(torch.rand(NARROW) + 0.5)
        with torch.no_grad():  # not ones and zeros
            self.norm.weight.uniform_(0.5, 1.5)
            self.norm.bias.uniform_(-0.1, 0.1)

    def forward(
        self, x: torch.Tensor, residual: torch.Tensor, wide: torch.Tensor, long: torch.Tensor
    ) -> tuple[torch.Tensor, ...]:
        h = residual + x
        normed = self.norm(F.gelu(h + self.bias))
        gated = torch.relu(wide) * torch.sigmoid(wide)
        rms = gated * torch.rsqrt(gated.pow(2).mean(-1, keepdim=True) + 1e-6) * self.scale
        plain = F.layer_norm(F.gelu(x, approximate="tanh"), (WIDTH,))
        unit = h / h.norm(dim=-1, keepdim=True)
        soft = torch.softmax(x * 2.0, dim=-1)
        chain = torch.exp(-long * long) * 0.5 + torch.tanh(long)
        return normed, rms, plain, unit, soft, chain, h * 2


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    return Rows().to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    size = BATCHES[batch]
    x, residual = (torch.randn(size, 37, WIDTH, generator=generator) for _ in range(2))
    wide = torch.randn(size, 37, NARROW, generator=generator)
    long = torch.randn(*LONG, generator=generator)
    return tuple(t.to(DTYPES[dtype]) for t in (x, residual, wide, long))
