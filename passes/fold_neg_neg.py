"""fold-neg-neg: `neg(neg(x))` becomes `x`.

Exact for every input: negation only flips the sign bit.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import producer


def fold_neg_neg(outer: ir.OpView, rewriter: Rewriter) -> None:
    inner = producer(outer.operands[0], "torch.aten.neg")
    if inner is None or inner.operands[0].type != outer.result.type:
        return
    rewriter.replace(inner.operands[0])


PASS = pattern_pass("fold-neg-neg", "neg(neg(x)) -> x", {"torch.aten.neg": fold_neg_neg})
