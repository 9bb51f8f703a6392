"""split-spatial-sum: a sum over a feature map's height and width becomes a sum over its width, then one over its height.

Squeeze-excitation (EfficientNet, MobileNetV3, RegNetY) averages an activation over all of its
pixels while other ops read the activation too. IREE 3.13's GPU dispatch creation then fuses the
activation's producer into the reduction as a second result, and its reduction codegen unrolls that
result along the whole row: EfficientNet-B0 at batch 1, rows of 112 x 112 = 12544 pixels, made a
70 MB dispatch, a 236 s compile and an artifact whose PTX the driver did not finish loading in 10
minutes. Summed over the width first, the rows are as long as the width (112), and a second, small
reduction sums those partial sums over the height: the same sum in another order (for 16-bit
inputs the partial sums are rounded once more, a width's worth of values each).

Only where the rows are long (SPLIT_FROM pixels): a network's final pooling over 7 x 7 keeps its
one reduction. The GPU rooms place this pass (targets/gpu.py); the CPU backend compiles such
reductions well as they are.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool, constant_ints, reduce, static_type
from .torch_ir import bool_constant, int_list, vtensor

# Rows of at least this many pixels are split. Measured on cuda (EfficientNet-B0, batch 1): 12544
# (112 x 112) blew up as above; 3136 (56 x 56) compiled, in dispatches of 17 MB of IR each.
SPLIT_FROM = 1024


def split_spatial_sum(op: ir.OpView, rewriter: Rewriter) -> None:
    x, dims, keepdim, dtype = op.operands
    source, reduced, keep = static_type(x), constant_ints(dims), constant_bool(keepdim)
    if source is None or reduced is None or keep is None or len(source.shape) < 3:
        return
    rank = len(source.shape)
    height, width = source.shape[-2], source.shape[-1]
    assert height is not None and width is not None  # static: checked above
    if sorted(dim % rank for dim in reduced) != [rank - 2, rank - 1] or height == 1 or width == 1 or height * width < SPLIT_FROM:
        return
    result = static_type(op.result)
    assert result is not None  # a static input gives a static result
    partial_shape = [*source.shape[:-1], 1]
    partial = rewriter.create(
        "torch.aten.sum.dim_IntList",
        [x, int_list(rewriter, [rank - 1]), bool_constant(rewriter, True), dtype],
        vtensor(partial_shape, result.dtype),
    )
    rewriter.replace(reduce(rewriter, "torch.aten.sum.dim_IntList", partial, [rank - 2, rank - 1], keep))


PASS = pattern_pass(
    "split-spatial-sum",
    f"sum over the last two dims of >= {SPLIT_FROM} elements -> a sum over the last dim, then over the one before",
    {"torch.aten.sum.dim_IntList": split_spatial_sum},
)
