"""check-index-inputs: indices a caller passes in are checked against the size they index, at run time.

PyTorch raises IndexError for an embedding id, an index_select, gather or scatter index, or an
`x[idx]` index outside the dimension it indexes. Compiled, these ops read (scatter: write)
wherever the index points: torch-mlir's bounds asserts sit inside the loop bodies, where IREE
drops them, so an out-of-range id gave garbage or a segfault (tests/reliability measured both).

For each such op whose index tensor comes from a function argument (through views and casts),
this adds one check over the whole index:

    torch.runtime.assert all((index >= low) & (index < size)), "<op> index out of range ..."

`low` is 0, or -size where PyTorch wraps negative indices (`x[idx]`, index_put). IREE turns the
assert into a failed call (FAILED_PRECONDITION, with the message) as long as assertions are kept:
kiln compiles a module that has them with --iree-opt-strip-assertions=false (targets/levers.py,
KEEP_ASSERTIONS). Indices the model computes itself (positions, argmax, top-k) are in range by
construction and are left alone.

Where the assert goes matters on a GPU: the host reads the flag back, so an assert before the op
stops the host issuing the rest of the call until the device has caught up. (The milliseconds a
checked CUDA call used to lose were IREE's allocator, not this wait: runtime/devices.py. Moving the
assert changed GPT-2's call time on the H200 within noise; it was measured only while that cost was
still there.) So an op that only reads
(embedding, index_select, gather, `x[idx]`) of a dimension of known size reads a safe index
instead (0 where the caller's is out of range), and its assert goes at the function's return,
where the host waits for the call anyway. Writes (scatter, index_put) and dimensions of run-time
size, which may be empty, keep the assert before the op.

The functions of an artifact compiled with `--generate` are left unchecked: decode takes the token and position
its previous call returned, and kiln.runtime.generation checks a prompt on the host before prefill
takes it. There a check would cost a reduction and a read-back every step, for inputs the artifact
made itself.
"""

from __future__ import annotations

import json
import math
import re

from torch_mlir import ir

from .pass_api import Pass, PassRun
from .torch_ir import number, tensor_type, vtensor

# op -> (the operand holding the indexed tensor, the operand holding the dimension or None for
# dimension 0, the operand holding the index tensor or a list of them, whether negatives wrap)
INDEXING = {
    "torch.aten.embedding": (0, None, 1, False),
    "torch.aten.index_select": (0, 1, 2, False),
    "torch.aten.gather": (0, 1, 2, False),
    "torch.aten.scatter.src": (0, 1, 2, False),
    "torch.aten.scatter.value": (0, 1, 2, False),
    "torch.aten.scatter_add": (0, 1, 2, False),
    "torch.aten.scatter.reduce": (0, 1, 2, False),
    "torch.aten.scatter_reduce.two": (0, 1, 2, False),
    "torch.aten.index.Tensor": (0, None, 1, True),
    "torch.aten.index.Tensor_hacked_twin": (0, None, 1, True),
    "torch.aten.index_put": (0, None, 1, True),
    "torch.aten.index_put.hacked_twin": (0, None, 1, True),
    "torch.aten._index_put_impl": (0, None, 1, True),
}
# Those of them that only read: an index out of range may be read as another (the call fails anyway),
# so their check can wait for the end of the call.
READS = frozenset(
    f"torch.aten.{name}" for name in ("embedding", "index_select", "gather", "index.Tensor", "index.Tensor_hacked_twin")
)
# Ops that pass an argument's values through unchanged in kind: an index read through them is
# still the caller's.
PASS_THROUGH = frozenset(
    f"torch.aten.{name}"
    for name in (
        "view", "reshape", "_reshape_alias", "unsqueeze", "squeeze", "squeeze.dim", "flatten.using_ints",
        "expand", "permute", "transpose.int", "t", "slice.Tensor", "select.int", "contiguous", "clone",
        "to.dtype", "_to_copy", "broadcast_to",
    )
)  # fmt: skip


def run(module: ir.Operation, pass_run: PassRun) -> None:
    convention = _convention(module)
    trusted = _generation_functions(convention)
    for function in _ops_in(module):
        if function.name != "func.func" or ir.StringAttr(function.attributes["sym_name"]).value in trusted:
            continue
        names = _input_names(convention, function)
        safe: dict[tuple[ir.Value, ir.Value, int], ir.Value | None] = {}  # (index, indexed, dim) -> its read-safe index
        deferred: list[tuple[ir.Value, str]] = []  # (0-d all-in-range flag, message), asserted at the return
        for op in _ops_in(function):
            if op.name not in INDEXING:
                continue
            replacements: dict[int, ir.Value] = {}  # dimension -> the read-safe index it reads instead
            for index, source, dim, wraps in _indices(op):
                argument = _argument_of(index)
                if argument is None:
                    continue
                key = (index, source, dim)
                if key not in safe:
                    name = names[argument] if argument < len(names) else f"argument {argument}"
                    safe[key] = _check(op, index, source, dim, wraps, name, deferred)
                if (replacement := safe[key]) is not None:
                    replacements[dim] = replacement
            if replacements:
                _read_through(op, replacements)
        if deferred:
            _assert_at_return(function, deferred)


def _read_through(op: ir.Operation, replacements: dict[int, ir.Value]) -> None:
    """Make `op` read the replacement index tensors: for a list of indices (`x[i, j]`), a new list
    of its own, as the old one may be another op's too."""
    at = INDEXING[op.name][2]
    operand = op.operands[at]
    if not str(operand.type).startswith("!torch.list"):
        (op.operands[at],) = replacements.values()
        return
    items = [replacements.get(dim, item) for dim, item in enumerate(_list_items(operand))]
    with ir.InsertionPoint(op), op.location:
        op.operands[at] = _create("torch.prim.ListConstruct", items, operand.type)


def _indices(op: ir.Operation) -> list[tuple[ir.Value, ir.Value, int, bool]]:
    """(index tensor, indexed tensor, dimension, negatives wrap) for each index `op` reads."""
    source_at, dim_at, index_at, wraps = INDEXING[op.name]
    source = op.operands[source_at]
    index = op.operands[index_at]
    if str(index.type).startswith("!torch.list"):
        items = _list_items(index)
        return [(item, source, dim, wraps) for dim, item in enumerate(items) if tensor_type(item.type) is not None]
    dim = 0 if dim_at is None else number(op.operands[dim_at])
    rank = len(tensor_type(source.type).shape) if tensor_type(source.type) is not None else None
    if not isinstance(dim, int) or rank is None:
        return []
    return [(index, source, dim % rank if rank else 0, wraps)]


def _list_items(value: ir.Value) -> list[ir.Value]:
    owner = value.owner
    if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.operation.name != "torch.prim.ListConstruct":
        return []
    return list(owner.operation.operands)


def _argument_of(value: ir.Value) -> int | None:
    """The function argument `value` is, or is read from through PASS_THROUGH ops; None otherwise."""
    while True:
        if isinstance(value, ir.BlockArgument):
            return value.arg_number
        owner = value.owner
        if not isinstance(owner, (ir.Operation, ir.OpView)) or owner.operation.name not in PASS_THROUGH:
            return None
        value = owner.operation.operands[0]


def _check(
    op: ir.Operation, index: ir.Value, source: ir.Value, dim: int, wraps: bool, name: str,
    deferred: list[tuple[ir.Value, str]],
) -> ir.Value | None:
    """Check, before `op`, that every element of `index` indexes `source` along `dim`.

    Where `op` only reads and the dimension has a known size, the check is deferred: the index `op`
    reads is made safe (an index out of range reads element 0 instead), the flag goes to `deferred`
    for the assert at the return, and the safe index is returned. Otherwise the assert is here and
    None is returned."""
    index_type, source_type = tensor_type(index.type), tensor_type(source.type)
    assert index_type is not None and source_type is not None
    static_size = source_type.shape[dim]
    where = _source_line(op.location)
    shown = op.name.removeprefix("torch.aten.")
    extent = static_size if static_size is not None else f"the size of dimension {dim}"
    bounds = f"[-{extent}, {extent})" if wraps else f"[0, {extent})"
    message = f"{shown}{where}: input '{name}' holds an index outside {bounds}, the range it may index"
    with ir.InsertionPoint(op), op.location:
        integer = ir.Type.parse("!torch.int")
        if static_size is not None:
            size = _integer(static_size)
        else:
            size = _create("torch.aten.size.int", [source, _integer(dim)], integer)
        low = _create("torch.aten.neg.int", [size], integer) if wraps else _integer(0)
        flags = vtensor(index_type.shape, "i1")
        at_least = _create("torch.aten.ge.Scalar", [index, low], flags)
        below = _create("torch.aten.lt.Scalar", [index, size], flags)
        inside = _create("torch.aten.bitwise_and.Tensor", [at_least, below], flags)
        every = _all(inside, index_type.shape)
        if op.name in READS and static_size:
            deferred.append((every, message))
            zero = _create("torch.prim.NumToTensor.Scalar", [_integer(0)], vtensor([], "si64"))
            return _create("torch.aten.where.self", [inside, index, zero], index.type)
        _assert(every, message)
    return None


def _all(flags: ir.Value, shape: list[int | None]) -> ir.Value:
    """all(flags), as rows first where the index has a known size: IREE 3.13 reduces a whole integer
    tensor to one value on one GPU thread (275 us for GPT-2's 8x512 ids on an H200), a row each on
    many. The rows: the largest divisor of the size up to its square root (64 of 64 for 4,096)."""
    scalar = vtensor([], "i1")
    if any(extent is None for extent in shape):
        return _create("torch.aten.all", [flags], scalar)
    size = math.prod(shape)
    rows = max(divisor for divisor in range(1, math.isqrt(size) + 1) if size % divisor == 0)
    if rows > 1:
        grid = _create("torch.prim.ListConstruct", [_integer(rows), _integer(size // rows)], ir.Type.parse("!torch.list<int>"))
        table = _create("torch.aten.view", [flags, grid], vtensor([rows, size // rows], "i1"))
        false = _create("torch.constant.bool", [], ir.Type.parse("!torch.bool"), value=ir.BoolAttr.get(False))
        flags = _create("torch.aten.all.dim", [table, _integer(1), false], vtensor([rows], "i1"))
    return _create("torch.aten.all", [flags], scalar)


def _assert_at_return(function: ir.Operation, deferred: list[tuple[ir.Value, str]]) -> None:
    """The deferred asserts, just before the function returns: by then the host has issued all of
    the call's work, and it waits for that anyway."""
    (block,) = function.regions[0].blocks
    terminator = list(block.operations)[-1]
    with ir.InsertionPoint(terminator), terminator.location:
        for every, message in deferred:
            _assert(every, message)


def _assert(every: ir.Value, message: str) -> None:
    holds = _create("torch.aten.Bool.Tensor", [every], ir.Type.parse("!torch.bool"))
    ir.Operation.create("torch.runtime.assert", operands=[holds], attributes={"message": ir.StringAttr.get(message)})


def _integer(value: int) -> ir.Value:
    attribute = ir.IntegerAttr.get(ir.IntegerType.get_signless(64), value)
    return _create("torch.constant.int", [], ir.Type.parse("!torch.int"), value=attribute)


def _create(name: str, operands: list[ir.Value], result: ir.Type, **attributes: ir.Attribute) -> ir.Value:
    return ir.Operation.create(name, results=[result], operands=operands, attributes=attributes or None).result


_LOCATION = re.compile(r'"([^"]+)":(\d+):\d+')


def _source_line(location: ir.Location) -> str:
    """" at model.py:12" from the op's location (the innermost frame torch.export recorded), or ""
    where that is not a model's Python line (nn.Embedding's own forward, a line of IR)."""
    match = _LOCATION.search(str(location))
    if match is None or not match.group(1).endswith(".py") or "site-packages" in match.group(1):
        return ""
    return f" at {match.group(1).rsplit('/', 1)[-1]}:{match.group(2)}"


def _convention(module: ir.Operation) -> dict:
    """The calling convention kiln records on the module (compiler/stages/aten.py); {} without one."""
    attributes = module.attributes
    if "kiln.calling_convention" not in attributes:
        return {}
    try:
        return json.loads(ir.StringAttr(attributes["kiln.calling_convention"]).value)
    except ValueError:
        return {}


def _generation_functions(convention: dict) -> frozenset[str]:
    """The functions of a `--generate` artifact: their indices are the artifact's own or checked by the runtime."""
    generation = convention.get("generation") or {}
    return frozenset(generation[key] for key in ("prefill", "decode") if key in generation)


def _input_names(convention: dict, function: ir.Operation) -> list[str]:
    """The function's input names from the calling convention, if any."""
    try:
        function_name = ir.StringAttr(function.attributes["sym_name"]).value
        spec = next(item for item in convention["functions"] if item["name"] == function_name)
        return [item["name"] for item in spec["inputs"]]
    except (ValueError, KeyError, TypeError, StopIteration):
        return []


def _ops_in(op: ir.Operation) -> list[ir.Operation]:
    return [inner.operation for block in op.regions[0].blocks for inner in block.operations]


PASS = Pass(
    name="check-index-inputs",
    summary="indices read from the inputs -> a run-time check that they are in range, before the op",
    level="torch",
    run=run,
)
