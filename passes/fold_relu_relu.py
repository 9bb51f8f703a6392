"""fold-relu-relu: `relu(relu(x))` becomes `relu(x)`.

relu is idempotent, so the outer one does nothing. (docs/passes.md's example of a new pass.)
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import producer


def fold_relu_relu(outer: ir.OpView, rewriter: Rewriter) -> None:
    inner = producer(outer.operands[0], "torch.aten.relu")
    if inner is None or inner.result.type != outer.result.type:
        return
    rewriter.replace(inner.result)


PASS = pattern_pass("fold-relu-relu", "relu(relu(x)) -> relu(x)", {"torch.aten.relu": fold_relu_relu})
