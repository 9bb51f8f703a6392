"""check-primitives: fails, naming every op that is outside kiln's primitive set.

Rewrites nothing. It closes the `prims` group, so that every later stage may assume the module
holds only the ops passes/primitives.py lists (and scalar arithmetic, which computes no tensor).
The error names each op outside the set and how often it occurs, located at its first occurrence.
"""

from __future__ import annotations

from collections import Counter

from torch_mlir import ir

from .pass_api import Pass, PassRun
from .primitives import is_primitive


def run(module: ir.Operation, pass_run: PassRun) -> None:
    outside: Counter[str] = Counter()
    first: dict[str, ir.Operation] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        types = [str(value.type) for value in [*op.operands, *op.results]]
        if not is_primitive(op.name, types):
            outside[op.name] += 1
            first.setdefault(op.name, op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    if not outside:
        return
    name = next(iter(first))
    listing = ", ".join(f"{op_name} ({count})" for op_name, count in outside.items())
    pass_run.fail(first[name], f"'{name}' op is outside kiln's primitive set; ops outside it: {listing}")


PASS = Pass(
    name="check-primitives",
    summary="fail, naming every op outside kiln's primitive set (passes/primitives.py)",
    level="torch",
    run=run,
    hint=(
        "decompose the op into primitives in a kiln pass (see `kiln passes` and the README), "
        "or skip this check with --disable-pass check-primitives"
    ),
)
