"""RegNetY-4.0GF (Radosavovic et al. 2020) as facebook/regnet-y-040 publishes it: transformers' RegNetForImageClassification.

20.6M parameters, 224x224 images, 1000 classes; stages [2, 6, 12, 2] of widths 128-1088, grouped
3x3 convolutions of group width 64, squeeze-excitation. Config written out below; weights by name
(_weights.py), LeCun-scaled, batch norm with trained-looking statistics. Tiny (the CI slice): two
stages of one block, widths 16 and 32, group width 8, 32x32 images.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
CONFIGS = {
    "full": dict(  # facebook/regnet-y-040
        num_channels=3, embedding_size=32, hidden_sizes=[128, 192, 512, 1088], depths=[2, 6, 12, 2], groups_width=64,
        layer_type="y", hidden_act="relu", downsample_in_first_stage=True, num_labels=1000,
    ),
    "tiny": dict(
        num_channels=3, embedding_size=8, hidden_sizes=[16, 32], depths=[1, 1], groups_width=8, layer_type="y",
        hidden_act="relu", downsample_in_first_stage=True, num_labels=10,
    ),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("RegNetConfig", "RegNetForImageClassification", CONFIGS[size], fan_in=True)
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("regnet_y_040", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
