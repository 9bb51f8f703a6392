"""A small Mixtral (mixture of experts: 8 experts, 2 per token), random weights, no downloads.

Needs `transformers` (pip install 'torchkiln[zoo]'). 4 layers of width 512 with grouped-query
attention (8 heads, 2 key/value heads) and 8 SwiGLU experts of width 1024 per layer, routed top-2:
about 60M parameters. transformers' own MoE code routes the tokens (top-k, sort by expert, a
histogram of tokens per expert, grouped matrix products); returns the logits for 64 tokens.
"""

import torch
from torch import nn

VOCAB = 8192


class MixtralLogits(nn.Module):
    """The Hugging Face model returns a ModelOutput; kiln artifacts return tensors."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import MixtralConfig, MixtralForCausalLM

        config = MixtralConfig(
            vocab_size=VOCAB,
            hidden_size=512,
            intermediate_size=1024,
            num_hidden_layers=4,
            num_attention_heads=8,
            num_key_value_heads=2,
            num_local_experts=8,
            num_experts_per_tok=2,
            max_position_embeddings=512,
        )
        config._attn_implementation = "sdpa"
        self.model = MixtralForCausalLM(config)

    def forward(self, input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_ids=input_ids, use_cache=False).logits


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return MixtralLogits()


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    return (torch.randint(0, VOCAB, (1, 64), generator=torch.Generator().manual_seed(0)),)
