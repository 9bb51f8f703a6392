"""MobileNetV3-Large 1.0 (Howard et al. 2019) as timm's mobilenetv3_large_100: transformers has no MobileNetV3.

5.5M parameters, 224x224 images, 1000 classes; inverted residuals with 3x3 and 5x5 depthwise
convolutions, squeeze-excitation with hard sigmoid, hard swish. Needs timm (REQUIRES): the suite
and tests/test_real_models.py skip this file where timm is missing (.venv has none; `make models`
builds .venv-models, which has it). timm's own architecture definition, no weights downloaded;
weights by name (_weights.py), LeCun-scaled, batch norm with trained-looking statistics. Tiny (the
CI slice): timm's mobilenetv3_small_050 (the same block types at half width, fewer blocks), 32x32.
"""

import sys
from pathlib import Path

if (_here := str(Path(__file__).resolve().parent)) not in sys.path:
    sys.path.insert(0, _here)  # _common.py and _weights.py live beside this file

from _common import DTYPES, batch_of, finish, pixels
from _weights import set_weights

REQUIRES = ("timm",)
BATCHES = {"latency": 1, "throughput": 32}
IMAGE = {"full": 224, "tiny": 32}
ARCHITECTURES = {"full": ("mobilenetv3_large_100", 1000), "tiny": ("mobilenetv3_small_050", 10)}  # (timm name, classes)
__all__ = ["BATCHES", "DTYPES", "REQUIRES", "get_example_inputs", "get_model"]


def get_model(dtype: str = "f32", size: str = "full"):
    from kiln.conformance.families import import_torchvision

    import_torchvision()  # timm imports torchvision, whose PyPI build cannot load its C++ ops beside torch's CPU wheel
    import timm

    name, classes = ARCHITECTURES[size]
    model = timm.create_model(name, pretrained=False, num_classes=classes)
    return finish(set_weights(model, fan_in=True), dtype)


def get_example_inputs(batch: str = "latency", dtype: str = "f32", size: str = "full"):
    return (pixels("mobilenet_v3_large", batch_of(BATCHES, batch, size), IMAGE[size], dtype),)
