"""CLIP ViT-B/32 (Radford et al. 2021) as openai/clip-vit-base-patch32 publishes it: transformers' CLIPModel, both towers.

151M parameters: a vision transformer over 224x224 images in 32x32 patches (12 layers of width 768,
12 heads) and a causal text transformer over 77 tokens (12 layers of width 512, 8 heads, pooled at
the end-of-text token), quick GELU, each projected to 512; the normalized image and text embeddings.
Config written out below; weights by name (_weights.py). Tiny (the CI slice): one layer per tower of
width 32, two heads, 32x32 images in 8x8 patches, 16 tokens of a 128-token vocabulary.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels, tokens

BATCHES = {"latency": 1, "throughput": 32}
_TEXT = dict(hidden_act="quick_gelu", layer_norm_eps=1e-5, bos_token_id=0, eos_token_id=2, pad_token_id=1)
_VISION = dict(hidden_act="quick_gelu", layer_norm_eps=1e-5, num_channels=3)
CONFIGS = {
    "full": dict(  # openai/clip-vit-base-patch32
        text_config=dict(_TEXT, vocab_size=49408, hidden_size=512, intermediate_size=2048, num_hidden_layers=12, num_attention_heads=8, max_position_embeddings=77),
        vision_config=dict(_VISION, hidden_size=768, intermediate_size=3072, num_hidden_layers=12, num_attention_heads=12, image_size=224, patch_size=32),
        projection_dim=512, logit_scale_init_value=2.6592, initializer_range=0.02,
    ),
    "tiny": dict(
        text_config=dict(_TEXT, vocab_size=128, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, max_position_embeddings=16),
        vision_config=dict(_VISION, hidden_size=32, intermediate_size=64, num_hidden_layers=1, num_attention_heads=2, image_size=32, patch_size=8),
        projection_dim=16, logit_scale_init_value=2.6592, initializer_range=0.02,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("CLIPConfig", "CLIPModel", CONFIGS[size])
    return finish(Outputs(model, ["input_ids", "pixel_values"], ["image_embeds", "text_embeds"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    text, vision = CONFIGS[size]["text_config"], CONFIGS[size]["vision_config"]
    batch_size, vocab = batch_of(BATCHES, batch, size), text["vocab_size"]
    ids = tokens("clip_vit_b32", batch_size, text["max_position_embeddings"], vocab - 1, last=vocab - 1)  # ends in end-of-text, the largest id
    return ids, pixels("clip_vit_b32", batch_size, vision["image_size"], dtype)
