"""Mistral 7B v0.1 (Jiang et al. 2023) shaped, 4 of its 32 layers: transformers' MistralForCausalLM, in prefill.

mistralai/Mistral-7B-v0.1's widths and heads: layers of width 4096, 32 query heads sharing 8
key/value heads (GQA) of dim 128, SwiGLU MLPs of 14336, RMSNorm, rotary positions, sliding-window
attention over 4096 tokens, a 32000-token vocabulary with its own LM head. Only 4 of the 32 layers
(1.1B parameters instead of 7.2B), to keep the compile and the f32 model (4.5 GB instead of 29 GB)
within a development machine; per-layer times scale by 8 to the whole model. The last position's
logits for a 512-token prompt: at the published window of 4096 a prompt this short sees a plain
causal mask; the tiny config (the CI slice) has a window of 8 over 16 tokens, so there the window
cuts. Tiny: one layer of width 64, 4 query heads on 2 key/value heads, a 256-token vocabulary,
every position's logits. Weights by name (_weights.py).
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
_MISTRAL = dict(hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False, rope_parameters=dict(rope_type="default", rope_theta=10000.0))
CONFIGS = {
    "full": dict(  # mistralai/Mistral-7B-v0.1, num_hidden_layers 32 -> 4
        _MISTRAL, vocab_size=32000, hidden_size=4096, intermediate_size=14336, num_hidden_layers=4, num_attention_heads=32,
        num_key_value_heads=8, head_dim=128, max_position_embeddings=32768, sliding_window=4096, bos_token_id=1, eos_token_id=2,
    ),
    "tiny": dict(
        _MISTRAL, vocab_size=256, hidden_size=64, intermediate_size=128, num_hidden_layers=1, num_attention_heads=4,
        num_key_value_heads=2, head_dim=16, max_position_embeddings=256, sliding_window=8,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("MistralConfig", "MistralForCausalLM", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("mistral_7b", batch, size, CONFIGS[size]["vocab_size"])
