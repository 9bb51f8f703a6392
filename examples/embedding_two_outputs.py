"""int64 token ids in, two outputs out: per-token logits and a pooled sentence vector."""

import torch
from torch import nn


class TokenClassifier(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.embed = nn.Embedding(100, 32)
        self.proj = nn.Linear(32, 5)

    def forward(self, ids: torch.Tensor, mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        hidden = self.embed(ids) * mask.unsqueeze(-1)
        pooled = hidden.sum(dim=1) / mask.sum(dim=1, keepdim=True).clamp_min(1)
        return self.proj(hidden), pooled


torch.manual_seed(0)
model = TokenClassifier()
example_inputs = (torch.randint(0, 100, (4, 12)), (torch.rand(4, 12) > 0.2).float())
