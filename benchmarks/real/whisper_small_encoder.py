"""Whisper-small's encoder (Radford et al. 2022) as openai/whisper-small publishes it: transformers' WhisperEncoder.

88M parameters: two convolutions over 30 s of 80-bin log-mel features (3000 frames, the second of
stride 2), positions for 1500 frames, 12 pre-norm layers of width 768, 12 heads, GELU MLPs of 3072;
the last hidden state. Config written out below (the decoder's numbers too: the config holds both);
weights by name (_weights.py), the sinusoidal position table included (a parameter, set by name like
the others so that it is the same bits everywhere). Tiny (the CI slice): 16 mel bins, 64 frames,
one layer of width 32, two heads.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, features, finish

BATCHES = {"latency": 1, "throughput": 16}
_WHISPER = dict(activation_function="gelu", scale_embedding=False, init_std=0.02, max_target_positions=448)
CONFIGS = {
    "full": dict(  # openai/whisper-small
        _WHISPER, vocab_size=51865, num_mel_bins=80, d_model=768, encoder_layers=12, encoder_attention_heads=12,
        encoder_ffn_dim=3072, decoder_layers=12, decoder_attention_heads=12, decoder_ffn_dim=3072, max_source_positions=1500,
    ),
    "tiny": dict(
        _WHISPER, vocab_size=128, num_mel_bins=16, d_model=32, encoder_layers=1, encoder_attention_heads=2,
        encoder_ffn_dim=64, decoder_layers=1, decoder_attention_heads=2, decoder_ffn_dim=64, max_source_positions=32, pad_token_id=127, bos_token_id=127, eos_token_id=127, decoder_start_token_id=126,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("WhisperConfig", "models.whisper.modeling_whisper.WhisperEncoder", CONFIGS[size])
    return finish(Outputs(model, ["input_features"], ["last_hidden_state"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    config = CONFIGS[size]
    shape = (batch_of(BATCHES, batch, size), config["num_mel_bins"], 2 * config["max_source_positions"])
    return (features("whisper_small_encoder", shape, dtype),)
