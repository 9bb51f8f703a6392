"""Swin-T (Liu et al. 2021) as microsoft/swin-tiny-patch4-window7-224 publishes it: transformers' SwinForImageClassification.

28.3M parameters, 224x224 images in 4x4 patches, stages [2, 2, 6, 2] of widths 96-768 and heads
[3, 6, 12, 24], attention in 7x7 windows, shifted in every second block, with a relative position
bias table, patch merging between stages, 1000 classes. Config written out below; weights by name
(_weights.py). Tiny (the CI slice): a stage of two blocks (the second's windows shifted), patch
merging, a stage of one block, width 16, 2x2 windows, 32x32 images.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
CONFIGS = {
    "full": dict(  # microsoft/swin-tiny-patch4-window7-224
        image_size=224, patch_size=4, num_channels=3, embed_dim=96, depths=[2, 2, 6, 2], num_heads=[3, 6, 12, 24],
        window_size=7, mlp_ratio=4.0, qkv_bias=True, hidden_act="gelu", layer_norm_eps=1e-5, drop_path_rate=0.1,
        num_labels=1000,
    ),
    "tiny": dict(
        image_size=32, patch_size=4, num_channels=3, embed_dim=16, depths=[2, 1], num_heads=[2, 4], window_size=2,
        mlp_ratio=2.0, qkv_bias=True, hidden_act="gelu", layer_norm_eps=1e-5, num_labels=10,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("SwinConfig", "SwinForImageClassification", CONFIGS[size])
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("swin_tiny", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
