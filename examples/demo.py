"""Load a compiled MLP artifact from Python and compare it with eager PyTorch.

    python examples/demo.py build/mlp.vmfb
"""

import sys

import torch

import kiln

sys.path.insert(0, "examples")
from mlp import model

artifact = kiln.load(sys.argv[1] if len(sys.argv) > 1 else "build/mlp.vmfb")
x = torch.randn(8, 64)
y = artifact(x)
with torch.no_grad():
    expected = model(x)
print(f"kiln.load: output {tuple(y.shape)} {y.dtype}, max abs error vs eager {float((y - expected).abs().max()):.3g}")
