"""ViT-B/16 (Dosovitskiy et al. 2021) as google/vit-base-patch16-224 publishes it: transformers' ViTForImageClassification.

86.6M parameters, 224x224 images in 16x16 patches (197 tokens with the class token), 12 layers of
width 768, 12 heads, 1000 classes. Config written out below; weights by name (_weights.py),
normal(0, 0.02) as the config's initializer_range. Tiny (the CI slice): one layer of width 32, two
heads, 32x32 images in 8x8 patches.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
CONFIGS = {
    "full": dict(  # google/vit-base-patch16-224
        hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, hidden_act="gelu",
        layer_norm_eps=1e-12, image_size=224, patch_size=16, num_channels=3, qkv_bias=True, num_labels=1000,
    ),
    "tiny": dict(
        hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, hidden_act="gelu",
        layer_norm_eps=1e-12, image_size=32, patch_size=8, num_channels=3, qkv_bias=True, num_labels=10,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("ViTConfig", "ViTForImageClassification", CONFIGS[size])
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("vit_base", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
