"""outline-cache-writes: a `--generate` step's write of its keys and values into the KV cache becomes a
call of a function that kiln's kernel computes in place.

compiler/generation.py writes each layer's new keys (and values) into the cache state as a select
over the whole cache: where(the slot is one of this step's, the new token gathered for it, the cache)
(`_written`; IREE 3.13's CUDA scatter wrote wrong slots). In a decode step that reads and writes the
whole cache twice a layer to change one slot: 120 us of a Llama-3.2-1B step on the H200, 400 of a
Llama-3.1-8B's. The select is recognized by its shape,

    offsets = arange(seq) - positions[0]
    where(unsqueeze((offsets >= 0) & (offsets < tokens), 1), index_select(new, 2, clamp(offsets, 0, tokens - 1)), cache)

and becomes a call of a function taking (positions, new, cache), described as a `cache_write`
(kernels/contraction.py `CacheWrite`) and computing the same select with torch ops (IREE's code, should
no kernel replace it). kiln_cache_write writes the new tokens' slots only, the dispatch's result tied
to the cache operand, so IREE hands it the cache's own buffer.

In a decode step (one token a row), a layer's two writes, with the rotary embedding of its queries
and keys (transformers' `x * cos + rotate_half(x) * sin`, two IREE dispatches), become one call:
a `rotary_cache_write` (kernels/contraction.py `RotaryCacheWrite`), found from the attention that
reads both caches (where the attention is one op: in 16-bit dtypes, and in f32 where kiln's
attention kernel takes it; elsewhere the writes are outlined alone). Three dispatches fewer a layer:
a Llama-3.1-8B bf16 step 5.37-5.55 -> 5.08-5.14 ms on the H200; a 1B step within its run-to-run
spread (benchmarks/NOTES.md, "A layer's rotations and cache writes in one kernel").

The cuda room places this pass where its kernels apply, beside outline-contractions.
"""

from __future__ import annotations

from typing import Any

from torch_mlir import ir

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_build import static_type
from kiln.passes.torch_ir import defining_op, number, producer

from ..kernels.contract import KERNEL_DTYPES
from .outline_contractions import Builder, Outliner, kernel_precisions, model_functions
from .row_steps import replay


def run(module: ir.Operation, pass_run: PassRun) -> None:
    if kernel_precisions(module) is None:
        return
    outliner = Outliner(module)
    for function in model_functions(module):
        for attention in ops_named(function, ("torch.aten.scaled_dot_product_attention",)):
            if (layer := _match_layer(attention)) is not None:
                _outline(outliner, *layer)
        for op in ops_named(function, ("torch.aten.where.self",)):
            if (write := _match(op)) is not None:
                _outline(outliner, *write, (op.results[0],))


def _outline(outliner: Outliner, description: dict[str, Any], operands: list[ir.Value], chain: list[ir.Operation], values: tuple[ir.Value, ...]) -> None:
    """A call of the function `description` names, taking `operands`, in place of `chain`: the call
    returns `values` (what the rest of the function reads of the chain) where the first is made, and
    its body replays the chain (IREE's code, should no kernel replace it). The chain's ops left
    unused are erased."""

    def body(build: Builder, args: list[ir.Value]) -> list[ir.Value]:
        replayed = replay(chain, dict(zip(operands, args, strict=True)))
        return [replayed[value] for value in values]

    outliner.call(defining_op(values[0]), description, operands, body, also=values[1:])  # type: ignore[arg-type]
    for dead in reversed(chain):
        if all(not list(result.uses) for result in dead.results):
            dead.erase()


def _match_layer(attention: ir.Operation) -> tuple[dict[str, Any], list[ir.Value], list[ir.Operation], tuple[ir.Value, ...]] | None:
    """(description, operands (positions, q, k, v, cos, sin, key cache, value cache), the ops they
    replace in block order, (rotated queries, written keys, written values)) where `attention` reads
    queries rotated, keys rotated and written, and values written, one token a row; None otherwise."""
    query = attention.operands[0]
    if (view := producer(query, "torch.aten.view", "torch.aten.reshape")) is not None:  # GQA's rows of a group
        query = view.operands[0]
    key_write, value_write = (producer(value, "torch.aten.where.self") for value in attention.operands[1:3])
    rotated_q = _rotary(query)
    if key_write is None or value_write is None or rotated_q is None:
        return None
    key_match, value_match = _match(key_write), _match(value_write)
    if key_match is None or value_match is None:
        return None
    (key_description, (positions, new_keys, key_cache), key_chain) = key_match
    (value_description, (value_positions, new_values, value_cache), value_chain) = value_match
    rotated_k = _rotary(new_keys)
    if rotated_k is None or key_description != value_description or positions != value_positions or key_description["tokens"] != 1:
        return None
    x_q, cos, sin, q_ops = rotated_q
    x_k, k_cos, k_sin, k_ops = rotated_k
    q_type, cos_type = static_type(x_q), static_type(cos)  # x_q's is there: _rotated_half asks for it
    batch, kv_heads, seq, dim = key_description["batch"], key_description["heads"], key_description["seq"], key_description["dim"]
    if (
        (k_cos, k_sin) != (cos, sin) or q_type is None or cos_type is None or static_type(sin) != cos_type
        or len(q_type.shape) != 4 or q_type.shape[0] != batch or tuple(q_type.shape[2:]) != (1, dim)
        or cos_type.shape[0] not in (1, batch) or tuple(cos_type.shape[1:]) != (1, 1, dim)
        or {q_type.dtype, cos_type.dtype} != {key_description["dtype"]}
    ):  # fmt: skip
        return None
    operands = [positions, x_q, x_k, new_values, cos, sin, key_cache, value_cache]
    queries = q_ops[-1].results[0]
    block = list(attention.block.operations)
    order = {op.operation: index for index, op in enumerate(block)}
    start = order[defining_op(queries)]  # type: ignore[index]
    if any((op := defining_op(value)) is not None and order.get(op, start) >= start for value in operands):
        return None  # the call goes where the queries' rotation ends: every operand must be there
    members = {*q_ops, *k_ops, *key_chain, *value_chain}
    description = {
        "kind": "rotary_cache_write", "batch": batch, "q_heads": q_type.shape[1], "kv_heads": kv_heads, "seq": seq,
        "dim": dim, "positions": key_description["positions"], "cos_batch": cos_type.shape[0], "dtype": key_description["dtype"],
    }  # fmt: skip
    chain = [op.operation for op in block if op.operation in members]
    return description, operands, chain, (queries, key_write.results[0], value_write.results[0])


def _rotary(value: ir.Value) -> tuple[ir.Value, ir.Value, ir.Value, list[ir.Operation]] | None:
    """(x, cos, sin, its ops in block order) if `value` is transformers' rotary embedding over the
    whole last dimension, x * cos + cat([-x[..., D/2:], x[..., :D/2]], -1) * sin; None otherwise."""
    add = producer(value, "torch.aten.add.Tensor")
    if add is None or number(add.operands[2]) != 1:
        return None
    for straight, across in ((add.operands[0], add.operands[1]), (add.operands[1], add.operands[0])):
        straight_op, across_op = producer(straight, "torch.aten.mul.Tensor"), producer(across, "torch.aten.mul.Tensor")
        if straight_op is None or across_op is None:
            continue
        for turned, sin in ((across_op.operands[0], across_op.operands[1]), (across_op.operands[1], across_op.operands[0])):
            halves = _rotated_half(turned)
            if halves is None:
                continue
            x, ops = halves
            for first, cos in ((straight_op.operands[0], straight_op.operands[1]), (straight_op.operands[1], straight_op.operands[0])):
                if first == x:
                    members = {straight_op, across_op, add, *ops}
                    return x, cos, sin, [op.operation for op in add.block.operations if op.operation in members]
    return None


def _rotated_half(value: ir.Value) -> tuple[ir.Value, list[ir.Operation]] | None:
    """(x, the ops) if `value` is cat([-x[..., D/2:], x[..., :D/2]], -1) of a rank-4 x."""
    cat = producer(value, "torch.aten.cat")
    parts = producer(cat.operands[0], "torch.prim.ListConstruct") if cat is not None else None
    if cat is None or parts is None or len(parts.operands) != 2 or number(cat.operands[1]) not in (-1, 3):
        return None
    negated, low = parts.operands
    neg = producer(negated, "torch.aten.neg")
    high = producer(neg.operands[0], "torch.aten.slice.Tensor") if neg is not None else None
    low_slice = producer(low, "torch.aten.slice.Tensor")
    if high is None or low_slice is None or high.operands[0] != low_slice.operands[0]:
        return None
    x = high.operands[0]
    described = static_type(x)
    if described is None or len(described.shape) != 4 or described.shape[-1] % 2:
        return None
    half = described.shape[-1] // 2
    dims_ok = all(number(op.operands[1]) in (-1, 3) and number(op.operands[4]) == 1 for op in (high, low_slice))
    high_end, low_end = number(high.operands[3]), number(low_slice.operands[3])
    if not dims_ok or number(high.operands[2]) != half or not isinstance(high_end, int) or high_end < 2 * half:
        return None
    if number(low_slice.operands[2]) != 0 or low_end != half:
        return None
    return x, [cat, parts, neg, high, low_slice]


def _match(where: ir.Operation) -> tuple[dict[str, Any], list[ir.Value], list[ir.Operation]] | None:
    """(description, operands (positions, new, cache), the select's ops in block order) if `where` is
    `_written`'s select; None otherwise."""
    condition, spread, cache = where.operands
    gather = producer(spread, "torch.aten.index_select")
    if gather is None or number(gather.operands[1]) != 2:
        return None
    new, indices = gather.operands[0], gather.operands[2]
    clamp = producer(indices, "torch.aten.clamp")
    if clamp is None:
        return None
    offsets = clamp.operands[0]
    subtract = producer(offsets, "torch.aten.sub.Tensor")
    if subtract is None or number(subtract.operands[2]) != 1:
        return None
    arange, first = producer(subtract.operands[0], "torch.aten.arange.start_step"), defining_op(subtract.operands[1])
    new_type, cache_type, result_type = (static_type(value) for value in (new, cache, where.results[0]))
    if arange is None or first is None or new_type is None or cache_type is None or result_type is None:
        return None
    positions = _first_of(first)
    if positions is None or len(cache_type.shape) != 4 or len(new_type.shape) != 4:
        return None
    batch, heads, seq, dim = cache_type.shape
    tokens = new_type.shape[2]
    if (
        not _slot_test(condition, offsets, tokens)
        or number(clamp.operands[1]) != 0
        or number(clamp.operands[2]) != tokens - 1
        or tuple(new_type.shape) != (batch, heads, tokens, dim)
        or tuple(result_type.shape) != tuple(cache_type.shape)
        or len({new_type.dtype, cache_type.dtype, result_type.dtype}) != 1
        or cache_type.dtype not in KERNEL_DTYPES
        or _arange_length(arange) != seq
    ):
        return None
    description = {
        "kind": "cache_write", "batch": batch, "heads": heads, "seq": seq, "dim": dim, "tokens": tokens,
        "positions": static_type(positions).shape[0], "dtype": cache_type.dtype,  # type: ignore[union-attr]
    }  # fmt: skip
    members = {op.operation for op in (first, subtract, arange, clamp, gather, where, *_condition_ops(condition))}
    chain = [op.operation for op in where.block.operations if op.operation in members]
    return description, [positions, new, cache], chain


def _first_of(op: ir.Operation) -> ir.Value | None:
    """The tensor whose first element `op` takes (`squeeze(x, 0)` of a [1], `select(x, 0, 0)`), if 1-D i64."""
    if op.name == "torch.aten.squeeze.dim" and number(op.operands[1]) == 0:
        source = op.operands[0]
    elif op.name == "torch.aten.select.int" and number(op.operands[1]) == 0 and number(op.operands[2]) == 0:
        source = op.operands[0]
    else:
        return None
    found = static_type(source)
    return source if found is not None and len(found.shape) == 1 and found.dtype == "si64" else None


def _slot_test(condition: ir.Value, offsets: ir.Value, tokens: int) -> bool:
    """Whether `condition` is unsqueeze((offsets >= 0) & (offsets < tokens), 1)."""
    unsqueeze = producer(condition, "torch.aten.unsqueeze")
    both = producer(unsqueeze.operands[0], "torch.aten.bitwise_and.Tensor") if unsqueeze is not None else None
    if both is None or number(unsqueeze.operands[1]) != 1:  # type: ignore[union-attr]
        return False
    low, high = (producer(value, "torch.aten.ge.Scalar", "torch.aten.lt.Scalar") for value in both.operands)
    return (
        low is not None and high is not None and low.name == "torch.aten.ge.Scalar" and high.name == "torch.aten.lt.Scalar"
        and low.operands[0] == offsets and high.operands[0] == offsets
        and number(low.operands[1]) == 0 and number(high.operands[1]) == tokens
    )  # fmt: skip


def _condition_ops(condition: ir.Value) -> list[ir.Operation]:
    unsqueeze = defining_op(condition)
    both = defining_op(unsqueeze.operands[0])  # type: ignore[union-attr]
    return [unsqueeze, both, *(defining_op(value) for value in both.operands)]  # type: ignore[list-item, union-attr]


def _arange_length(arange: ir.Operation) -> int | None:
    """arange(start, end, step)'s length where all three are constants."""
    start, end, step = (number(value) for value in arange.operands[:3])
    if not all(isinstance(value, int) for value in (start, end, step)) or step == 0:
        return None
    return max(0, -(-(end - start) // step))  # type: ignore[operator]


PASS = Pass(
    name="outline-cache-writes",
    summary="--generate's KV-cache writes (a select over the cache; in decode with the rotary embedding) -> calls kiln's in-place kernels compute (cuda, sm_90a)",
    level="torch",
    run=run,
)
