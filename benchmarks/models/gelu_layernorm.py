"""gelu(x + b) -> layer_norm(y + r): a transformer layer's epilogue, the case for elementwise fusion.

kiln's passes decompose gelu and layer_norm into primitives and fuse the elementwise chains back;
benchmarks/passes_effect.py checks that this costs no dispatch and no time.
"""

import torch
from torch import nn

HIDDEN = 1024


class GeluLayerNorm(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.bias = nn.Parameter(torch.randn(HIDDEN) * 0.1)
        self.norm = nn.LayerNorm(HIDDEN)

    def forward(self, x: torch.Tensor, residual: torch.Tensor) -> torch.Tensor:
        y = nn.functional.gelu(x + self.bias)
        return self.norm(y + residual)


torch.manual_seed(0)
model = GeluLayerNorm()
example_inputs = (torch.randn(8, 128, HIDDEN), torch.randn(8, 128, HIDDEN))

# For benchmarks/suite.py: dtypes and (batch, sequence) sizes, the large one 16M elements per input.
DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": (1, 128), "large": (16, 1024)}


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = GeluLayerNorm()
    with torch.no_grad():  # not ones and zeros, which a compiler could fold away and a trained model lacks
        model.norm.weight.uniform_(0.5, 1.5)
        model.norm.bias.uniform_(-0.1, 0.1)
    return model.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    shape = (*BATCHES[batch], HIDDEN)
    return tuple(torch.randn(shape, generator=generator).to(DTYPES[dtype]) for _ in range(2))
