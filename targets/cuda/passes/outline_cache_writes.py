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
        for op in ops_named(function, ("torch.aten.where.self",)):
            match = _match(op)
            if match is None:
                continue
            description, operands, chain = match

            def body(build: Builder, args: list[ir.Value], chain: list[ir.Operation] = chain, keys: list[ir.Value] = operands) -> ir.Value:
                return replay(chain, dict(zip(keys, args, strict=True)))[chain[-1].results[0]]

            outliner.call(op, description, operands, body)
            for dead in reversed(chain):
                if all(not list(result.uses) for result in dead.results):
                    dead.erase()


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
    summary="--generate's KV-cache writes (a select over the cache) -> calls kiln's in-place kernel computes (cuda, sm_90a)",
    level="torch",
    run=run,
)
