"""accumulate-in-f32: a sum, cumulative sum or product of f16 or bf16 values accumulates in f32 and
is rounded once, as PyTorch's.

PyTorch accumulates 16-bit tensors in f32 (its opmath type) and rounds each result once. torch-mlir
lowers `sum`, `cumsum` and `prod` of a 16-bit tensor with a 16-bit accumulator, so every partial
result is rounded: the error grows with the count and depends on the order IREE picks. A bf16 `mean`
is such a sum (torch-mlir decomposes it into one and a division): ConvNeXt-T's pooling over 7 x 7
took its logits from 5.4e-3 to 8.8e-3 rel. L2 from the f32 model when only the layout of the values
it sums changed, against eager bf16's 6.1e-3; a bf16 cumsum of 64 integers was 4 ulps off. Ops with
an explicit `dtype` are left as they are.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_build import static_type
from .torch_ir import HALF_TYPES, producer, to_dtype, vtensor


def accumulate_in_f32(op: ir.OpView, rewriter: Rewriter) -> None:
    x, *arguments = op.operands
    source, result = static_type(x), static_type(op.result)
    if source is None or result is None or source.dtype not in HALF_TYPES or result.dtype != source.dtype:
        return
    if producer(arguments[-1], "torch.constant.none") is None:  # the dtype argument, last in each
        return
    total = rewriter.create(op.name, [to_dtype(rewriter, x, "f32"), *arguments], vtensor(result.shape, "f32"))
    rewriter.replace(to_dtype(rewriter, total, source.dtype))


ACCUMULATIONS = ("torch.aten.sum.dim_IntList", "torch.aten.sum", "torch.aten.cumsum", "torch.aten.prod.dim_int", "torch.aten.prod")

PASS = pattern_pass(
    "accumulate-in-f32",
    "sum/cumsum/prod of f16/bf16 x -> the same of x in f32, rounded to x's type",
    dict.fromkeys(ACCUMULATIONS, accumulate_in_f32),
)
