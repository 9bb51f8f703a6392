"""An elementwise chain over a 16M-float tensor (large batch): memory-bound, a test of fusion.

Ten elementwise ops with a per-column scale and shift: one fused kernel reads the input once and
writes the output once; without fusion every op is another pass over 64 MB.
Default for `kiln compile`: f32, small batch.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 256, "large": 4096}  # rows of 4096: 1M and 16M elements
COLUMNS = 4096


class ElementwiseChain(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = nn.Parameter(torch.rand(COLUMNS) + 0.5)
        self.shift = nn.Parameter(torch.randn(COLUMNS) * 0.1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.shift
        y = torch.sigmoid(y) * torch.tanh(x)
        y = y + torch.relu(x - self.shift)
        return torch.exp(-y * y) * 0.5 + y


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    return ElementwiseChain().to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], COLUMNS, generator=generator).to(DTYPES[dtype]),)
