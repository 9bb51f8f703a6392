"""Whisper-tiny's architecture (encoder + decoder, 39M parameters) from its configuration, random weights, no downloads.

Needs `transformers` (pip install 'torchkiln[zoo]'). 30 s of 80-bin log-mel features in, the logits for
8 decoder tokens out. On cuda its first encoder layer norm needs kiln's retry with IREE's other
reduction pipeline (see compiler/iree_backend.py's WORKAROUNDS); the manifest records the flag.
"""
import torch
from torch import nn


class WhisperLogits(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        from transformers import WhisperConfig, WhisperForConditionalGeneration

        config = WhisperConfig(
            vocab_size=51865, num_mel_bins=80, d_model=384, encoder_layers=4, decoder_layers=4,
            encoder_attention_heads=6, decoder_attention_heads=6, encoder_ffn_dim=1536, decoder_ffn_dim=1536,
            max_source_positions=1500, max_target_positions=448,
        )
        self.model = WhisperForConditionalGeneration(config)

    def forward(self, input_features: torch.Tensor, decoder_input_ids: torch.Tensor) -> torch.Tensor:
        return self.model(input_features=input_features, decoder_input_ids=decoder_input_ids, use_cache=False).logits


def get_model() -> nn.Module:
    torch.manual_seed(0)
    return WhisperLogits()


def get_example_inputs() -> tuple[torch.Tensor, ...]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(1, 80, 3000, generator=generator), torch.randint(0, 51865, (1, 8), generator=generator)
