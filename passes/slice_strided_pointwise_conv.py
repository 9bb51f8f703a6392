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

from .pass_api import NO_MATCH, Pass, PassRun, Rewriter, apply_patterns
from .torch_ir import int_constant, int_list, number, producer, tensor_type

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INPUT, WEIGHT, STRIDE, PADDING, TRANSPOSED = 0, 1, 3, 4, 6


def slice_strided_pointwise_conv(conv: ir.OpView, rewriter: Rewriter) -> bool | None:
    x = conv.operands[INPUT]
    source, weight = tensor_type(x.type), tensor_type(conv.operands[WEIGHT].type)
    strides, padding = _ints(conv.operands[STRIDE]), _ints(conv.operands[PADDING])
    transposed = producer(conv.operands[TRANSPOSED], "torch.constant.bool")
    if source is None or weight is None or strides is None or padding is None or transposed is None:
        return NO_MATCH
    spatial = len(weight.shape) - 2
    if (
        transposed.attributes["value"].value
        or any(size != 1 for size in weight.shape[2:])
        or any(padding)
        or len(strides) != spatial
        or all(stride == 1 for stride in strides)
        or any(size is None for size in source.shape[2:])
    ):
        return NO_MATCH
    for axis, stride in enumerate(strides, start=2):
        if stride == 1:
            continue
        x = _strided_slice(rewriter, x, axis, stride)
    unit_strides = int_list(rewriter, [1] * spatial)
    operands = [x, *conv.operands[1:STRIDE], unit_strides, *conv.operands[STRIDE + 1 :]]
    rewriter.replace(rewriter.create("torch.aten.convolution", operands, conv.result.type))
    return None


def _ints(value: ir.Value) -> list[int] | None:
    """The items of a `torch.prim.ListConstruct` of int constants; None if any is not constant."""
    listed = producer(value, "torch.prim.ListConstruct")
    items = [number(item) for item in listed.operands] if listed is not None else [None]
    return items if all(isinstance(item, int) for item in items) else None  # type: ignore[return-value]


def _strided_slice(rewriter: Rewriter, x: ir.Value, axis: int, step: int) -> ir.Value:
    """`x` sliced along `axis` with `step`, from 0 to the end: ceil(size / step) elements."""
    described = tensor_type(x.type)
    assert described is not None and described.shape[axis] is not None
    size = described.shape[axis]
    shape = [*described.shape[:axis], -(-size // step), *described.shape[axis + 1 :]]
    sizes = ",".join("?" if dim is None else str(dim) for dim in shape)
    result_type = ir.Type.parse(f"!torch.vtensor<[{sizes}],{described.dtype}>")
    operands = [x, int_constant(rewriter, axis), int_constant(rewriter, 0), int_constant(rewriter, size), int_constant(rewriter, step)]
    return rewriter.create("torch.aten.slice.Tensor", operands, result_type)


def run(module: ir.Operation, pass_run: PassRun) -> None:
    apply_patterns(module, {"torch.aten.convolution": slice_strided_pointwise_conv})


SLICE_STRIDED_POINTWISE_CONV = Pass(
    name="slice-strided-pointwise-conv",
    summary="strided 1x1 convolution -> strided slice, then a stride-1 1x1 convolution",
    level="torch",
    run=run,
)
