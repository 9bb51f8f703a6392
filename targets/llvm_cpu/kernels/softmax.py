"""Softmaxes over the last dimension on the row softmax of kiln_rows.c.

A softmax over the last dimension in f32 (the max, exp, sum and division generics kiln's linalg
has for it, attention's included), with an additive mask shared by the leading dimensions or none,
becomes a dispatch of the row softmax (kiln_rows.c): one pass over each row instead of IREE's
three. In a bf16 model with bf16 attention, where the probabilities' only reader is P @ V on the
kernel (which rounds them to bf16), the row softmax writes them in bf16, widened back for the
module's f32 type; gemm.py's `_attention` takes operands widened from bf16 as they were, so neither
the f32 probabilities nor a rounding pass over them remain. The rest of the chain (its max and sum)
is then dead, and IREE drops it.
"""

from __future__ import annotations

from iree.compiler import ir

from . import mlir
from .gemm import attention_operands
from .handoff import (
    Decision,
    HandOff,
    Rows,
    argument_number,
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

# The body of the generic ending a softmax (e / sum(e)): the walk (rewrite.py) hands each to `route`.
DIVISION_BODY = ["arith.divf", "linalg.yield"]


def route(handoff: HandOff, divisions: list[ir.Operation]) -> tuple[str, ...]:
    """Route each division that ends a row softmax to the row softmax kernel; returns the kernels
    used (softmax_f32, softmax_bf16)."""
    used: dict[str, None] = {}
    count = 0
    for division in divisions:
        chain = _softmax_chain(division)
        if chain is None:
            continue
        x, bias = chain
        safe = _safe_select(division.results[0], x, bias)
        flat = Rows(x)
        # In bf16 attention kiln's kernel rounds the probabilities to bf16 for P @ V, as eager's
        # bf16 attention has them: the softmax rounds them itself, widened back to f32 for the
        # module's f32 uses, which gemm.py's _attention sees through.
        out = "bf16" if _rounded_by_attention(handoff, (safe or division).results[0]) else "f32"
        bias_rows = shape_of(bias)[0] if bias is not None else 0
        fresh = mlir.Namer()
        body = [flat.collapsed("%x")]
        lines, y = mlir.softmax_dispatch("%x2", "%b" if bias is not None else None, flat.rows, flat.cols, bias_rows, safe is not None, out, fresh)
        body += lines
        result = _retyped(division.results[0].type, out)
        body += [flat.expanded(y, out, result), f"return %r : {result}"]
        name = f"kiln_cpu_softmax_{count}"
        label = mlir.dims(flat.shape) + (f" + mask {bias_rows}x{flat.cols}" if bias is not None else "")
        arguments = f"%x: {x.type}" + (f", %b: {bias.type}" if bias is not None else "")
        definition = private_function(name, arguments, result, body)
        handoff.replace(division, name, [x, bias] if bias is not None else [x], definition, result if out == "bf16" else None)
        if safe is not None:  # the kernel's zeros: the select, and the pass over the scores before it, go
            safe.results[0].replace_all_uses_with(safe.operands[2])
            safe.erase()
        how = "row softmax of kiln_rows.c" + (", fully masked rows zeros (safe softmax)" if safe is not None else "")
        how += ", rounded to bf16 for attention's P @ V" if out == "bf16" else ""
        handoff.decisions.append(Decision("softmax", label, "kiln", how, element="f32"))
        used[f"softmax_{out}"] = None
        count += 1
    return tuple(used)


def _rounded_by_attention(handoff: HandOff, probabilities: ir.Value) -> bool:
    """Whether every use of `probabilities` (through reshapes) is the left operand of a batch matmul
    of two activations that kiln's kernel takes in a bf16 model with bf16 attention, rounding it
    to bf16 (gemm.py's `_attention`); rows of at most SOFTMAX_BF16_MAX_COLS."""
    if handoff.element != "bf16" or not handoff.attention or shape_of(probabilities)[-1] > mlir.SOFTMAX_BF16_MAX_COLS:
        return False
    values, uses = [probabilities], 0
    while values:
        value = values.pop()
        for use in value.uses:
            user = user_of(use)
            uses += 1
            if user.name in ("tensor.collapse_shape", "tensor.expand_shape"):
                values.append(user.results[0])
            elif user.name != "linalg.batch_matmul" or use.operand_number != 0 or not attention_operands(user):
                return False
    return uses > 0


def _softmax_chain(division: ir.Operation) -> tuple[ir.Value, ir.Value | None] | None:
    """The scores [..., cols] (f32, static) and additive mask [rows, cols] (or None) whose softmax over
    the last dimension `division` computes as e / sum(e), e = exp(s - max(s)), s = scores (+ mask);
    None where `division` is not the end of such a chain."""
    e, total = _elementwise(division, "arith.divf")
    if e is None or total is None or not is_static(e) or element_of(e) != "f32":
        return None
    rank = len(shape_of(e))
    if not row_reduction(_through_unit_reshapes(total), e, "arith.addf", zero=True):
        return None
    exponent = producer_of(e)
    if name_of(exponent) != "linalg.generic" or [o.name for o in body_of(exponent)] != ["math.exp", "linalg.yield"]:
        return None
    if len(exponent.operands) != 2 or not identities(exponent, rank):
        return None
    scores, top = _elementwise(producer_of(exponent.operands[0]), "arith.subf")
    if scores is None or top is None or not row_reduction(_through_unit_reshapes(top), scores, "arith.maximumf"):
        return None
    return _biased(scores)


def _safe_select(p: ir.Value, x: ir.Value, bias: ir.Value | None) -> ir.Operation | None:
    """The op of PyTorch's safe softmax (attention's) after softmax `p` of scores `x` (+ `bias`):
    select(all of the row's scores are -inf, 0, p), the row's test a minimum over isneginf(scores);
    None where `p` has no such user."""
    rank = len(shape_of(p))
    for use in p.uses:
        op = user_of(use)
        if name_of(op) != "linalg.generic" or len(op.operands) != 4 or op.operands[2] != p:
            continue
        if [o.name for o in body_of(op)] != ["arith.select", "linalg.yield"] or list(body_of(op)[0].operands) != [block_argument(op, i) for i in range(3)]:
            continue
        maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
        if maps[0] != row_maps(rank)[0] or maps[1:] != [identity_map(rank)] * 3 or not _zeros(op.operands[1]):
            continue
        if _all_scores_minus_infinity(op.operands[0], x, bias):
            return op
    return None


def _zeros(value: ir.Value) -> bool:
    constant = producer_of(value)
    if name_of(constant) != "arith.constant" or not isinstance(constant.attributes["value"], ir.DenseElementsAttr):
        return False
    attribute = ir.DenseElementsAttr(constant.attributes["value"])
    return attribute.is_splat and str(attribute.get_splat_value()) in ("0.000000e+00 : f32", "-0.000000e+00 : f32")


def _all_scores_minus_infinity(test: ir.Value, x: ir.Value, bias: ir.Value | None) -> bool:
    """Whether `test` [..., 1] (i1) is: min over the last dimension of isneginf(x + bias) != 0, as
    kiln's linalg has PyTorch's safe softmax test it."""
    nonzero = producer_of(test)
    if name_of(nonzero) != "linalg.generic" or [o.name for o in body_of(nonzero)] != ["arith.cmpf", "linalg.yield"]:
        return False
    compare = body_of(nonzero)[0]
    if " une," not in str(compare) or argument_number(compare.operands[0]) != 0 or float_constant(compare.operands[1]) != 0.0:
        return False
    minimum = _through_unit_reshapes(nonzero.operands[0])
    reduction = producer_of(minimum)
    if name_of(reduction) != "linalg.generic" or minimum != reduction.results[0] or "reduction" not in str(list(reduction.attributes["iterator_types"])[-1]):
        return False
    minima = [o for o in body_of(reduction) if o.name == "arith.minimumf"]
    if len(minima) != 1 or {argument_number(v) for v in minima[0].operands} != {0, 1}:
        return False
    init = producer_of(reduction.operands[1])
    if name_of(init) != "linalg.fill" or float_constant(init.operands[0]) != float("inf"):
        return False
    flags = producer_of(reduction.operands[0])
    if name_of(flags) != "linalg.generic":
        return False
    if list(flags.operands)[:-1] == ([x, bias] if bias is not None else [x]):
        steps = [o.name for o in body_of(flags)]
        if steps[: len(steps) - 3] not in (["arith.addf", "arith.extf"], ["arith.addf"], ["arith.extf"], []) or (bias is not None and steps[0] != "arith.addf"):
            return False
    elif not _tests_x_again(flags, x) or bias is not None:
        return False
    compare, convert = body_of(flags)[-3], body_of(flags)[-2]
    return compare.name == "arith.cmpf" and " oeq," in str(compare) and float_constant(compare.operands[1]) == float("-inf") and convert.name == "arith.uitofp"


def _tests_x_again(flags: ir.Operation, x: ir.Value) -> bool:
    """Whether `flags` computes the scores `x` again from x's producer's inputs (kiln's fusion puts
    a mask made from a boolean one, as transformers' DeiT and ViT pass it, into both) before its
    test: the rest of its body is the test alone, on x's value or on x's value widened (to f64)."""
    steps, value, read = reading(flags, x)
    if value is None or read != len(flags.operands) - 1:
        return False
    if [o.name for o in steps[:-3]] == ["arith.extf"] and list(steps[0].operands) == [value]:
        value, steps = steps[0].results[0], steps[1:]
    return len(steps) == 3 and steps[0].operands[0] == value


def _retyped(type_: ir.Type, element: str) -> str:
    """Static tensor type `type_` with `element` in place of its own."""
    return f"tensor<{mlir.dims(ir.RankedTensorType(type_).shape)}x{element}>"


def _elementwise(op: ir.Operation | None, name: str) -> tuple[ir.Value | None, ir.Value | None]:
    """(a, b) where `op` is a parallel generic yielding `name`(a, b[row]) with b broadcast along the
    last dimension (a reduction's result); (None, None) otherwise."""
    if name_of(op) != "linalg.generic" or len(op.operands) != 3 or [o.name for o in body_of(op)] != [name, "linalg.yield"]:
        return None, None
    operation = body_of(op)[0]
    if [argument_number(v) for v in operation.operands] != [0, 1]:
        return None, None
    a, b = op.operands[0], op.operands[1]
    rank = len(shape_of(a)) if is_static(a) else 0
    maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
    if not rank or maps[0] != identity_map(rank) or maps[2] != identity_map(rank) or maps[1] not in row_maps(rank):
        return None, None
    if any("reduction" in str(t) for t in op.attributes["iterator_types"]):
        return None, None
    return a, b


def _biased(scores: ir.Value) -> tuple[ir.Value, ir.Value | None]:
    """(a, mask) where `scores` is a + mask, mask [rows, cols] shared by a's leading dimensions; else (scores, None)."""
    op = producer_of(scores)
    rank = len(shape_of(scores))
    if (
        name_of(op) == "linalg.generic"
        and rank >= 2
        and len(op.operands) == 3
        and [o.name for o in body_of(op)] == ["arith.addf", "linalg.yield"]
        and [argument_number(v) for v in body_of(op)[0].operands] == [0, 1]
        and is_static(op.operands[1])
        and element_of(op.operands[0]) == element_of(op.operands[1]) == "f32"
        and not any("reduction" in str(t) for t in op.attributes["iterator_types"])
    ):
        maps = [str(ir.AffineMapAttr(m).value) for m in op.attributes["indexing_maps"]]
        trailing = f"({', '.join(f'd{i}' for i in range(rank))}) -> (d{rank - 2}, d{rank - 1})"
        if maps[0] == maps[2] == identity_map(rank) and maps[1] == trailing:
            return op.operands[0], op.operands[1]
    return scores, None


def _through_unit_reshapes(value: ir.Value) -> ir.Value:
    """`value` before the expand_shape/collapse_shape ops that only add or drop dimensions of size 1."""
    op = producer_of(value)
    while name_of(op) in ("tensor.expand_shape", "tensor.collapse_shape"):
        source = op.operands[0]
        if [d for d in shape_of(source) if d != 1] != [d for d in shape_of(value) if d != 1]:
            break
        value, op = source, producer_of(source)
    return value
