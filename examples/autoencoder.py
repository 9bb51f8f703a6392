"""Two entry points in one artifact: `encode` and `decode` share the autoencoder's weights.

`entry_points` maps each function name to (a method of the model, its example inputs). The
artifact then has both functions: `m = kiln.load("autoencoder.vmfb"); z = m.encode(x); m.decode(z)`.
"""

import torch
from torch import nn


class AutoEncoder(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.encoder = nn.Sequential(nn.Linear(64, 32), nn.ReLU(), nn.Linear(32, 8))
        self.decoder = nn.Sequential(nn.Linear(8, 32), nn.ReLU(), nn.Linear(32, 64))

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(x)

    def decode(self, z: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.decoder(z))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.decode(self.encode(x))


torch.manual_seed(0)
model = AutoEncoder().eval()
entry_points = {
    "encode": (model.encode, (torch.randn(4, 64),)),
    "decode": (model.decode, (torch.randn(4, 8),)),
}
