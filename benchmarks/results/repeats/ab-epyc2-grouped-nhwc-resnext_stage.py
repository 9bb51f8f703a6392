"""Held out for split-grouped-convs: ResNeXt-50 32x4d's two last stages (32 groups of 16 and of 32
channels), 14x14 input of 512 channels, with batch norm and ReLU."""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 1, "large": 32}


def block(cin, width, cout, stride):
    return nn.Sequential(
        nn.Conv2d(cin, width, 1, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, width, 3, stride=stride, padding=1, groups=32, bias=False), nn.BatchNorm2d(width), nn.ReLU(),
        nn.Conv2d(width, cout, 1, bias=False), nn.BatchNorm2d(cout),
    )


class Stage(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([block(512, 512, 1024, 1), block(1024, 512, 1024, 1), block(1024, 1024, 2048, 2), block(2048, 1024, 2048, 1)])

    def forward(self, x):
        for b in self.blocks:
            y = b(x)
            x = torch.relu(y + x) if y.shape == x.shape else torch.relu(y)
        return x.mean(dim=(2, 3))


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = Stage()
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            m.running_mean.uniform_(-0.5, 0.5)
            m.running_var.uniform_(0.5, 1.5)
            with torch.no_grad():
                m.weight.uniform_(0.5, 1.5)
                m.bias.uniform_(-0.1, 0.1)
    return model.eval().to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32"):
    g = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], 512, 28, 28, generator=g).to(DTYPES[dtype]),)
