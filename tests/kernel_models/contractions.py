"""Every kind of contraction kiln's GPU kernels take, in one small model (tests/test_kernels.py).

A 3-channel stem convolution (stride 2: the kernels read it in NCHW and write NHWC), batch norm and
ReLU (the kernel's epilogue), a 3x3 max pooling, a 3x3 convolution (NHWC kernel) and ReLU, a 1x1 convolution with a bias (added
outside the kernel), a depthwise 3x3 convolution with a bias and ReLU6, a strided 1x1 convolution, a bmm of tokens
by one weight broadcast over the batch (one matmul to kiln), a Linear layer (W[N, K]) and a product
of two activations (B as [K, N]). Weights are small, so the stage dumps keep them. Takes `dtype` and
`batch` like the benchmark suite's model files.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 2, "large": 8}


class Contractions(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(3, 16, 3, stride=2, padding=1, bias=False)
        self.norm = nn.BatchNorm2d(16)
        self.conv = nn.Conv2d(16, 32, 3, padding=1, bias=False)
        self.pointwise = nn.Conv2d(32, 32, 1)
        self.depthwise = nn.Conv2d(32, 32, 3, padding=1, groups=32)
        self.down = nn.Conv2d(32, 16, 1, stride=2, bias=False)
        self.projection = nn.Parameter(torch.randn(24, 16) / 4)
        self.fc = nn.Linear(256, 10)

    def forward(self, x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        h = nn.functional.max_pool2d(torch.relu(self.norm(self.stem(x))), 3, stride=1, padding=1)
        h = torch.relu(self.conv(h))
        h = h + self.pointwise(h)
        h = h + nn.functional.relu6(self.depthwise(h))
        d = self.down(h)  # [N, 16, 4, 4]
        tokens = d.flatten(2).transpose(1, 2)  # [N, 16 tokens, 16 channels]
        weight = self.projection.t().expand(tokens.shape[0], 16, 24)
        projected = torch.bmm(tokens, weight)
        flat = d.flatten(1)
        return self.fc(flat), projected, flat.t() @ flat


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = Contractions()
    model.norm.running_mean.uniform_(-0.1, 0.1)
    model.norm.running_var.uniform_(0.5, 1.5)
    return model.eval().to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], 3, 16, 16, generator=generator).to(DTYPES[dtype]),)
