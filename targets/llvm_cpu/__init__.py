"""The llvm-cpu room: everything kiln does for CPUs, in one folder.

- target.py: the Target (IREE flags, defaults, levers) and its choices for a compile;
- passes/: depthwise-to-nhwc, split-grouped-convs and conv-1d-as-2d, the passes only this target wants;
- kernels/: kiln's CPU kernels (AMX / AVX512-BF16 / AVX-512F GEMMs and convolutions, row kernels for
  softmax and layer norms, row programs), spliced into the linalg hand-off as a lever;
- tests/: this room's tests.
"""

from .target import TARGET

__all__ = ["TARGET"]
