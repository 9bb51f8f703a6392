"""Llama 3.2 1B (Meta 2024) as meta-llama/Llama-3.2-1B publishes it: transformers' LlamaForCausalLM, in prefill.

1.24B parameters, 16 layers of width 2048, 32 query heads sharing 8 key/value heads (GQA) of dim 64,
SwiGLU MLPs of 8192, RMSNorm, rotary positions with Llama 3's frequency scaling (theta 500000,
factor 32), a 128256-token vocabulary tied to the LM head; the last position's logits for a
512-token prompt. Config written out below; weights by name (_weights.py). Tiny (the CI slice): one
layer of width 64, 4 query heads on 2 key/value heads, the same rotary scaling at a shorter
original context, a 256-token vocabulary, every position's logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_LLAMA = dict(hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=True, attention_bias=False, mlp_bias=False)
CONFIGS = {
    "full": dict(  # meta-llama/Llama-3.2-1B
        _LLAMA, vocab_size=128256, hidden_size=2048, intermediate_size=8192, num_hidden_layers=16, num_attention_heads=32,
        num_key_value_heads=8, head_dim=64, max_position_embeddings=131072, bos_token_id=128000, eos_token_id=128001,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=8192),
    ),
    "tiny": dict(
        _LLAMA, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=256,
        rope_parameters=dict(rope_type="llama3", rope_theta=500000.0, factor=32.0, low_freq_factor=1.0, high_freq_factor=4.0, original_max_position_embeddings=64),
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("LlamaConfig", "LlamaForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("llama_3_2_1b", batch, size, CONFIGS[size]["vocab_size"])
