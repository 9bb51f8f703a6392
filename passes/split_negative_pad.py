"""split-negative-pad: `constant_pad_nd` with negative padding becomes a slice, then the padding.

A negative pad crops (F.pad(x, (-1, 2)) drops the first column, then adds two). torch-mlir lowers
it to a tensor.pad with negative offsets, which IREE rejects ("expected offsets to be
non-negative, but got -1"). The crop is a slice; what is left pads by non-negative amounts.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import constant_ints, dtype_of, shape_of, slice_, static_type, vtensor
from .torch_ir import int_list


def split_negative_pad(op: ir.OpView, rewriter: Rewriter) -> None:
    x, pads_value, fill = op.operands
    pads = constant_ints(pads_value)
    if static_type(x) is None or pads is None or min(pads, default=0) >= 0 or len(pads) % 2:
        return
    cropped = x
    shape = shape_of(x)
    for index in range(0, len(pads), 2):  # pads run from the last dim backwards: (left, right) each
        dim = len(shape) - 1 - index // 2
        before, after = pads[index], pads[index + 1]
        start, end = max(-before, 0), shape[dim] - max(-after, 0)
        if (start, end) != (0, shape[dim]):
            cropped = slice_(rewriter, cropped, dim, start, end)
    kept = [max(pad, 0) for pad in pads]
    if any(kept):
        padded_shape = list(shape_of(cropped))
        for index in range(0, len(kept), 2):
            padded_shape[len(shape) - 1 - index // 2] += kept[index] + kept[index + 1]
        result = vtensor(padded_shape, dtype_of(x))
        cropped = rewriter.create("torch.aten.constant_pad_nd", [cropped, int_list(rewriter, kept), fill], result)
    rewriter.replace(cropped)


PASS = pattern_pass(
    "split-negative-pad",
    "constant_pad_nd with negative pads -> slice (the crop), then pad by the rest",
    {"torch.aten.constant_pad_nd": split_negative_pad},
)
