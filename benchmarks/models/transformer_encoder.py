"""One transformer encoder layer, as PyTorch ships it: `nn.TransformerEncoderLayer`, BERT-base sized.

d_model 768, 12 heads, feed-forward 3072, GELU, post-norm, batch-first, no dropout (7.1M weights).
Default for `kiln compile`: f32, small batch.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": (1, 128), "large": (16, 512)}  # (batch, sequence)
D_MODEL = 768


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    layer = nn.TransformerEncoderLayer(
        d_model=D_MODEL, nhead=12, dim_feedforward=3072, dropout=0.0, activation="gelu", batch_first=True
    )
    with torch.no_grad():  # not ones and zeros, which a compiler could fold away and a trained model lacks
        for norm in (layer.norm1, layer.norm2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.1, 0.1)
    return layer.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(*BATCHES[batch], D_MODEL, generator=generator).to(DTYPES[dtype]),)
