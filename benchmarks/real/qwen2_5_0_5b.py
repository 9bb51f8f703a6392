"""Qwen2.5 0.5B (Qwen team 2024) as Qwen/Qwen2.5-0.5B publishes it: transformers' Qwen2ForCausalLM, in prefill.

494M parameters, 24 layers of width 896, 14 query heads sharing 2 key/value heads (GQA) of dim 64
with biases on Q, K and V, SwiGLU MLPs of 4864, RMSNorm, rotary positions (theta 10^6), a
151936-token vocabulary tied to the LM head; the last position's logits for a 512-token prompt.
Config written out below; weights by name (_weights.py). Tiny (the CI slice): one layer of width
64, 4 query heads on 2 key/value heads, a 256-token vocabulary, every position's logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_QWEN = dict(hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True, use_sliding_window=False, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
CONFIGS = {
    "full": dict(  # Qwen/Qwen2.5-0.5B
        _QWEN, vocab_size=151936, hidden_size=896, intermediate_size=4864, num_hidden_layers=24, num_attention_heads=14,
        num_key_value_heads=2, max_position_embeddings=32768, bos_token_id=151643, eos_token_id=151643,
    ),
    "tiny": dict(
        _QWEN, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, max_position_embeddings=256,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("Qwen2Config", "Qwen2ForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("qwen2_5_0_5b", batch, size, CONFIGS[size]["vocab_size"])
