"""heads-last-attention-inputs: the elementwise ops between a head transpose and attention run before it.

A decoder writes `q = rotary(q_proj(x).view(b, s, h, d).transpose(1, 2))`: the transpose to
[batch, heads, seq, dim] comes first, the rotary embedding (and rotate_half's slices and
concatenation, Phi's gather) after, and attention last. kiln's attention kernel reads [batch, seq,
heads, dim] directly when every input arrives as such a transpose (outline-contractions "peels" it),
but here the rotary stands between: IREE then fuses the transpose into the rotary's dispatch, and
transposes V, which could have been read as it is, in a dispatch of its own (Qwen2.5-0.5B at batch
8: V's and K's transposing dispatches 0.18 ms of an 11.3 ms call; Q's rotary, at about 0.8 TB/s, is
as slow without the transpose as with it).

This pass rewrites the ops between the transpose and attention in the [b, s, h, d] layout: for each
attention input (or the key/value tensor that repeat_kv repeats), it follows elementwise ops (add, sub,
mul, div, neg, where, dtype casts), slices, concatenations and index selections back to transposes by
[0, 2, 1, 3]; their small broadcast operands (cos and sin tables, masks) are transposed instead, and
each op is cloned with the dim it works along moved. The attention input becomes one transpose of the
rewritten result, which outline-contractions peels. Where any leaf is not such a transpose (or a
broadcast operand is not smaller than the result), nothing changes. Data movement only: exact.

The cuda room places it just before outline-contractions, where kiln's attention kernel applies.
"""

from __future__ import annotations

import math

from torch_mlir import ir

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_build import constant_ints, static_type
from kiln.passes.torch_ir import defining_op, number, tensor_type, vtensor

from .outline_contractions import HEADS_FORWARD, Builder, erase_with_unused_producers, shared_heads

ATTENTION = "torch.aten.scaled_dot_product_attention"
ELEMENTWISE = (
    "torch.aten.add.Tensor", "torch.aten.sub.Tensor", "torch.aten.mul.Tensor", "torch.aten.div.Tensor",
    "torch.aten.add.Scalar", "torch.aten.sub.Scalar", "torch.aten.mul.Scalar", "torch.aten.div.Scalar",
    "torch.aten.neg", "torch.aten.where.self", "torch.aten.to.dtype",
)  # fmt: skip
ALONG_DIM = {"torch.aten.slice.Tensor": 1, "torch.aten.index_select": 1}  # op -> the position of its dim operand


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for attention in ops_named(module, [ATTENTION]):
        for index in range(3):
            value = attention.operands[index]
            shared = shared_heads(value) if index else None
            if shared is None:
                _rewrite(value, attention)
            else:  # repeat_kv's source, the heads it repeats, read by its unsqueeze
                unsqueeze = defining_op(defining_op(defining_op(value).operands[0]).operands[0])  # type: ignore[union-attr]
                _rewrite(shared[0], unsqueeze)  # type: ignore[arg-type]


def _rewrite(target: ir.Value, user: ir.Operation) -> None:
    """Replace `target`'s use by `user` with a head transpose of the same ops computed heads last."""
    cone: list[ir.Operation] = []
    leaves: list[ir.Operation] = []
    if _heads_first_transpose(target) is not None or not _collect(target, cone, leaves):
        return  # already peelable, or not only elementwise ops over transposes
    with ir.InsertionPoint(user), user.location:
        build = Builder()
        moved = build.permute(_heads_last(target, build, {}), HEADS_FORWARD)
    for position, operand in enumerate(user.operands):
        if operand == target:
            user.operands[position] = moved
    for op in reversed(cone):  # users first; what other ops still read stays
        if all(not list(result.uses) for result in op.results):
            op.erase()
    for leaf in leaves:
        if all(not list(result.uses) for result in leaf.results):
            erase_with_unused_producers(leaf)


def _collect(value: ir.Value, cone: list[ir.Operation], leaves: list[ir.Operation]) -> bool:
    """Whether `value` is elementwise ops, moves along one dim and head transposes over [b, h, s, d]
    (every other tensor operand small and broadcast): its ops in `cone` (producers first) and its
    transposes in `leaves`."""
    op = defining_op(value)
    if op is None or op in cone or op in leaves:
        return op is not None
    if _heads_first_transpose(value) is not None:
        leaves.append(op)
        return True
    result = static_type(value)
    if result is None or len(result.shape) != 4 or op.name not in (*ELEMENTWISE, *ALONG_DIM, "torch.aten.cat"):
        return False
    if op.name == "torch.aten.cat":
        parts = defining_op(op.operands[0])
        if parts is None or parts.name != "torch.prim.ListConstruct" or not isinstance(number(op.operands[1]), int):
            return False
        operands = list(parts.operands)
    elif op.name in ALONG_DIM:
        if not isinstance(number(op.operands[ALONG_DIM[op.name]]), int):
            return False
        operands = [op.operands[0]]  # the tensor moved; index_select's indices are a vector, in no layout
    else:
        operands = [operand for operand in op.operands if tensor_type(operand.type) is not None]
    for operand in operands:
        described = static_type(operand)
        if described is None:
            return False
        if tuple(described.shape) == tuple(result.shape) or op.name in (*ALONG_DIM, "torch.aten.cat"):
            if not _collect(operand, cone, leaves):
                return False
        elif not _small_broadcast(described.shape, result.shape):
            return False
    if op.name == "torch.aten.cat":
        cone.append(defining_op(op.operands[0]))  # type: ignore[arg-type]  # its list of parts
    cone.append(op)
    return True


def _heads_last(value: ir.Value, build: Builder, done: dict) -> ir.Value:
    """`value` computed in [b, s, h, d] (the cone _collect accepted)."""
    if value in done:
        return done[value]
    transpose = _heads_first_transpose(value)
    if transpose is not None:
        return transpose
    op = defining_op(value)
    assert op is not None
    result = static_type(value)
    assert result is not None
    if op.name == "torch.aten.cat":
        parts = [_heads_last(part, build, done) for part in defining_op(op.operands[0]).operands]  # type: ignore[union-attr]
        listed = build.op("torch.prim.ListConstruct", parts, ir.Type.parse("!torch.list<vtensor>"))
        operands = [listed, build.int_(_moved(number(op.operands[1]), 4))]  # type: ignore[arg-type]
    else:
        operands = []
        for position, operand in enumerate(op.operands):
            described = static_type(operand)
            if op.name in ALONG_DIM and position == ALONG_DIM[op.name]:
                operands.append(build.int_(_moved(number(operand), 4)))  # type: ignore[arg-type]
            elif described is None or (op.name == "torch.aten.index_select" and position == 2):
                operands.append(operand)  # scalars and constants as they are, the indices too
            elif tuple(described.shape) == tuple(result.shape) or op.name in ALONG_DIM:
                operands.append(_heads_last(operand, build, done))
            else:
                operands.append(_broadcast_heads_last(operand, build))
    shape = [result.shape[axis] for axis in HEADS_FORWARD]
    done[value] = build.op(op.name, operands, vtensor(shape, result.dtype))
    return done[value]


def _heads_first_transpose(value: ir.Value) -> ir.Value | None:
    """x where `value` is `x.permute(0, 2, 1, 3)` (or `x.transpose(1, 2)`) of a 4-D x; else None."""
    op = defining_op(value)
    if op is None or static_type(value) is None or len(static_type(value).shape) != 4:  # type: ignore[union-attr]
        return None
    if op.name == "torch.aten.permute" and constant_ints(op.operands[1]) == HEADS_FORWARD:
        return op.operands[0]
    if op.name == "torch.aten.transpose.int" and sorted(number(v) % 4 for v in op.operands[1:3]) == [1, 2]:  # type: ignore[operator]
        return op.operands[0]
    return None


def _small_broadcast(shape: tuple, result: tuple) -> bool:
    """A tensor broadcast to `result` with fewer elements than it: cheap to transpose on its own."""
    if len(shape) > len(result) or math.prod(shape) >= math.prod(result):
        return False
    aligned = (1,) * (len(result) - len(shape)) + tuple(shape)
    return all(size in (1, full) for size, full in zip(aligned, result, strict=True))


def _broadcast_heads_last(value: ir.Value, build: Builder) -> ir.Value:
    """A broadcast operand made 4-D (leading ones) and transposed like the rest."""
    described = static_type(value)
    assert described is not None
    shape = [1] * (4 - len(described.shape)) + list(described.shape)
    return build.permute(build.view(value, shape) if len(described.shape) != 4 else value, HEADS_FORWARD)


def _moved(dim: int, rank: int) -> int:
    return HEADS_FORWARD[dim % rank]


PASS = Pass(
    name="heads-last-attention-inputs",
    summary="the elementwise ops (a rotary embedding) between a head transpose and attention -> before it, so the attention kernel reads [b, s, h, d] (cuda, sm_90a)",
    level="torch",
    run=run,
)
