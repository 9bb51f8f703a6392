"""Phi-2 (Microsoft 2023) shaped, 8 of its 32 layers: transformers' PhiForCausalLM, in prefill.

microsoft/phi-2's widths and heads: layers of width 2560 with attention and a GELU MLP of 10240 in
parallel off one LayerNorm, 32 heads of dim 80 with rotary positions on the first 40% of each head
(32 of 80 dims), biases throughout, a 51200-token vocabulary with its own LM head (with a bias).
Only 8 of the 32 layers (0.9B parameters instead of 2.8B), to keep the compile and the f32 model
(3.6 GB instead of 11 GB) within a development machine; per-layer times scale by 4 to the whole
model. The last position's logits for a 512-token prompt. Config written out below; weights by
name (_weights.py). Tiny (the CI slice): one layer of width 80, 4 heads of dim 20 (rotary on 8),
a 256-token vocabulary, every position's logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_PHI = dict(hidden_act="gelu_new", layer_norm_eps=1e-5, partial_rotary_factor=0.4, qk_layernorm=False, tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0))
CONFIGS = {
    "full": dict(  # microsoft/phi-2, num_hidden_layers 32 -> 8
        _PHI, vocab_size=51200, hidden_size=2560, intermediate_size=10240, num_hidden_layers=8, num_attention_heads=32,
        num_key_value_heads=32, max_position_embeddings=2048, bos_token_id=50256, eos_token_id=50256,
    ),
    "tiny": dict(
        _PHI, vocab_size=256, hidden_size=80, intermediate_size=160, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=4, max_position_embeddings=256,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("PhiConfig", "PhiForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("phi_2", batch, size, CONFIGS[size]["vocab_size"])
