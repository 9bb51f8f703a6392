"""slice-strided-pointwise-conv: a strided 1x1 convolution becomes a strided slice, then a 1x1 convolution.

A convolution whose kernel is 1 in every spatial dimension, without padding, reads only every
s-th pixel along a dimension of stride s: slicing those pixels out first (`x[..., ::s, ::s]`) and
convolving with stride 1 computes exactly the same sums. It matters for IREE 3.13's CUDA backend:
when the stride is left in the convolution and the convolution's input comes from another
dispatch, IREE folds the stride into the generic op's indexing map (`d1 * 2`), the dispatch is
classified as a reduction, and its result is wrong (ResNet-50's downsampling shortcuts: logits
off by 0.71 relative L2 on an H200; with this rewrite the stride becomes a strided load and a
plain matmul-like dispatch). The result is exact on every target.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool, constant_ints, slice_
from .torch_ir import int_list, tensor_type

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INPUT, WEIGHT, STRIDE, PADDING, TRANSPOSED = 0, 1, 3, 4, 6


def slice_strided_pointwise_conv(conv: ir.OpView, rewriter: Rewriter) -> None:
    x = conv.operands[INPUT]
    source, weight = tensor_type(x.type), tensor_type(conv.operands[WEIGHT].type)
    strides, padding = constant_ints(conv.operands[STRIDE]), constant_ints(conv.operands[PADDING])
    transposed = constant_bool(conv.operands[TRANSPOSED])
    if source is None or weight is None or strides is None or padding is None or transposed is None:
        return
    spatial = len(weight.shape) - 2
    if (
        transposed
        or any(size != 1 for size in weight.shape[2:])
        or any(padding)
        or len(strides) != spatial
        or all(stride == 1 for stride in strides)
        or any(size is None for size in source.shape[2:])
    ):
        return
    for axis, (size, stride) in enumerate(zip(source.shape[2:], strides, strict=True), start=2):
        if stride != 1:
            x = slice_(rewriter, x, axis, 0, size, stride)  # type: ignore[arg-type]  # static: checked above
    unit_strides = int_list(rewriter, [1] * spatial)
    operands = [x, *conv.operands[1:STRIDE], unit_strides, *conv.operands[STRIDE + 1 :]]
    rewriter.replace(rewriter.create("torch.aten.convolution", operands, conv.result.type))


PASS = pattern_pass(
    "slice-strided-pointwise-conv",
    "strided 1x1 convolution -> strided slice, then a stride-1 1x1 convolution",
    {"torch.aten.convolution": slice_strided_pointwise_conv},
)
