"""accumulate-half-sums: a sum of f16 or bf16 values accumulates in f32 and is rounded once, as PyTorch's.

PyTorch sums 16-bit tensors in f32 (its opmath type) and rounds the total. torch-mlir lowers
`sum.dim_IntList` and `sum` of a 16-bit tensor with a 16-bit accumulator, so every partial sum is
rounded: the error grows with the count and depends on the order IREE picks. A bf16 `mean` is such
a sum (torch-mlir decomposes it into one and a division): ConvNeXt-T's pooling over 7 x 7 took its
logits from 5.4e-3 to 8.8e-3 rel. L2 from the f32 model when only the layout of the values it sums
changed, against eager bf16's 6.1e-3. Sums with an explicit `dtype` are left as they are.
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
    if producer(arguments[-1], "torch.constant.none") is None:  # the dtype argument
        return
    total = rewriter.create(op.name, [to_dtype(rewriter, x, "f32"), *arguments], vtensor(result.shape, "f32"))
    rewriter.replace(to_dtype(rewriter, total, source.dtype))


PASS = pattern_pass(
    "accumulate-half-sums",
    "sum of f16/bf16 x -> sum of x in f32, rounded to x's type",
    {"torch.aten.sum.dim_IntList": accumulate_in_f32, "torch.aten.sum": accumulate_in_f32},
)
