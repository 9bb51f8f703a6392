"""BART-base (Lewis et al. 2020) as facebook/bart-base publishes it: transformers' BartForConditionalGeneration, the whole model.

139M parameters: 6 encoder and 6 decoder layers of width 768, 12 heads, GELU MLPs of 3072, post-norm
layers, learned positions (offset by 2), a 50265-token vocabulary shared by both embeddings and the
LM head. The decoder's logits for 32 target tokens given 256 source tokens with a padding mask.
Config written out below; weights by name (_weights.py), normal(0, 0.02) as its init_std. Tiny (the
CI slice): one encoder and one decoder layer of width 32, two heads, a 128-token vocabulary, 16
source and 8 target tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, padding_mask, tokens

BATCHES = {"latency": 1, "throughput": 16}
SEQUENCES = {"full": (256, 32), "tiny": (16, 8)}  # (source, target) tokens
_BART = dict(
    activation_function="gelu", init_std=0.02, scale_embedding=False, pad_token_id=1, bos_token_id=0, eos_token_id=2,
    decoder_start_token_id=2, forced_eos_token_id=2, tie_word_embeddings=True,
)
CONFIGS = {
    "full": dict(  # facebook/bart-base
        _BART, vocab_size=50265, d_model=768, encoder_layers=6, decoder_layers=6, encoder_attention_heads=12,
        decoder_attention_heads=12, encoder_ffn_dim=3072, decoder_ffn_dim=3072, max_position_embeddings=1024,
    ),
    "tiny": dict(
        _BART, vocab_size=128, d_model=32, encoder_layers=1, decoder_layers=1, encoder_attention_heads=2,
        decoder_attention_heads=2, encoder_ffn_dim=64, decoder_ffn_dim=64, max_position_embeddings=64,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("BartConfig", "BartForConditionalGeneration", CONFIGS[size])
    names = ["input_ids", "attention_mask", "decoder_input_ids"]
    return finish(Outputs(model, names, ["logits"], use_cache=False), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    (source, target), vocab = SEQUENCES[size], CONFIGS[size]["vocab_size"]
    batch_size = batch_of(BATCHES, batch, size)
    ids = tokens("bart_base.source", batch_size, source, vocab)
    ids[ids == 1] = 3  # padding (id 1) only where the mask says so
    return ids, padding_mask(batch_size, source), tokens("bart_base.target", batch_size, target, vocab)
