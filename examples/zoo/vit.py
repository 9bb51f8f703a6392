"""ViT-B/16 (86M parameters), defined here, random weights: patch embedding, 12 pre-norm encoder
layers with multi-head attention (scaled_dot_product_attention), class token, classifier."""

import torch
from torch import nn


class EncoderBlock(nn.Module):
    def __init__(self, dim: int, heads: int, mlp_dim: int) -> None:
        super().__init__()
        self.heads = heads
        self.norm1 = nn.LayerNorm(dim, eps=1e-6)
        self.qkv = nn.Linear(dim, 3 * dim)
        self.proj = nn.Linear(dim, dim)
        self.norm2 = nn.LayerNorm(dim, eps=1e-6)
        self.mlp = nn.Sequential(nn.Linear(dim, mlp_dim), nn.GELU(), nn.Linear(mlp_dim, dim))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, tokens, dim = x.shape
        q, k, v = self.qkv(self.norm1(x)).reshape(batch, tokens, 3, self.heads, dim // self.heads).unbind(2)
        attention = nn.functional.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2))
        x = x + self.proj(attention.transpose(1, 2).reshape(batch, tokens, dim))
        return x + self.mlp(self.norm2(x))


class ViT(nn.Module):
    def __init__(self, image: int = 224, patch: int = 16, dim: int = 768, depth: int = 12, heads: int = 12) -> None:
        super().__init__()
        self.patchify = nn.Conv2d(3, dim, patch, stride=patch)
        self.cls = nn.Parameter(torch.randn(1, 1, dim) * 0.02)
        self.position = nn.Parameter(torch.randn(1, (image // patch) ** 2 + 1, dim) * 0.02)
        self.blocks = nn.Sequential(*(EncoderBlock(dim, heads, 4 * dim) for _ in range(depth)))
        self.norm = nn.LayerNorm(dim, eps=1e-6)
        self.head = nn.Linear(dim, 1000)

    def forward(self, images: torch.Tensor) -> torch.Tensor:
        patches = self.patchify(images).flatten(2).transpose(1, 2)
        tokens = torch.cat([self.cls.expand(patches.shape[0], -1, -1), patches], dim=1) + self.position
        return self.head(self.norm(self.blocks(tokens))[:, 0])


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return ViT()


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(0)),)
