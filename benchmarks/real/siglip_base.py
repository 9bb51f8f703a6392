"""SigLIP base/16 (Zhai et al. 2023) as google/siglip-base-patch16-224 publishes it: transformers' SiglipModel, both towers.

203M parameters: a vision transformer over 224x224 images in 16x16 patches (a "valid"-padded patch
convolution, 12 layers of width 768, 12 heads, attention pooling) and a text transformer over 64
tokens (12 layers of width 768, pooled at the last token), tanh GELU; the normalized image and text
embeddings. Config written out below; weights by name (_weights.py). Tiny (the CI slice): one layer
per tower of width 32, two heads, 32x32 images in 8x8 patches, 16 tokens of a 128-token vocabulary.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels, tokens

BATCHES = {"latency": 1, "throughput": 32}
_TOWER = dict(hidden_act="gelu_pytorch_tanh", layer_norm_eps=1e-6, attention_dropout=0.0)
CONFIGS = {
    "full": dict(  # google/siglip-base-patch16-224
        text_config=dict(_TOWER, vocab_size=32000, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, max_position_embeddings=64),
        vision_config=dict(_TOWER, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, image_size=224, patch_size=16, num_channels=3),
    ),
    "tiny": dict(
        text_config=dict(_TOWER, vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16, pad_token_id=1, bos_token_id=126, eos_token_id=127),
        vision_config=dict(_TOWER, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8, num_channels=3),
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("SiglipConfig", "SiglipModel", CONFIGS[size], std=0.02)
    return finish(Outputs(model, ["input_ids", "pixel_values"], ["image_embeds", "text_embeds"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    text, vision = CONFIGS[size]["text_config"], CONFIGS[size]["vision_config"]
    batch_size = batch_of(BATCHES, batch, size)
    ids = tokens("siglip_base", batch_size, text["max_position_embeddings"], text["vocab_size"])
    return ids, pixels("siglip_base", batch_size, vision["image_size"], dtype)
