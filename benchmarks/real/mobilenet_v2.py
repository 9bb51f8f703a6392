"""MobileNetV2 1.0 (Sandler et al. 2018) as google/mobilenet_v2_1.0_224 publishes it: transformers' MobileNetV2ForImageClassification.

3.5M parameters, 224x224 images, 1001 classes (ImageNet and a background class); inverted residuals
with 3x3 depthwise convolutions, ReLU6, TensorFlow padding (computed in forward). Config written out
below; weights by name (_weights.py), LeCun-scaled, batch norm with trained-looking statistics.
Tiny (the CI slice): depth multiplier 0.25, 32x32 images (every block kept: its layout is fixed).
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
_V2 = dict(  # google/mobilenet_v2_1.0_224
    num_channels=3, depth_divisible_by=8, min_depth=8, expand_ratio=6.0, output_stride=32,
    first_layer_is_expansion=True, finegrained_output=True, hidden_act="relu6", tf_padding=True,
    classifier_dropout_prob=0.2, layer_norm_eps=0.001,
)
CONFIGS = {
    "full": dict(_V2, image_size=224, depth_multiplier=1.0, num_labels=1001),
    "tiny": dict(_V2, image_size=32, depth_multiplier=0.25, num_labels=10),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("MobileNetV2Config", "MobileNetV2ForImageClassification", CONFIGS[size], fan_in=True)
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("mobilenet_v2", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
