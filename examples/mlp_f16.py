"""The MLP in float16: weights, inputs and outputs all f16."""

import torch
from torch import nn

torch.manual_seed(0)

model = nn.Sequential(nn.Linear(64, 128), nn.SiLU(), nn.Linear(128, 32)).to(torch.float16)
example_inputs = (torch.randn(8, 64, dtype=torch.float16),)
