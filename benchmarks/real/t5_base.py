"""T5-base (Raffel et al. 2020) as t5-base publishes it: transformers' T5ForConditionalGeneration, the whole model.

223M parameters: 12 encoder and 12 decoder layers of width 768, 12 heads of dim 64 with T5's bucketed
relative position bias (32 buckets, distance 128) and no score scaling, ReLU MLPs of 3072, RMS layer
norms, a 32128-token vocabulary shared by both embeddings and the LM head (rescaled by
768^-0.5). The decoder's logits for 32 target tokens given 256 source tokens with a padding mask.
Config written out below; weights by name (_weights.py), normal(0, 768^-0.5) as T5's own init uses
for most of its matrices, and the queries (768 * 64)^-0.5 as it uses for them: T5 does not scale its
attention scores, so queries as large as the rest gave scores of std 8 (up to 46) in the first layer,
where bf16's rounding moved every softmax by percents; any bf16 run, eager or compiled, then landed
0.2-0.27 rel. L2 from f32 (0.21 from the rounding of the weights alone), and compared with each other
as far. Tiny (the CI slice): one encoder and one decoder layer of width 32, two
heads, a 128-token vocabulary, 16 source and 8 target tokens.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

import torch
from _common import DTYPES, Outputs, batch_of, build, finish, padding_mask, tokens

BATCHES = {"latency": 1, "throughput": 16}
SEQUENCES = {"full": (256, 32), "tiny": (16, 8)}  # (source, target) tokens
_T5 = dict(
    relative_attention_num_buckets=32, relative_attention_max_distance=128, layer_norm_epsilon=1e-6,
    feed_forward_proj="relu", tie_word_embeddings=True, decoder_start_token_id=0, pad_token_id=0, eos_token_id=1,
)
CONFIGS = {
    "full": dict(_T5, vocab_size=32128, d_model=768, d_kv=64, d_ff=3072, num_layers=12, num_decoder_layers=12, num_heads=12),  # t5-base
    "tiny": dict(_T5, vocab_size=128, d_model=32, d_kv=16, d_ff=64, num_layers=1, num_decoder_layers=1, num_heads=2),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    settings = CONFIGS[size]
    model = build("T5Config", "T5ForConditionalGeneration", settings, std=settings["d_model"] ** -0.5)
    with torch.no_grad():
        for name, weight in model.named_parameters():
            if name.endswith(".q.weight"):  # T5's init: std (d_model * d_kv)^-0.5 for the queries
                weight.mul_(settings["d_kv"] ** -0.5)
    names = ["input_ids", "attention_mask", "decoder_input_ids"]
    return finish(Outputs(model, names, ["logits"], use_cache=False), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    (source, target), vocab = SEQUENCES[size], CONFIGS[size]["vocab_size"]
    batch_size = batch_of(BATCHES, batch, size)
    ids = tokens("t5_base.source", batch_size, source, vocab)
    return ids, padding_mask(batch_size, source), tokens("t5_base.target", batch_size, target, vocab)
