"""A 3-layer MLP: the smallest model worth compiling."""

import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(
    nn.Linear(64, 128),
    nn.ReLU(),
    nn.Linear(128, 128),
    nn.GELU(),
    nn.Linear(128, 10),
)
example_inputs = (torch.randn(8, 64),)
