"""A depthwise-separable block, MobileNetV2 style: expand 1x1, depthwise 3x3, project 1x1, residual.

32 -> 192 -> 32 channels at 56x56, batch norm after each convolution, ReLU6 after the first two.
Depthwise convolutions have little arithmetic per byte: a test of layout and fusion, not of matmul.
Default for `kiln compile`: f32, small batch.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 1, "large": 64}
CHANNELS, EXPANDED, SIZE = 32, 192, 56


class InvertedResidual(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.block = nn.Sequential(
            nn.Conv2d(CHANNELS, EXPANDED, 1, bias=False),
            nn.BatchNorm2d(EXPANDED),
            nn.ReLU6(),
            nn.Conv2d(EXPANDED, EXPANDED, 3, padding=1, groups=EXPANDED, bias=False),
            nn.BatchNorm2d(EXPANDED),
            nn.ReLU6(),
            nn.Conv2d(EXPANDED, CHANNELS, 1, bias=False),
            nn.BatchNorm2d(CHANNELS),
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + self.block(x)


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = InvertedResidual()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):  # statistics and affine parameters of a trained-looking model
            module.running_mean.uniform_(-0.1, 0.1)
            module.running_var.uniform_(0.5, 1.5)
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.1, 0.1)
    return model.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], CHANNELS, SIZE, SIZE, generator=generator).to(DTYPES[dtype]),)
