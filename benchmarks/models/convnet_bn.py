"""A plain conv net with batch norm: four conv-batchnorm-ReLU stages, stride-2 downsampling, a linear head.

Batch norm runs in eval mode with non-trivial running statistics, so it really computes (or is
folded into the convolutions). Input 3x128x128. Default for `kiln compile`: f32, small batch.
"""

import itertools

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 1, "large": 64}
CHANNELS = (3, 32, 64, 128, 256)


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        stages = []
        for cin, cout in itertools.pairwise(CHANNELS):
            stages += [nn.Conv2d(cin, cout, 3, stride=2, padding=1, bias=False), nn.BatchNorm2d(cout), nn.ReLU()]
        self.features = nn.Sequential(*stages)
        self.head = nn.Linear(CHANNELS[-1], 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(self.features(x).mean(dim=(2, 3)))


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = ConvNet()
    for module in model.modules():
        if isinstance(module, nn.BatchNorm2d):  # statistics and affine parameters of a trained-looking model
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
            with torch.no_grad():
                module.weight.uniform_(0.5, 1.5)
                module.bias.uniform_(-0.1, 0.1)
    return model.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], 3, 128, 128, generator=generator).to(DTYPES[dtype]),)
