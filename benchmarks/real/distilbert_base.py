"""DistilBERT-base uncased (Sanh et al. 2019) as distilbert-base-uncased publishes it: transformers' DistilBertModel.

66.4M parameters, 6 layers of width 768, 12 heads, a 30522-token vocabulary; the last hidden state
for 128 tokens with a padding mask. Config written out below; weights by name (_weights.py). Tiny
(the CI slice): one layer of width 32, two heads, a 128-token vocabulary, 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, padding_mask, tokens

BATCHES = {"latency": 1, "throughput": 32}
SEQUENCE = {"full": 128, "tiny": 16}
CONFIGS = {
    "full": dict(  # distilbert-base-uncased
        vocab_size=30522, max_position_embeddings=512, sinusoidal_pos_embds=False, n_layers=6, n_heads=12, dim=768,
        hidden_dim=3072, activation="gelu", pad_token_id=0,
    ),
    "tiny": dict(
        vocab_size=128, max_position_embeddings=64, sinusoidal_pos_embds=False, n_layers=1, n_heads=2, dim=32,
        hidden_dim=64, activation="gelu", pad_token_id=0,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("DistilBertConfig", "DistilBertModel", CONFIGS[size])
    return finish(Outputs(model, ["input_ids", "attention_mask"], ["last_hidden_state"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    batch_size, sequence = batch_of(BATCHES, batch, size), SEQUENCE[size]
    return tokens("distilbert_base", batch_size, sequence, CONFIGS[size]["vocab_size"]), padding_mask(batch_size, sequence)
