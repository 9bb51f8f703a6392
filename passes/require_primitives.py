"""require-primitives: fails, naming every op that is outside kiln's primitive set.

The strict form of check-primitives (`--strict-primitives` puts it in check-primitives' place):
rewrites nothing, and any op outside passes/primitives.py fails the compile, even one torch-mlir's
lowering would take, so that every later stage may assume the module holds only primitives (and
scalar arithmetic, which computes no tensor). The error names each op outside the set and how
often it occurs, located at its first occurrence.
"""

from __future__ import annotations

from torch_mlir import ir

from .check_primitives import outside_primitives
from .pass_api import Pass, PassRun


def run(module: ir.Operation, pass_run: PassRun) -> None:
    outside, first = outside_primitives(module)
    if not outside:
        return
    name = next(iter(first))
    listing = ", ".join(f"{op_name} ({count})" for op_name, count in outside.items())
    pass_run.fail(first[name], f"'{name}' op is outside kiln's primitive set; ops outside it: {listing}")


PASS = Pass(
    name="require-primitives",
    summary="fail, naming every op outside kiln's primitive set (the strict check-primitives)",
    level="torch",
    run=run,
    hint=(
        "decompose the op into primitives in a kiln pass (see `kiln passes` and docs/passes.md), "
        "or compile without --strict-primitives: check-primitives lets through the ops torch-mlir lowers"
    ),
)
