"""An MLP whose batch size is chosen at run time: `dynamic_shapes` marks axis 0 of `x` dynamic.

The same artifact then takes any batch from 1 to 4096; the manifest records the bounds.
"""

import torch
from torch import nn
from torch.export import Dim

torch.manual_seed(0)


class MLP(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.layers = nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.layers(x)


model = MLP()
example_inputs = (torch.randn(16, 32),)
dynamic_shapes = {"x": {0: Dim("batch", min=1, max=4096)}}
