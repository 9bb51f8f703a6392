"""Probe: 8 pairs of bias-free Linears 2048 -> 8192 -> 2048 with ReLU between (Llama-3.2-1B's MLP shapes),
512 MiB of bf16 weights, so that each layer's weights come from DRAM as in a model."""

import torch
from torch import nn

DTYPES = {"f32": torch.float32, "bf16": torch.bfloat16}
BATCHES = {"latency": 512, "throughput": 4096}


def get_model(dtype: str = "f32") -> nn.Module:
    torch.manual_seed(0)
    layers = []
    for _ in range(8):
        layers += [nn.Linear(2048, 8192, bias=False), nn.ReLU(), nn.Linear(8192, 2048, bias=False), nn.ReLU()]
    for layer in layers:
        if isinstance(layer, nn.Linear):
            nn.init.normal_(layer.weight, std=layer.in_features**-0.5)
    return nn.Sequential(*layers).to(DTYPES[dtype])


def get_example_inputs(batch: str = "latency", dtype: str = "f32") -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(1)
    return (torch.randn(BATCHES[batch], 2048, generator=generator).to(DTYPES[dtype]),)
