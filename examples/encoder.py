"""One transformer encoder layer (self-attention + feed-forward), batch-first."""

import torch
from torch import nn

torch.manual_seed(0)

model = nn.TransformerEncoderLayer(d_model=64, nhead=4, dim_feedforward=128, dropout=0.0, batch_first=True)
example_inputs = (torch.randn(2, 16, 64),)
