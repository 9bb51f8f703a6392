"""BERT-base (110M parameters) from its configuration, random weights, no downloads.

Needs `transformers` (pip install 'torchkiln[zoo]'). Returns the last hidden state and the pooled
output for a batch of token ids with an attention mask.
"""

import torch
from torch import nn


class BertEncoder(nn.Module):
    """The Hugging Face model returns a ModelOutput; kiln artifacts return tensors."""

    def __init__(self) -> None:
        super().__init__()
        from transformers import BertConfig, BertModel

        config = BertConfig(hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072)
        config._attn_implementation = "sdpa"
        self.model = BertModel(config)

    def forward(self, input_ids: torch.Tensor, attention_mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        output = self.model(input_ids=input_ids, attention_mask=attention_mask)
        return output.last_hidden_state, output.pooler_output


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return BertEncoder()


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    ids = torch.randint(0, 30522, (2, 64), generator=generator)
    mask = torch.ones(2, 64, dtype=torch.int64)
    mask[1, 48:] = 0  # the second sequence is padded
    return ids, mask
