"""BEiT-B/16 (Bao et al. 2022) as microsoft/beit-base-patch16-224 publishes it: transformers' BeitForImageClassification.

86.5M parameters, 224x224 images in 16x16 patches, 12 layers of width 768, 12 heads, a relative
position bias per layer (no absolute position embeddings), layer scale, mean pooling, 1000 classes.
Config written out below; weights by name (_weights.py). Tiny (the CI slice): one layer of width
32, two heads, 32x32 images in 8x8 patches, its relative position bias kept.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
_BEIT = dict(  # microsoft/beit-base-patch16-224
    vocab_size=8192, hidden_act="gelu", layer_norm_eps=1e-12, num_channels=3, use_mask_token=False,
    use_absolute_position_embeddings=False, use_relative_position_bias=True, use_shared_relative_position_bias=False,
    layer_scale_init_value=0.1, use_mean_pooling=True,
)
CONFIGS = {
    "full": dict(_BEIT, hidden_size=768, num_hidden_layers=12, num_attention_heads=12, intermediate_size=3072, image_size=224, patch_size=16, num_labels=1000),
    "tiny": dict(_BEIT, hidden_size=32, num_hidden_layers=1, num_attention_heads=2, intermediate_size=64, image_size=32, patch_size=8, num_labels=10),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("BeitConfig", "BeitForImageClassification", CONFIGS[size])
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("beit_base", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
