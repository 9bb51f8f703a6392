"""fold-reshape-chain: a chain of reshapes becomes one `aten.view`, or nothing.

A reshape is any op that only regroups dimensions: view, reshape, _unsafe_view, unsqueeze,
squeeze, squeeze.dim, flatten.using_ints, unflatten.int. A reshape of a reshape becomes one
`aten.view` of the first input to the last shape; a reshape to the shape its input already has
becomes that input. Both need a static shape: a `?` says nothing about the size behind it. Data
movement only, so exact.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import RESHAPES, int_list, producer, same_type, tensor_type


def fold_reshape_chain(outer: ir.OpView, rewriter: Rewriter) -> None:
    x = outer.operands[0]
    if same_type(x, outer.result):
        rewriter.replace(x)
        return
    inner = producer(x, *RESHAPES)
    result = tensor_type(outer.result.type)
    if inner is None or result is None or not result.static:
        return
    first_input = inner.operands[0]
    if same_type(first_input, outer.result):
        rewriter.replace(first_input)
        return
    shape = int_list(rewriter, list(result.shape))  # type: ignore[arg-type]
    rewriter.replace(rewriter.create("torch.aten.view", [first_input, shape], outer.result.type))


PASS = pattern_pass(
    "fold-reshape-chain",
    "reshape(reshape(x)) -> one view of x, or x when the shapes match",
    dict.fromkeys(RESHAPES, fold_reshape_chain),
)
