"""EfficientNet-B0 (Tan & Le 2019) as google/efficientnet-b0 publishes it: transformers' EfficientNetForImageClassification.

5.3M parameters, 224x224 images, 1000 classes; MBConv blocks with depthwise convolutions (TensorFlow
"same" padding), squeeze-excitation and swish. Config written out below (transformers' defaults are
B7's); weights by name (_weights.py), LeCun-scaled, batch norm with trained-looking statistics.
Tiny (the CI slice): width 0.25, three of the seven stages (3x3 and 5x5 kernels, strides 1 and 2,
one residual block), 32x32 images.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, Outputs, batch_of, build, finish, pixels

BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
_B0 = dict(  # google/efficientnet-b0
    num_channels=3, depth_divisor=8, kernel_sizes=[3, 3, 5, 3, 5, 5, 3], in_channels=[32, 16, 24, 40, 80, 112, 192],
    out_channels=[16, 24, 40, 80, 112, 192, 320], depthwise_padding=[], strides=[1, 2, 2, 2, 1, 2, 1],
    num_block_repeats=[1, 2, 2, 3, 3, 4, 1], expand_ratios=[1, 6, 6, 6, 6, 6, 6], squeeze_expansion_ratio=0.25,
    hidden_act="swish", pooling_type="mean", batch_norm_eps=1e-3, batch_norm_momentum=0.99, drop_connect_rate=0.2,
)
_TINY = dict(  # three of B0's stages: a 3x3 and a 5x5 kernel, stride 1 and 2, expansion 1 and 6, a residual block
    kernel_sizes=[3, 3, 5], in_channels=[32, 16, 24], out_channels=[16, 24, 40], strides=[1, 2, 2],
    num_block_repeats=[1, 2, 1], expand_ratios=[1, 6, 6],
)
CONFIGS = {
    "full": dict(_B0, image_size=224, width_coefficient=1.0, depth_coefficient=1.0, hidden_dim=1280, dropout_rate=0.2, num_labels=1000),
    "tiny": dict(_B0, **_TINY, image_size=32, width_coefficient=0.25, depth_coefficient=1.0, hidden_dim=320, num_labels=10),
}  # fmt: skip
__all__ = ["BATCHES", "DTYPES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    model = build("EfficientNetConfig", "EfficientNetForImageClassification", CONFIGS[size], fan_in=True)
    return finish(Outputs(model, ["pixel_values"], ["logits"]), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("efficientnet_b0", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
