"""A GPT-2-style decoder block: pre-norm causal self-attention and a 4x MLP, GPT-2 small sized.

d_model 768, 12 heads, tanh-approximated GELU, residuals around both halves (7.1M weights).
Attention is `scaled_dot_product_attention(..., is_causal=True)`, as current GPT-2 code writes it.
Default for `kiln compile`: f32, small batch.
"""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": (1, 128), "large": (8, 1024)}  # (batch, sequence)
D_MODEL, HEADS = 768, 12


class CausalSelfAttention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(D_MODEL, 3 * D_MODEL)
        self.proj = nn.Linear(D_MODEL, D_MODEL)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        batch, sequence, _ = x.shape
        q, k, v = self.qkv(x).split(D_MODEL, dim=2)
        q, k, v = (t.view(batch, sequence, HEADS, D_MODEL // HEADS).transpose(1, 2) for t in (q, k, v))
        y = nn.functional.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.proj(y.transpose(1, 2).reshape(batch, sequence, D_MODEL))


class Gpt2Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.ln_1 = nn.LayerNorm(D_MODEL)
        self.attn = CausalSelfAttention()
        self.ln_2 = nn.LayerNorm(D_MODEL)
        self.mlp = nn.Sequential(
            nn.Linear(D_MODEL, 4 * D_MODEL), nn.GELU(approximate="tanh"), nn.Linear(4 * D_MODEL, D_MODEL)
        )

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = x + self.attn(self.ln_1(x))
        return x + self.mlp(self.ln_2(x))


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    block = Gpt2Block()
    with torch.no_grad():  # not ones and zeros, which a compiler could fold away and a trained model lacks
        for norm in (block.ln_1, block.ln_2):
            norm.weight.uniform_(0.5, 1.5)
            norm.bias.uniform_(-0.1, 0.1)
    return block.to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(*BATCHES[batch], D_MODEL, generator=generator).to(DTYPES[dtype]),)
