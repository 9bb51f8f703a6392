"""The MLP in bfloat16: weights, inputs and outputs all bf16."""

import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(64, 128), nn.SiLU(), nn.Linear(128, 32)).to(torch.bfloat16)
example_inputs = (torch.randn(8, 64, dtype=torch.bfloat16),)
