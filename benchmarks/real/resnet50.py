"""ResNet-50 (He et al. 2015) as microsoft/resnet-50 publishes it: transformers' ResNetForImageClassification.

25.6M parameters, 224x224 images, 1000 classes; bottleneck blocks [3, 4, 6, 3] of widths 256-2048.
The config is written out below (nothing is downloaded); weights by name (_weights.py), He-scaled,
batch norm with trained-looking statistics. Tiny (the CI slice): two stages of one bottleneck each,
32x32 images. Default for `kiln compile`: f32, batch 1.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
CONFIGS = {
    "full": dict(  # microsoft/resnet-50
        num_channels=3, embedding_size=64, hidden_sizes=[256, 512, 1024, 2048], depths=[3, 4, 6, 3],
        layer_type="bottleneck", hidden_act="relu", downsample_in_first_stage=False, num_labels=1000,
    ),
    "tiny": dict(
        num_channels=3, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1],
        layer_type="bottleneck", hidden_act="relu", downsample_in_first_stage=False, num_labels=10,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("ResNetConfig", "ResNetForImageClassification", CONFIGS[size], fan_in=True)
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("resnet50", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
