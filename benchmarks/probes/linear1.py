"""Probe: one bias-free Linear 2048 -> 8192 (Llama-3.2-1B's MLP up projection), rows as a prefill's tokens."""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"latency": 512, "throughput": 4096}


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    return nn.Linear(2048, 8192, bias=False).to(DTYPES[dtype])


def get_example_inputs(batch: str = "latency", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], 2048, generator=generator).to(DTYPES[dtype]),)
