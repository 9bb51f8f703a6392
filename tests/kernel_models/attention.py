"""Attention as kiln's GPU kernel takes it, in one small model (tests/test_kernels.py).

A causal self-attention written as GPT-2 code writes it (one QKV projection split in three, heads
moved forward, the result moved back: the kernel reads Q, K and V inside the projection's output and
writes [batch, seq, heads, dim]), nn.MultiheadAttention (its sequence-first reshapes of the
in-projection read through strides too), and
a cross-attention of 24 queries over 40 keys as SDPA takes it ([batch, heads, seq, dim]) with its own
scale, and two masked self-attentions: a boolean padding mask over the keys ([batch, 1, 1, keys], as
Hugging Face models pass one; the first image's first 30 keys masked) and an additive float mask; and
two of one query row, as a decode step attends (the last query over every key under the additive
mask; the first, causal, which sees one key). Sequences no kernel block divides. Takes `dtype` and
`batch` like the suite's model files.
"""

import torch
from torch import nn
from torch.nn import functional as F

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"small": 2, "large": 8}
HEADS, HEAD_DIM = 4, 32


class Attention(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.qkv = nn.Linear(HEADS * HEAD_DIM, 3 * HEADS * HEAD_DIM)
        self.mha = nn.MultiheadAttention(HEADS * HEAD_DIM, HEADS, batch_first=True)

    def forward(self, x: torch.Tensor, memory: torch.Tensor) -> tuple[torch.Tensor, ...]:
        batch, seq, _ = x.shape
        q, k, v = self.qkv(x).split(HEADS * HEAD_DIM, dim=2)
        q, k, v = (t.view(batch, seq, HEADS, HEAD_DIM).transpose(1, 2) for t in (q, k, v))
        causal = F.scaled_dot_product_attention(q, k, v, is_causal=True).transpose(1, 2).reshape(batch, seq, -1)
        keys = memory.view(batch, HEADS, -1, HEAD_DIM)
        cross = F.scaled_dot_product_attention(q[:, :, :24], keys, keys * 0.5, scale=0.3)
        keep = (x[:, :, 0] > -0.5)[:, None, None, :]  # [batch, 1, 1, keys]
        padded = F.scaled_dot_product_attention(q, k, v, attn_mask=keep.expand(batch, 1, seq, seq))
        additive = F.scaled_dot_product_attention(q, k, v, attn_mask=x[:, None, None, :, 1] * 2.0)
        torch_mha, _ = self.mha(x, x, x, need_weights=False)
        step = F.scaled_dot_product_attention(q[:, :, -1:], k, v, attn_mask=x[:, None, None, :, 1] * 2.0)
        first = F.scaled_dot_product_attention(q[:, :, :1], k, v, is_causal=True)
        return causal, cross, padded, additive, torch_mha, step, first


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    return Attention().to(DTYPES[dtype])


def get_example_inputs(batch: str = "small", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    size = BATCHES[batch]
    x = torch.randn(size, 50, HEADS * HEAD_DIM, generator=generator)
    x[0, :30, 0] = -1.0  # the first image's first 30 keys are padding
    memory = torch.randn(size, HEADS * 40 * HEAD_DIM, generator=generator)
    return x.to(DTYPES[dtype]), memory.to(DTYPES[dtype])
