"""ConvNeXt-T (Liu et al. 2022) as facebook/convnext-tiny-224 publishes it: transformers' ConvNextForImageClassification.

28.6M parameters, 224x224 images, 1000 classes; stages [3, 3, 9, 3] of widths 96-768, 7x7 depthwise
convolutions, channels-first layer norms, GELU, layer scale. Config written out below; weights by
name (_weights.py). Tiny (the CI slice): two stages of one block, widths 16 and 32, 32x32 images.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
CONFIGS = {
    "full": dict(  # facebook/convnext-tiny-224
        num_channels=3, patch_size=4, num_stages=4, hidden_sizes=[96, 192, 384, 768], depths=[3, 3, 9, 3],
        hidden_act="gelu", layer_norm_eps=1e-12, layer_scale_init_value=1e-6, drop_path_rate=0.0, image_size=224,
        num_labels=1000,
    ),
    "tiny": dict(
        num_channels=3, patch_size=4, num_stages=2, hidden_sizes=[16, 32], depths=[1, 1], hidden_act="gelu",
        layer_norm_eps=1e-12, layer_scale_init_value=1e-6, image_size=32, num_labels=10,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("ConvNextConfig", "ConvNextForImageClassification", CONFIGS[size])
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("convnext_tiny", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
