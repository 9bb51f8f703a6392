"""outline-row-programs: each layer norm, RMS norm or softmax with the elementwise ops around it moves into a function of its own.

A layer norm is, at this level, sums along the last dimension between elementwise ops; IREE's GPU
code for such a dispatch walks each row once per sum, re-reading its inputs and recomputing what came
before (a bias add and a GELU, say), one warp a row. kiln's row kernel (targets/cuda/kernels/row_source.py)
instead holds whole rows in registers and reads and writes each element once. This pass marks where,
as outline-contractions does for the contractions: a region of ops becomes a call of a private
function that carries a `kiln.contraction` description (kind "rows": the shape, the inputs, the
steps) and computes the region with the same torch ops, which stay should no kernel replace them.

A region grows upwards from its last op (its one result, of some shape [..., H]): an op joins when it
is one the kernel computes (elementwise arithmetic, neg, reciprocal, relu, rsqrt, sqrt, exp, erf,
tanh, a float `to.dtype`, a sum or maximum over the last dimension with keepdim) and every user of
its result is already in the region; its tensor operands must be of the full shape, one value per
row ([..., 1]) or one per column ([H]). Everything else the region reads is an input of the
function. A region is outlined if it reduces along its rows, or if it is an elementwise chain of
at least LONG_CHAIN_ELEMENTS elements with an exp, erf or tanh (a GELU between two Linear layers):
IREE fuses such a chain into one pass too, but its dispatch runs one warp a workgroup, at about
half the H100's bandwidth (benchmarks/NOTES.md); shorter chains are left to it.

The cuda room places it beside outline-contractions, where its kernels apply (sm_90a, the torch
hand-off, kernels on).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from torch_mlir import ir

from kiln.passes.pass_api import Pass, PassRun
from kiln.passes.torch_build import dtype_of, shape_of, static_type
from kiln.passes.torch_ir import defining_op, user_op

from .outline_contractions import (
    Builder,
    Outliner,
    compile_time_constants,
    erase_with_unused_producers,
    model_functions,
)
from .row_steps import (
    REDUCTIONS,
    replay,
    role,
    step_of,
    tensor_operands,
)

MAX_INPUTS = 8  # more operands than this is not a norm's neighbourhood
# An elementwise chain alone is outlined when it is long and costly enough for the kernel's full
# bandwidth to pay over IREE's one-warp elementwise dispatches. Measured on the H100 (interleaved
# A/B, benchmarks/NOTES.md): 2M elements 4% faster a call, 1M 7-10% slower, 16M 22-32% faster.
TRANSCENDENTAL = ("exp", "erf", "tanh")
LONG_CHAIN_ELEMENTS = 1 << 21


def run(module: ir.Operation, pass_run: PassRun) -> None:
    outliner = Outliner(module)
    for function in model_functions(module):
        block = function.regions[0].blocks[0]
        ops = [op.operation for op in block.operations]
        position = {op: index for index, op in enumerate(ops)}
        claimed: set[ir.Operation] = set()
        regions = []
        for sink in reversed(ops):  # all found before any is outlined, which erases ops
            region = _region(sink, position) if sink not in claimed else None
            if region is not None:
                claimed.update(region.ops)
                regions.append(region)
        for region in regions:
            if compile_time_constants(region.inputs):
                continue
            also = tuple(op.results[0] for op in region.exposed)
            outliner.call(region.ops[-1], region.description(), region.inputs, region.replay, also)
            for index in reversed(range(len(region.ops))):  # users first
                erase_with_unused_producers(region.ops[index], spared=region.ops[:index])


@dataclass
class _Region:
    """The ops of one row program, in program order (the last is the sink), and what they read."""

    shape: tuple[int, ...]
    ops: list[ir.Operation]
    inputs: list[ir.Value]
    steps: list[tuple[Any, ...]]
    exposed: list[ir.Operation]  # ops of the region whose results are read outside it too

    def description(self) -> dict[str, Any]:
        inputs = [[list(shape_of(value)), dtype_of(value)] for value in self.inputs]
        described = {"kind": "rows", "shape": list(self.shape), "inputs": inputs, "steps": [list(step) for step in self.steps]}
        if self.exposed:
            described["outputs"] = [self.ops.index(op) for op in self.exposed]
        return described

    def replay(self, build: Builder, args: list[ir.Value]) -> ir.Value | list[ir.Value]:
        """The region's ops again, reading `args` for its inputs (IREE's code, where no kernel is used):
        the last op's result, then the exposed ops' results."""
        mapping = replay(self.ops, dict(zip(self.inputs, args, strict=True)))
        last = mapping[self.ops[-1].results[0]]
        return [last, *(mapping[op.results[0]] for op in self.exposed)] if self.exposed else last


def _region(sink: ir.Operation, position: dict[ir.Operation, int]) -> _Region | None:
    """The row program that ends at `sink`, or None where none does (not a step, no sum, ...)."""
    described = static_type(sink.results[0]) if len(sink.results) == 1 else None
    shape = tuple(size for size in described.shape if size is not None) if described is not None else ()
    sink_step = step_of(sink, shape) if len(shape) >= 2 and shape[-1] >= 2 else None
    if sink_step is None:
        return None
    members = {sink: sink_step}  # each op of the region -> its step, as step_of reads it
    exposed: list[ir.Operation] = []
    grown = True
    while grown:
        grown = False
        for op in list(members):
            for value in op.operands:
                candidate = defining_op(value)
                if candidate is None or candidate in members or candidate not in position:  # the same block only
                    continue
                step = step_of(candidate, shape)
                if step is None:
                    continue
                outside = [user_op(use) for use in candidate.results[0].uses if use.owner not in members]
                if outside and (exposed or not _exposable(candidate, step, outside, sink, shape, position)):
                    continue
                members[candidate] = step
                exposed += [candidate] if outside else []
                grown = True
    ops = sorted(members, key=position.__getitem__)
    kinds = {kind for kind, _ in members.values()}
    if not kinds & set(REDUCTIONS) and not (kinds & set(TRANSCENDENTAL) and math.prod(shape) >= LONG_CHAIN_ELEMENTS):
        return None
    numbers: dict[ir.Value, int] = {}
    inputs: list[ir.Value] = []
    for op in ops:  # the inputs first, numbered in the order the ops read them
        for value in tensor_operands(op):
            if defining_op(value) not in members and value not in numbers and role(value, shape) is not None:
                numbers[value] = len(inputs)
                inputs.append(value)
    if len(inputs) > MAX_INPUTS or not any(role(value, shape) == "full" for value in inputs):
        return None
    steps = []
    for op in ops:
        kind, operands = members[op]
        steps.append((kind, dtype_of(op.results[0]), *(numbers[x] if isinstance(x, ir.Value) else x for x in operands)))
        numbers[op.results[0]] = len(inputs) + len(steps) - 1
    return _Region(shape, ops, inputs, steps, exposed)


def _exposable(
    op: ir.Operation,
    step: tuple[str, list[ir.Value | float]],
    outside: list[ir.Operation],
    sink: ir.Operation,
    shape: tuple[int, ...],
    position: dict[ir.Operation, int],
) -> bool:
    """Whether `op`, read by `outside` ops too, may join the region as a further result: a sum over the
    whole shape (a pre-norm block's residual add, which the norm and the next residual add read) whose
    other readers all come after the region's last op, where the call will be."""
    return step[0] == "add" and role(op.results[0], shape) == "full" and all(
        position.get(user, -1) > position[sink] for user in outside
    )


PASS = Pass(
    name="outline-row-programs",
    summary="layer norms and softmax with the elementwise ops around them, and long elementwise chains -> calls of outlined row programs (cuda, sm_90a)",
    level="torch",
    run=run,
)
