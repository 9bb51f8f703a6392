"""fold-transpose-chain: a transpose of a transpose becomes one permute, or nothing.

Matches `aten.permute` or `aten.transpose.int` whose input is itself a permute or transpose
(constant dims, known rank). The two permutations are composed: when they cancel, the result is
the inner input; otherwise one `aten.permute` with the composed permutation. Data movement only,
so exact.
"""

from __future__ import annotations

from torch_mlir import ir

from .pass_api import Rewriter, pattern_pass
from .torch_ir import int_list, number, producer, tensor_type

TRANSPOSES = ("torch.aten.permute", "torch.aten.transpose.int")


def fold_transpose_chain(outer: ir.OpView, rewriter: Rewriter) -> None:
    inner = producer(outer.operands[0], *TRANSPOSES)
    if inner is None:
        return
    x = inner.operands[0]
    inner_permutation, outer_permutation = _permutation(inner), _permutation(outer.operation)
    if inner_permutation is None or outer_permutation is None:
        return
    # permute(permute(x, p), q) has dimension i from dimension p[q[i]] of x.
    composed = [inner_permutation[index] for index in outer_permutation]
    if composed == sorted(composed) and x.type == outer.result.type:
        rewriter.replace(x)
        return
    rewriter.replace(rewriter.create("torch.aten.permute", [x, int_list(rewriter, composed)], outer.result.type))


def _permutation(op: ir.Operation) -> list[int] | None:
    """The permutation a permute or transpose applies, dims made non-negative; None if not constant."""
    described = tensor_type(op.operands[0].type)
    if described is None or not described.shape:
        return None
    rank = len(described.shape)
    if op.name == "torch.aten.transpose.int":
        dims = [number(op.operands[1]), number(op.operands[2])]
    else:
        listed = producer(op.operands[1], "torch.prim.ListConstruct")
        dims = [number(item) for item in listed.operands] if listed is not None else [None]
    if any(not isinstance(dim, int) for dim in dims):
        return None
    dims = [dim % rank for dim in dims]  # type: ignore[operator]
    if op.name == "torch.aten.transpose.int":
        permutation = list(range(rank))
        permutation[dims[0]], permutation[dims[1]] = dims[1], dims[0]
        return permutation
    return dims


PASS = pattern_pass(
    "fold-transpose-chain",
    "transpose(transpose(x)) -> x, or one permute when they do not cancel",
    dict.fromkeys(TRANSPOSES, fold_transpose_chain),
)
