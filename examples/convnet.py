"""A small conv net with batch norm (folded into eval-mode affine ops at export)."""

import torch
from torch import nn


class ConvNet(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.features = nn.Sequential(
            nn.Conv2d(3, 16, 3, padding=1),
            nn.BatchNorm2d(16),
            nn.ReLU(),
            nn.MaxPool2d(2),
            nn.Conv2d(16, 32, 3, padding=1, stride=2),
            nn.BatchNorm2d(32),
            nn.ReLU(),
            nn.AdaptiveAvgPool2d(1),
        )
        self.head = nn.Linear(32, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(torch.flatten(self.features(x), 1))


def get_model() -> nn.Module:
    torch.manual_seed(0)
    model = ConvNet()
    for module in model.modules():  # non-trivial running statistics, so batch norm really computes
        if isinstance(module, nn.BatchNorm2d):
            module.running_mean.uniform_(-0.5, 0.5)
            module.running_var.uniform_(0.5, 1.5)
    return model


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(2, 3, 32, 32),)
