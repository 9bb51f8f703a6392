"""fold-relu-relu: `relu(relu(x))` becomes `relu(x)`.

relu is idempotent, so the outer one does nothing. (The README's example of a new pass.)
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Pass, PassRun, Rewriter, apply_patterns
from .torch_ir import producer


def fold_relu_relu(outer: ir.OpView, rewriter: Rewriter) -> None:
    inner = producer(outer.operands[0], "torch.aten.relu")
    if inner is None or inner.result.type != outer.result.type:
        return
    rewriter.replace(inner.result)


def run(module: ir.Operation, pass_run: PassRun) -> None:
    apply_patterns(module, {"torch.aten.relu": fold_relu_relu})


FOLD_RELU_RELU = Pass(name="fold-relu-relu", summary="relu(relu(x)) -> relu(x)", level="torch", run=run)
