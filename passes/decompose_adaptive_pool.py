"""decompose-adaptive-pool: a 3-D adaptive average pool whose output divides its input becomes
`avg_pool3d`.

When every input size is a multiple of its output size, adaptive pooling averages disjoint
windows of input / output elements: an avg_pool3d with that kernel and stride. torch-mlir keeps
`_adaptive_avg_pool3d` whole (for 1-D and 2-D its backend contract already does this), outside
kiln's primitive set. Other sizes have windows of varying size and stay (check-primitives names
them).
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_ints, shape_of, static_type
from .torch_ir import bool_constant, int_list, none_constant


def decompose_adaptive_avg_pool3d(op: ir.OpView, rewriter: Rewriter) -> None:
    x, output_value = op.operands
    outputs = constant_ints(output_value)
    if static_type(x) is None or outputs is None or len(outputs) != 3:
        return
    inputs = shape_of(x)[-3:]
    if any(output < 1 or size % output for size, output in zip(inputs, outputs, strict=True)):
        return
    window = [size // output for size, output in zip(inputs, outputs, strict=True)]
    operands = [
        x,
        int_list(rewriter, window),  # kernel
        int_list(rewriter, window),  # stride
        int_list(rewriter, [0, 0, 0]),  # padding
        bool_constant(rewriter, False),  # ceil_mode
        bool_constant(rewriter, True),  # count_include_pad (there is no padding)
        none_constant(rewriter),  # divisor_override
    ]
    rewriter.replace(rewriter.create("torch.aten.avg_pool3d", operands, op.result.type))


PASS = pattern_pass(
    "decompose-adaptive-pool",
    "_adaptive_avg_pool3d with output dividing input -> avg_pool3d (kernel = stride = in / out)",
    {"torch.aten._adaptive_avg_pool3d": decompose_adaptive_avg_pool3d},
)
