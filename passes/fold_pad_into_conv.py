"""fold-pad-into-conv: zero padding before a convolution becomes the convolution's own padding.

TensorFlow's "same" padding, as transformers' MobileNet and EfficientNet write it, is an explicit
`F.pad` before each convolution of padding 0. IREE then materializes every padded activation (a
copy of it, larger) in a dispatch of its own before the convolution reads it; kiln's convolution
kernels, and IREE's own, handle padding inside the convolution, where reading past an edge costs
nothing. Folding applies where the result is the same convolution: a zero fill, padding only the
spatial dimensions, and per dimension either as much on both sides, or more after than before where
the convolution never reads the extra (its output size with the leading amount on both sides is
the one it has). A stride-2 layer padded (0, 1) reads its extra row, and keeps its pad.
"""

from __future__ import annotations

from dataclasses import dataclass

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_bool, constant_ints
from .torch_ir import int_list, number, producer, tensor_type

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INPUT, WEIGHT, STRIDE, PADDING, DILATION, TRANSPOSED = 0, 1, 3, 4, 5, 6


def fold_pad_into_conv(conv: ir.OpView, rewriter: Rewriter) -> None:
    pad = producer(conv.operands[INPUT], "torch.aten.constant_pad_nd")
    if pad is None or number(pad.operands[2]) != 0 or constant_bool(conv.operands[TRANSPOSED]) is not False:
        return
    source, weight, result = (tensor_type(value.type) for value in (pad.operands[0], conv.operands[WEIGHT], conv.result))
    pads = constant_ints(pad.operands[1])
    strides, padding, dilation = (constant_ints(conv.operands[index]) for index in (STRIDE, PADDING, DILATION))
    if source is None or weight is None or result is None or pads is None or strides is None or padding is None or dilation is None:
        return
    if not (source.static and weight.static and result.static):
        return
    shape = _Shapes(source.shape, weight.shape, result.shape)  # type: ignore[arg-type]  # static: checked above
    spatial = len(shape.weight) - 2
    folded = _folded_padding(pads, shape, _per_dim(strides, spatial), _per_dim(padding, spatial), _per_dim(dilation, spatial))
    if folded is None:
        return
    operands = [pad.operands[0], *conv.operands[1:PADDING], int_list(rewriter, folded), *conv.operands[PADDING + 1 :]]
    rewriter.replace(rewriter.create("torch.aten.convolution", operands, conv.result.type))


@dataclass(frozen=True)
class _Shapes:
    source: tuple[int, ...]  # the pad's input
    weight: tuple[int, ...]
    result: tuple[int, ...]


def _folded_padding(pads: list[int], shape: _Shapes, strides: list[int], padding: list[int], dilation: list[int]) -> list[int] | None:
    """The convolution's padding with the pad's folded in, or None where the result would differ.
    `pads` run from the last dimension backwards, (before, after) each; dimensions they leave out
    are not padded."""
    rank = len(shape.source)
    if len(pads) % 2 or len(pads) // 2 > rank or min(pads, default=0) < 0:
        return None
    amounts = [(0, 0)] * rank
    for index in range(0, len(pads), 2):
        amounts[rank - 1 - index // 2] = (pads[index], pads[index + 1])
    if amounts[0] != (0, 0) or amounts[1] != (0, 0):
        return None  # batch or channels padded: no convolution's padding
    folded = []
    for dim in range(len(shape.weight) - 2):
        (before, after), size = amounts[2 + dim], shape.source[2 + dim]
        total = padding[dim] + before
        reach = dilation[dim] * (shape.weight[2 + dim] - 1)
        if after < before or (size + 2 * total - reach - 1) // strides[dim] + 1 != shape.result[2 + dim]:
            return None
        folded.append(total)
    return folded


def _per_dim(values: list[int], spatial: int) -> list[int]:
    return values * spatial if len(values) == 1 else values


PASS = pattern_pass(
    "fold-pad-into-conv",
    "zero constant_pad_nd of the spatial dims, then a convolution -> the convolution with that padding",
    {"torch.aten.convolution": fold_pad_into_conv},
)
