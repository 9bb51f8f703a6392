"""GPT-2 small (124M parameters) from its configuration, random weights, no downloads.

Needs `transformers` (pip install 'torchkiln[zoo]'). Returns the logits for a batch of token ids.
"""

import torch
from torch import nn


class GPT2Logits(nn.Module):
    """The Hugging Face model returns a ModelOutput; kiln artifacts return tensors."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import GPT2Config, GPT2LMHeadModel

        config = GPT2Config(n_positions=1024, n_embd=768, n_layer=12, n_head=12, vocab_size=50257)
        config._attn_implementation = "sdpa"
        self.model = GPT2LMHeadModel(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return GPT2Logits()


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, 50257, (1, 64), generator=torch.Generator().manual_seed(0)),)
