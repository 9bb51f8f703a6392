"""BERT-base uncased (Devlin et al. 2019) as bert-base-uncased publishes it: transformers' BertModel.

109.5M parameters, 12 layers of width 768, 12 heads, a 30522-token vocabulary; the last hidden state
and the pooled output for 128 tokens with a padding mask (every sequence but the first of a batch
ends in padding, as a served batch does). Config written out below; weights by name (_weights.py).
Tiny (the CI slice): one layer of width 32, two heads, a 128-token vocabulary, 16 tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, padding_mask, tokens

BATCHES = {"latency": 1, "throughput": 32}
SEQUENCE = {"full": 128, "tiny": 16}
CONFIGS = {
    "full": dict(  # bert-base-uncased
        vocab_size=30522, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072,
        hidden_act="gelu", max_position_embeddings=512, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0,
    ),
    "tiny": dict(
        vocab_size=128, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64,
        hidden_act="gelu", max_position_embeddings=64, type_vocab_size=2, layer_norm_eps=1e-12, pad_token_id=0,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("BertConfig", "BertModel", CONFIGS[size])
    return finish(Outputs(model, ["input_ids", "attention_mask"], ["last_hidden_state", "pooler_output"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    batch_size, sequence = batch_of(BATCHES, batch, size), SEQUENCE[size]
    return tokens("bert_base", batch_size, sequence, CONFIGS[size]["vocab_size"]), padding_mask(batch_size, sequence)
