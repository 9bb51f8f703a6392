"""A 3-layer MLP with 4096 hidden units: 1024 -> 4096 -> 4096 -> 1024, GELU between layers.

25M weights (100 MB in f32): matmul-bound at the large batch, weight-bandwidth-bound at the small.
Default for `kiln compile`: f32, small batch.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 8, "large": 512}
WIDTH, HIDDEN = 1024, 4096


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    model = nn.Sequential(
        nn.Linear(WIDTH, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, HIDDEN),
        nn.GELU(),
        nn.Linear(HIDDEN, WIDTH),
    )
    return model.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], WIDTH, generator=generator).to(DTYPES[dtype]),)
