"""Gemma 2B (Google 2024) shaped, 6 of its 18 layers: transformers' GemmaForCausalLM, in prefill.

google/gemma-2b's widths and heads: layers of width 2048, 8 query heads sharing one key/value head
(multi-query attention) of dim 256, GeGLU MLPs of 16384 (tanh GELU), RMSNorm scaling by 1 + weight,
embeddings scaled by sqrt(2048), rotary positions, a 256000-token vocabulary tied to the LM head.
Only 6 of the 18 layers (1.2B parameters instead of 2.5B, the embedding's 524M in both), to keep the
compile and the f32 model within a development machine. The last position's logits for a 512-token
prompt. Config written out below; weights by name (_weights.py). Tiny (the CI slice): one layer of
width 64, 4 query heads of dim 32 on one key/value head, a 256-token vocabulary, every position's
logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_GEMMA = dict(hidden_act="gelu_pytorch_tanh", hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6, tie_word_embeddings=True, attention_bias=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0))
CONFIGS = {
    "full": dict(  # google/gemma-2b, num_hidden_layers 18 -> 6
        _GEMMA, vocab_size=256000, hidden_size=2048, intermediate_size=16384, num_hidden_layers=6, num_attention_heads=8,
        num_key_value_heads=1, head_dim=256, max_position_embeddings=8192, bos_token_id=2, eos_token_id=1, pad_token_id=0,
    ),
    "tiny": dict(
        _GEMMA, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=1, head_dim=32, max_position_embeddings=256, pad_token_id=0,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("GemmaConfig", "GemmaForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("gemma_2b", batch, size, CONFIGS[size]["vocab_size"])
