"""The cuda room: everything kiln does for NVIDIA GPUs, in one folder.

- target.py: the Target (architectures, sm_90a's description, f32 contraction precision) and its
  choices for a compile;
- passes/: outline-contractions and outline-row-programs (what kiln's kernels take, on sm_90a),
  pointwise-conv-to-mm (a workaround for IREE's 16-bit 1x1 convolutions);
- kernels/: kiln's Triton kernels (matmul, convolution, depthwise, pooling, attention, row programs),
  compiled here to sm_90a PTX and spliced into iree-compile's input;
- tests/: this room's tests.
"""

from .target import TARGET

__all__ = ["TARGET"]
