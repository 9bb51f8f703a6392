"""GPT-2 small (Radford et al. 2019) as gpt2 publishes it: transformers' GPT2LMHeadModel, in prefill.

124.4M parameters, 12 layers of width 768, 12 heads, learned positions, a 50257-token vocabulary
whose embedding is the LM head too; the last position's logits for a 512-token prompt. Config
written out below; weights by name (_weights.py). Tiny (the CI slice): one layer of width 32, two
heads, a 128-token vocabulary, every position's logits for 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, PREFILL, causal_lm, prefill_tokens

BATCHES = PREFILL  # (batch, tokens): latency (1, 512), throughput (8, 512)
CONFIGS = {
    "full": dict(  # gpt2
        vocab_size=50257, n_positions=1024, n_embd=768, n_layer=12, n_head=12, activation_function="gelu_new",
        layer_norm_epsilon=1e-5, bos_token_id=50256, eos_token_id=50256,
    ),
    "tiny": dict(vocab_size=128, n_positions=64, n_embd=32, n_layer=1, n_head=2, activation_function="gelu_new", layer_norm_epsilon=1e-5, bos_token_id=127, eos_token_id=127),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    return causal_lm("GPT2Config", "GPT2LMHeadModel", CONFIGS[size], size, dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return prefill_tokens("gpt2", batch, size, CONFIGS[size]["vocab_size"])
