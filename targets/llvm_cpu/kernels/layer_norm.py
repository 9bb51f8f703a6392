"""Layer norms over the last dimension on the row kernels of kiln_rows.c, or as row programs.

A layer norm over the last dimension (its statistics in f32, the normalization with an optional
weight and bias, the result in f32 or rounded to bf16) becomes one dispatch of the row layer norm:
IREE then computes the normalized value's producer once, instead of again in each of the reductions
it fuses it into, and the row is read from memory once. Where that producer is an elementwise
generic serving the layer norm alone (a GELU, a residual add, a bf16 model's widening), both become
one row program instead (row_program.py): the producer's body on vectors inside the layer norm's
row loop, one dispatch where there were two. Where the statistics are used elsewhere too (returned,
as by training's native_layer_norm), only they go to the kernel (the row moments).
"""

from __future__ import annotations

from dataclasses import dataclass

from iree.compiler import ir
from iree.compiler.dialects import func

from . import mlir, row_program
from .handoff import (
    Decision,
    HandOff,
    Rows,
    argument_number,
    attributes,
    block_argument,
    body_of,
    element_of,
    float_constant,
    identities,
    identity_map,
    is_static,
    name_of,
    private_function,
    producer_of,
    reading,
    row_maps,
    row_reduction,
    shape_of,
    user_of,
)

# The body of the generic computing a layer norm's rstd (1 / sqrt(variance + eps)): the walk
# (rewrite.py) hands each to `route`.
RSTD_BODY = ["arith.addf", "math.rsqrt", "linalg.yield"]


def route(handoff: HandOff, rstds: list[ir.Operation]) -> tuple[str, ...]:
    """Route each layer norm to the row kernels: with its elementwise producer as one row program
    where that producer serves the layer norm alone, else whole (moments, normalization and
    affine) where its mean and rstd serve the normalization alone, else its mean and rstd;
    returns the row kernels of kiln_rows.c used."""
    used: dict[str, None] = {}
    for rstd in rstds:
        chain = _moments_chain(rstd)
        if chain is None:
            continue
        normalization = _normalization(chain, rstd)
        if normalization is None:
            _moments(handoff, chain, rstd)
            used["moments"] = None
            continue
        fused = _fused_producer(chain, normalization)
        if fused is None:
            _layer_norm(handoff, chain, normalization)
            used[f"layer_norm_{normalization.out}"] = None
        else:
            _row_program(handoff, chain, normalization, fused)
    return tuple(used)


def _layer_norm(handoff: HandOff, chain: _Moments, normalization: _Normalization) -> None:
    """The normalization's op replaced by one dispatch of the layer norm; the moments' ops are then dead."""
    x = chain.x
    flat = Rows(x)
    fresh = mlir.Namer()
    body = [flat.collapsed("%x")]
    arguments, operands, affine = [f"%x: {x.type}"], [x], {}
    body += _affine(normalization, flat.cols, arguments, operands, affine)
    out = normalization.out
    lines, y = mlir.layer_norm_dispatch("%x2", affine.get("w"), affine.get("b"), flat.rows, flat.cols, chain.eps, out, fresh)
    _normalized(handoff, normalization, flat, arguments, operands, body + lines, y, "row layer norm of kiln_rows.c")


def _row_program(handoff: HandOff, chain: _Moments, normalization: _Normalization, fused: _Fused) -> None:
    """The normalization's op replaced by a row program computing the layer norm's input too;
    the producer and the moments' ops are then dead."""
    flat = Rows(chain.x)
    fresh = mlir.Namer()
    arguments, operands, body, collapsed = [], [], [], []
    for i, value in enumerate(fused.values):
        arguments.append(f"%a{i}: {value.type}")
        operands.append(value)
        collapsed.append(_collapsed(f"%a{i}", value, fused.program.shape(i), body))
    affine: dict[str, str] = {}
    body += _affine(normalization, flat.cols, arguments, operands, affine)
    name = f"kiln_row_program_{handoff.row_kernels}"
    handoff.add(row_program.executable(name, fused.program))
    lines, y = row_program.dispatch(name, collapsed + [affine[r] for r in ("w", "b") if r in affine], fused.program, fresh)
    how = f"row program: the layer norm and its elementwise producer ({fused.ops} op{'s' if fused.ops != 1 else ''}) in one dispatch"
    _normalized(handoff, normalization, flat, arguments, operands, body + lines, y, how)


def _affine(normalization: _Normalization, cols: int, arguments: list[str], operands: list[ir.Value], affine: dict[str, str]) -> list[str]:
    """Lines making the layer norm's weight and bias f32 [cols] (`affine`: role -> value), which
    are added to the function's `arguments` and `operands`."""
    lines = []
    for role, value in (("w", normalization.weight), ("b", normalization.bias)):
        if value is None:
            continue
        arguments.append(f"%{role}: {value.type}")
        operands.append(value)
        affine[role] = f"%{role}"
        if element_of(value) != "f32":
            lines += mlir.converted(f"%{role}", f"%{role}32", [cols], element_of(value), "f32")  # a weight's: IREE folds it
            affine[role] = f"%{role}32"
    return lines


def _normalized(
    handoff: HandOff, normalization: _Normalization, flat: Rows, arguments: list[str], operands: list[ir.Value], body: list[str], y: str, how: str
) -> None:
    """The normalization's op replaced by a function of `arguments` whose `body` computes the
    [rows][cols] result `y`; the decision says `how`."""
    out = normalization.out
    result = str(normalization.op.results[0].type)
    body = [*body, flat.expanded(y, out, result), f"return %r : {result}"]
    name = f"kiln_cpu_layer_norm_{handoff.row_kernels}"
    handoff.row_kernels += 1
    handoff.replace(normalization.op, name, operands, private_function(name, ", ".join(arguments), result, body))
    parts = [part for part, value in (("weight", normalization.weight), ("bias", normalization.bias)) if value is not None]
    label = mlir.dims(flat.shape) + (f" + {' and '.join(parts)}" if parts else "") + f" -> {out}"
    handoff.decisions.append(Decision("layer norm", label, "kiln", how, element="f32"))


def _moments(handoff: HandOff, chain: _Moments, rstd: ir.Operation) -> None:
    """The mean's and rstd's ops replaced by one dispatch of the row moments."""
    x, mean = chain.x, chain.mean
    flat = Rows(x)
    rows = flat.rows
    fresh = mlir.Namer()
    row_type = str(mean.results[0].type)
    row_shape = shape_of(mean.results[0])
    body = [flat.collapsed("%x")]
    lines, m, r = mlir.moments_dispatch("%x2", rows, flat.cols, chain.eps, fresh)
    body += lines
    spread = [list(range(len(row_shape)))]
    body += [
        f"%m = tensor.expand_shape {m} {spread} output_shape {row_shape} : tensor<{rows}xf32> into {row_type}",
        f"%r = tensor.expand_shape {r} {spread} output_shape {row_shape} : tensor<{rows}xf32> into {row_type}",
        f"return %m, %r : {row_type}, {row_type}",
    ]
    name = f"kiln_cpu_moments_{handoff.row_kernels}"
    handoff.row_kernels += 1
    handoff.add(private_function(name, f"%x: {x.type}", f"({row_type}, {row_type})", body))
    with ir.InsertionPoint(mean), mean.location:
        call = func.CallOp([mean.results[0].type, rstd.results[0].type], ir.FlatSymbolRefAttr.get(name), [x])
    mean.results[0].replace_all_uses_with(call.results[0])
    rstd.results[0].replace_all_uses_with(call.results[1])
    rstd.erase()
    handoff.decisions.append(Decision("layer norm moments", mlir.dims(flat.shape), "kiln", "row moments of kiln_rows.c", element="f32"))


@dataclass(frozen=True)
class _Moments:
    """A layer norm's statistics in kiln's linalg: mean = sum(x) / n, squares = (x - mean)^2 and
    rstd = 1 / sqrt(sum(squares) / n + eps), over the last dimension of f32 `x`. Where x - mean is
    an op of its own (`centered`), squares multiplies its result by itself and the normalization
    reads it: kiln's fusion leaves that form where x's producer, computed again inside the
    subtraction, makes it too costly to compute again in both of its users (Whisper's residual
    stream, the sum of four tensors, one of them broadcast)."""

    x: ir.Value
    mean: ir.Operation
    squares: ir.Operation
    eps: float
    centered: ir.Operation | None = None


@dataclass(frozen=True)
class _Normalization:
    """The generic that normalizes x with the moments: ((x - mean) * rstd) * weight + bias, each
    parameter optional, [cols] of f32 or bf16, its result in `out` (f32, or bf16 by an arith.truncf)."""

    op: ir.Operation
    weight: ir.Value | None
    bias: ir.Value | None
    out: str


def _moments_chain(rstd: ir.Operation) -> _Moments | None:
    """The moments where `rstd` computes 1 / sqrt(sum((x - mean)^2) / n + eps) per row of f32 `x`
    (static, n its last dimension) and the mean's op sum(x) / n; None otherwise."""
    add = body_of(rstd)[0]
    if len(rstd.operands) != 2 or argument_number(add.operands[0]) != 0 or not identities(rstd, len(shape_of(rstd.operands[0]))):
        return None
    eps = float_constant(add.operands[1])
    variance = _row_average(rstd.operands[0])
    if eps is None or variance is None:
        return None
    squares, n = variance
    op = producer_of(squares)
    if name_of(op) != "linalg.generic":
        return None
    centered = _squared(op)
    deviations = centered or op  # the op subtracting the mean
    if len(deviations.operands) < 3:
        return None
    k = len(deviations.operands) - 2  # the inputs before the mean: x's, or its producer's
    mean_value = deviations.operands[k]
    mean, average = producer_of(mean_value), _row_average(mean_value)
    if average is None or average[1] != n or name_of(mean) != "linalg.generic":
        return None
    x = average[0]
    rank = len(shape_of(x)) if is_static(x) else 0
    maps = [str(ir.AffineMapAttr(m).value) for m in deviations.attributes["indexing_maps"]]
    if not rank or element_of(x) != "f32" or n != shape_of(x)[-1] or maps[-1] != identity_map(rank) or maps[k] not in row_maps(rank):
        return None
    if centered is not None and not identities(op, rank):
        return None
    steps, value, read = reading(deviations, x)
    rest = ["linalg.yield"] if centered else ["arith.mulf", "linalg.yield"]
    if read != k or [o.name for o in steps] != ["arith.subf", *rest]:
        return None
    sub = steps[0]
    if list(sub.operands) != [value, block_argument(deviations, k)]:
        return None
    if centered is None and list(steps[1].operands) != [sub.results[0], sub.results[0]]:
        return None
    return _Moments(x, mean, op, eps, centered)


def _squared(op: ir.Operation) -> ir.Operation | None:
    """The elementwise generic whose result `op` multiplies by itself, element by element; None
    where `op` computes anything else."""
    steps = body_of(op)
    if [o.name for o in steps] != ["arith.mulf", "linalg.yield"] or len(op.results) != 1:
        return None
    read = {list(op.operands)[argument_number(v)] for v in steps[0].operands if argument_number(v) is not None}
    if len(read) != 1 or any(argument_number(v) is None for v in steps[0].operands):
        return None
    producer = producer_of(read.pop())
    if name_of(producer) != "linalg.generic" or len(producer.results) != 1:
        return None
    if any("reduction" in str(t) for t in producer.attributes["iterator_types"]):
        return None
    return producer


def _normalization(chain: _Moments, rstd: ir.Operation) -> _Normalization | None:
    """The one op that uses the chain's mean and rstd besides the chain itself, where it normalizes x
    (see _Normalization); None where there is none, or the statistics are used elsewhere too."""
    mean, deviation = chain.mean.results[0], rstd.results[0]
    users = {user_of(use) for use in (*mean.uses, *deviation.uses)} - {chain.squares, chain.centered}
    if len(users) != 1:
        return None
    (op,) = users
    rank = len(shape_of(chain.x))
    if name_of(op) != "linalg.generic" or len(op.results) != 1 or shape_of(op.results[0]) != shape_of(chain.x):
        return None
    ins = list(op.operands)[: len(op.operands) - 1]
    maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
    dims = ", ".join(f"d{i}" for i in range(rank))
    column = f"({dims}) -> (d{rank - 1})"
    if chain.centered is None:  # ins: x's (k of them), mean, rstd, then the parameters
        steps, value, k = reading(op, chain.x)
        if value is None or ins[k : k + 2] != [mean, deviation] or maps[k] not in row_maps(rank):
            return None
        if [o.name for o in steps[:1]] != ["arith.subf"] or list(steps[0].operands) != [value, block_argument(op, k)]:
            return None
        value, steps, k = steps[0].results[0], steps[1:], k + 1
    else:  # ins: x - mean, rstd, then the parameters
        steps, value, k = body_of(op), block_argument(op, 0), 1
        if ins[:2] != [chain.centered.results[0], deviation] or maps[0] != identity_map(rank):
            return None
    first = k + 1  # the parameters' first input
    if maps[-1] != identity_map(rank) or maps[k] not in row_maps(rank) or any(m != column for m in maps[first : len(ins)]):
        return None
    if steps[0].name != "arith.mulf" or set(steps[0].operands) != {value, block_argument(op, k)}:
        return None
    value, parameters, widened, out = steps[0].results[0], {}, {}, "f32"
    for step in steps[1:-1]:
        operands = list(step.operands)
        if step.name == "arith.extf" and (argument_number(operands[0]) or 0) >= first:
            widened[step.results[0]] = argument_number(operands[0])
            continue
        if step.name in ("arith.mulf", "arith.addf") and value in operands and out == "f32":
            role = "weight" if step.name == "arith.mulf" else "bias"
            other = operands[1] if operands[0] == value else operands[0]
            number = widened.get(other, argument_number(other))
            if role in parameters or (role == "weight" and "bias" in parameters) or number is None or number < first:
                return None
            parameters[role], value = ins[number], step.results[0]
            continue
        if step.name == "arith.truncf" and operands == [value] and str(step.results[0].type) == "bf16":
            value, out = step.results[0], "bf16"
            continue
        return None
    if list(steps[-1].operands) != [value] or element_of(op.results[0]) != out:
        return None
    if any(len(shape_of(v)) != 1 or element_of(v) not in ("f32", "bf16") for v in parameters.values()):
        return None
    return _Normalization(op, parameters.get("weight"), parameters.get("bias"), out)


@dataclass(frozen=True)
class _Fused:
    """A layer norm's elementwise producer as a row program: its input `values`, in the program's order."""

    program: row_program.LayerNormProgram
    values: tuple[ir.Value, ...]
    ops: int  # the producer's body, for the report


# Element types a row program reads its inputs in.
_ROW_PROGRAM_INPUTS = ("f32", "bf16", "f16")


def _fused_producer(chain: _Moments, normalization: _Normalization) -> _Fused | None:
    """The row program computing the layer norm with the elementwise generic producing its x, where
    the layer norm is x's only use, each input is read per element, per column or per row, and the
    body is arith and math ops on those inputs and scalar constants; None otherwise."""
    x, producer = chain.x, producer_of(chain.x)
    if name_of(producer) != "linalg.generic" or len(producer.results) != 1:
        return None
    rank, cols = len(shape_of(x)), shape_of(x)[-1]
    maps = [str(ir.AffineMapAttr(m).value) for m in producer.attributes["indexing_maps"]]
    if rank < 2 or cols % row_program.WIDTH or cols > row_program.MAX_COLS or maps[-1] != identity_map(rank):
        return None
    if any("reduction" in str(t) for t in producer.attributes["iterator_types"]):
        return None
    total = producer_of(chain.mean.operands[0])
    if {user_of(use) for use in x.uses} - {total, chain.squares, chain.centered, normalization.op}:
        return None
    dims = ", ".join(f"d{i}" for i in range(rank))
    reads = {identity_map(rank): "element", f"({dims}) -> (d{rank - 1})": "column", **dict.fromkeys(row_maps(rank), "row")}
    values = tuple(producer.operands)[: len(producer.operands) - 1]
    inputs = []
    for value, indexing in zip(values, maps, strict=False):
        kind = reads.get(indexing)
        if kind is None or not is_static(value) or element_of(value) not in _ROW_PROGRAM_INPUTS:
            return None
        inputs.append(row_program.Input(kind, element_of(value)))
    body = _vector_body(producer)
    if body is None:
        return None
    lines, value = body
    flat = Rows(x)
    program = row_program.LayerNormProgram(
        tuple(inputs), tuple(lines), value, flat.rows, cols, chain.eps,
        normalization.weight is not None, normalization.bias is not None, normalization.out,
    )  # fmt: skip
    return _Fused(program, values, len(body_of(producer)) - 1)


def _vector_body(producer: ir.Operation) -> tuple[list[str], str] | None:
    """(lines, result) computing `producer`'s body on vectors from `%in<i>` (its inputs): each op in
    generic form with its attributes and its types widened to vectors, each scalar constant it reads
    broadcast; None where an op is not an arith or math op of one result, or reads another value."""
    names: dict[ir.Value, str] = {block_argument(producer, i): f"%in{i}" for i in range(len(producer.operands) - 1)}
    lines: list[str] = []
    fresh = mlir.Namer()

    def splat(constant: ir.Operation) -> str | None:
        element = str(constant.results[0].type)
        if "<" in element:
            return None
        name = fresh("k")
        lines.extend(
            [f"{name}s = arith.constant {constant.attributes['value']}", f"{name} = vector.broadcast {name}s : {element} to {row_program.vector(element)}"]
        )
        return name

    steps = body_of(producer)
    for op in steps[:-1]:
        if op.name.split(".")[0] not in ("arith", "math") or len(op.results) != 1 or len(op.regions):
            return None
        if op.name == "arith.constant":
            name = splat(op)
            if name is None:
                return None
            names[op.results[0]] = name
            continue
        operands = []
        for value in op.operands:
            if value not in names:
                constant = producer_of(value)
                name = splat(constant) if name_of(constant) == "arith.constant" else None
                if name is None:
                    return None
                names[value] = name
            operands.append(names[value])
        element = str(op.results[0].type)
        if "<" in element:
            return None
        result = fresh("v")
        listed = ", ".join(f"{name} = {value}" for name, value in attributes(op))
        types = ", ".join(row_program.vector(str(value.type)) for value in op.operands)
        lines.append(f'{result} = "{op.name}"({", ".join(operands)}) {{{listed}}} : ({types}) -> {row_program.vector(element)}')
        names[op.results[0]] = result
    yielded = steps[-1].operands[0]
    if yielded not in names or str(yielded.type) != "f32":
        return None
    return lines, names[yielded]


def _collapsed(name: str, value: ir.Value, shape: list[int], lines: list[str]) -> str:
    """`name` (of `value`'s static type) as a tensor of `shape`, its leading dimensions merged (a
    line added to `lines` where the shapes differ)."""
    source = shape_of(value)
    if source == shape:
        return name
    lead = len(source) - (len(shape) - 1)
    groups = [list(range(lead))] + [[axis] for axis in range(lead, len(source))]
    lines.append(f"{name}c = tensor.collapse_shape {name} {groups} : {value.type} into tensor<{mlir.dims(shape)}x{element_of(value)}>")
    return f"{name}c"


def _row_average(value: ir.Value) -> tuple[ir.Value, float] | None:
    """(x, n) where `value` is sum(x) / n over x's last dimension (a zero-filled reduction, then a
    division by the constant n); None otherwise."""
    op = producer_of(value)
    if name_of(op) != "linalg.generic" or len(op.operands) != 2 or [o.name for o in body_of(op)] != ["arith.divf", "linalg.yield"]:
        return None
    divide = body_of(op)[0]
    n = float_constant(divide.operands[1])
    if argument_number(divide.operands[0]) != 0 or n is None or not identities(op, len(shape_of(value))):
        return None
    total = producer_of(op.operands[0])
    if name_of(total) != "linalg.generic" or not op.operands[0].owner or not row_reduction(op.operands[0], total.operands[0], "arith.addf", zero=True):
        return None
    return total.operands[0], n
