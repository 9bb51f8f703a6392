"""check-primitives: lists the ops outside kiln's primitive set, and fails only for those nothing lowers.

Rewrites nothing. It closes the `prims` group. The primitive set (passes/primitives.py) describes
what kiln's own decompositions aim for; an op outside it that torch-mlir's linalg lowering still
lowers (a quantize, a complex view, a backward op, a norm kiln leaves whole) compiles, and is
listed in a side file beside the stage's dump (`<NN>-prims.outside-primitives.txt`), with how
often it occurs. An op that nothing lowers fails the compile here, before the later stages, with
every such op named at once and counted, located at its first occurrence.

Whether an op lowers is asked of the lowering itself: each kind of op outside the set is copied,
with the constants it reads, into a module of its own (its other operands become arguments) and
run through torch-to-linalg. `require-primitives` is the strict gate (`--strict-primitives`):
any op outside the set fails.
"""

from __future__ import annotations

from collections import Counter

from torch_mlir import ir

from .pass_api import Pass, PassFailure, PassRun, parse_module, run_pass
from .primitives import is_primitive

LOWERING = "torch-backend-to-linalg-on-tensors-backend-pipeline"  # the `torch-to-linalg` pass (upstream.py)


def outside_primitives(module: ir.Operation) -> tuple[Counter[str], dict[str, ir.Operation]]:
    """How often each op outside the primitive set occurs in `module`, and its first occurrence."""
    outside: Counter[str] = Counter()
    first: dict[str, ir.Operation] = {}

    def visit(op: ir.Operation) -> ir.WalkResult:
        types = [str(value.type) for value in [*op.operands, *op.results]]
        if not is_primitive(op.name, types):
            outside[op.name] += 1
            first.setdefault(op.name, op)
        return ir.WalkResult.ADVANCE

    module.walk(visit)
    return outside, first


def run(module: ir.Operation, pass_run: PassRun) -> None:
    outside, first = outside_primitives(module)
    if not outside:
        return
    why_not = {name: lowering_failure(op) for name, op in first.items()}
    unlowered = [name for name, why in why_not.items() if why is not None]
    lines = [f"{name}  {count}  {'lowered by torch-to-linalg' if why_not[name] is None else 'not lowered: ' + str(why_not[name])}"
             for name, count in outside.items()]  # fmt: skip
    pass_run.write("outside-primitives.txt", "op  occurrences  how\n" + "\n".join(lines) + "\n")
    if unlowered:
        listing = ", ".join(f"{name} ({outside[name]})" for name in unlowered)
        name = unlowered[0]
        pass_run.fail(first[name], f"'{name}' op has no lowering; ops outside kiln's primitive set that nothing lowers: {listing}")


def lowering_failure(op: ir.Operation) -> str | None:
    """Why torch-to-linalg cannot lower `op` (its first diagnostic), or None when it can.

    An op with regions (control flow) cannot be copied alone; it is left to the lowering stage,
    whose error then names it.
    """
    if len(op.regions):
        return None
    probe = _probe(op)
    try:
        module = parse_module(probe)
        run_pass(module, Pass(name="torch-to-linalg", summary="", level="torch", pipeline=LOWERING))
    except PassFailure as failure:
        return failure.diagnostics[0].message.splitlines()[0].split(": %")[0] if failure.diagnostics else "the lowering failed"
    return None


# Ops whose value the probe copies along with the op: the lowering reads them as constants.
_CONSTANTS = ("torch.constant.", "torch.prim.ListConstruct", "torch.vtensor.literal")


def _probe(op: ir.Operation) -> str:
    """A module holding `op` alone: its constant operands copied, the others arguments, its results returned."""
    arguments: list[ir.Value] = []
    copied: list[ir.Operation] = []

    def operand(value: ir.Value) -> str:
        owner = value.owner
        if isinstance(owner, (ir.Operation, ir.OpView)) and owner.operation.name.startswith(_CONSTANTS):
            defining = owner.operation
            if defining not in copied:
                for inner in defining.operands:
                    operand(inner)
                copied.append(defining)
            return _name(value, copied, arguments)
        if value not in arguments:
            arguments.append(value)
        return _name(value, copied, arguments)

    operands = [operand(value) for value in op.operands]
    body = [_text(defining, copied, arguments) for defining in copied]
    results = [result for result in op.results if str(result.type).startswith(("!torch.vtensor", "!torch.int", "!torch.float", "!torch.bool"))]
    result_names = ", ".join(f"%r{index}" for index in range(len(op.results)))
    signature = ", ".join(f"{_name(value, copied, arguments)}: {value.type}" for value in arguments)
    op_text = _generic(op, operands, result_names)
    returned = ", ".join(f"%r{list(op.results).index(result)}" for result in results)
    return_types = ", ".join(str(result.type) for result in results)
    lines = [
        f"func.func @probe({signature}) -> ({return_types}) {{",
        *body,
        f"  {op_text}",
        f"  return {returned}{' : ' + return_types if results else ''}",
        "}",
    ]
    return "\n".join(lines)


def _name(value: ir.Value, copied: list[ir.Operation], arguments: list[ir.Value]) -> str:
    if value in arguments:
        return f"%a{arguments.index(value)}"
    owner = value.owner.operation
    return f"%c{copied.index(owner)}_{list(owner.results).index(value)}"


def _text(op: ir.Operation, copied: list[ir.Operation], arguments: list[ir.Value]) -> str:
    index = copied.index(op)
    names = ", ".join(f"%c{index}_{position}" for position in range(len(op.results)))
    return "  " + _generic(op, [_name(value, copied, arguments) for value in op.operands], names)


def _generic(op: ir.Operation, operands: list[str], results: str) -> str:
    """`op` in MLIR's generic form with the given operand and result names."""
    attributes = ", ".join(f"{named.name} = {named.attr}" for named in (op.attributes[i] for i in range(len(op.attributes))))
    operand_types = ", ".join(str(value.type) for value in op.operands)
    result_types = ", ".join(str(value.type) for value in op.results)
    assignment = f"{results} = " if results else ""
    attribute_text = f" {{{attributes}}}" if attributes else ""
    return f'{assignment}"{op.name}"({", ".join(operands)}){attribute_text} : ({operand_types}) -> ({result_types})'


PASS = Pass(
    name="check-primitives",
    summary="list the ops outside kiln's primitive set (passes/primitives.py); fail for those nothing lowers",
    level="torch",
    run=run,
    hint=(
        "the op has no lowering in torch-mlir: rewrite that part of the model with supported ops, or "
        "decompose the op in a kiln pass (see `kiln passes` and docs/passes.md)"
    ),
)
