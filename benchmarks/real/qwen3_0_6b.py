"""Qwen3 0.6B (Qwen team 2025) as Qwen/Qwen3-0.6B publishes it: transformers' Qwen3ForCausalLM, in prefill.

596M parameters, 28 layers of width 1024, 16 query heads sharing 8 key/value heads of dim 128 (wider
than width / heads), RMSNorm on each head's queries and keys, SwiGLU MLPs of 3072, rotary positions
(theta 10^6), a 151936-token vocabulary tied to the LM head; the last position's logits for a
512-token prompt. Config written out below; weights by name (_weights.py). Tiny (the CI slice): one
layer of width 64, 4 query heads of dim 32 on 2 key/value heads, a 256-token vocabulary, every
position's logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_QWEN3 = dict(hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False, use_sliding_window=False, rope_parameters=dict(rope_type="default", rope_theta=1000000.0))
CONFIGS = {
    "full": dict(  # Qwen/Qwen3-0.6B
        _QWEN3, vocab_size=151936, hidden_size=1024, intermediate_size=3072, num_hidden_layers=28, num_attention_heads=16,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=40960, bos_token_id=151643, eos_token_id=151645,
    ),
    "tiny": dict(
        _QWEN3, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=32, max_position_embeddings=256,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("Qwen3Config", "Qwen3ForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("qwen3_0_6b", batch, size, CONFIGS[size]["vocab_size"])
