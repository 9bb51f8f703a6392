"""Contractions on kiln's implicit-GEMM kernel (kiln_gemm_*.c): convolutions, matmuls, batch matmuls.

Each contraction of the model's element type that matches becomes a call to a private function
holding the layout changes, the weight packing and the kernel's dispatch (mlir.py):

- `linalg.conv_2d_nchw_fchw`, bf16 x bf16 -> f32, dilation 1, one stride, cin % 32 == 0: the padded
  input to NHWC, the implicit-GEMM dispatch, the result back to NCHW plus the op's init (a bias).
- `linalg.matmul` as kiln lowers a bf16 Linear: extf(x) @ extf(transpose(W)). Activations
  kiln computed in f32 but rounded through bf16 (a GELU between two Linears) are truncated to bf16,
  which is exact, and IREE fuses into their producer.
- `linalg.batch_matmul` whose right side is one bf16 weight broadcast over the batch: one GEMM.
- With `attention`, a `linalg.batch_matmul` of two activations in a bf16 model (attention's Q K^T and
  P V, which kiln's linalg computes in f32): both are rounded to bf16, as eager PyTorch's bf16
  attention computes them (its softmax output goes to the second matmul in bf16). kiln's default;
  `--cpu-attention f32` keeps kiln's more precise f32 attention.

In an f32 model (no bf16 contraction), the same contractions in f32 x f32 -> f32, attention's batch
matmuls included, go to the kernel's f32 path (AVX-512F FMAs, f32 arithmetic throughout: the
precision of eager PyTorch's f32; `--cpu-attention` is about bf16 models only).

The kernel walks K in steps of 32: a bf16 contraction with another K (a sequence of 197 tokens in
attention's P V, a head of 80) gets zeros on both operands up to the next multiple of 32, which add
nothing to the products, where it is large enough to pay for them (MIN_PADDED_MACS) and they are
not over MAX_WINDOW_WASTE times the multiply-adds.

The weight packing sits on the weight's value (a constant or a parameter global), so IREE hoists it
into an initializer: it runs once, at load time. A contraction that does not match stays with IREE
(`_Skip` says why), and each gets a Decision.
"""

from __future__ import annotations

from iree.compiler import ir

from . import mlir
from .features import AVX512F
from .geometry import Call, conv_call, matmul_call, row_window, row_window_call
from .handoff import (
    Decision,
    HandOff,
    body_of,
    element_of,
    is_static,
    name_of,
    padded_by_constant,
    private_function,
    producer_of,
    shape_of,
)

# A convolution whose input channels are not a multiple of 32 is computed as a row window (geometry.py),
# and a matmul's K padded with zeros to the next multiple of 32, unless that rounding would make over
# this many times the multiply-adds.
MAX_WINDOW_WASTE = 4

# The multiply-adds (K padded) from which a bf16 contraction whose K is no multiple of 32 takes the
# kernel: the zeros cost a copy of the activations and the right side's packing each call. Measured
# on the 16-core Xeon, attention's P V (results/ab-xeon-padded-k.json): at 1.1e9 the kernel won
# (DeiT-S at batch 64 0.93x, BEiT-B at batch 32 0.82x the call's time), at 1.7e7 and below it lost
# (DeiT-S at batch 1 1.07x, CLIP-B/32 at batch 1 1.22x); the crossover lies between, not measured
# closer. f32 contractions lost at both sizes (DeiT-S 1.08-1.10x): IREE's f32 code keeps them.
MIN_PADDED_MACS = 1 << 27

CONTRACTIONS = ("linalg.conv_2d_nchw_fchw", "linalg.matmul", "linalg.batch_matmul")
# Other contractions kiln's linalg has for bf16 models, listed in the report as IREE's.
OTHERS = {
    "linalg.depthwise_conv_2d_nchw_chw": "a depthwise convolution is not a GEMM",
    "linalg.conv_2d_nhwc_hwcf": "kiln's kernel takes the NCHW convolutions kiln's linalg has",
}


class _Skip(Exception):
    """The op stays with IREE, for the reason given."""


def route(handoff: HandOff, ops: list[ir.Operation]) -> None:
    """Route each contraction of `ops` (CONTRACTIONS and OTHERS, in the module's order) that the
    kernel takes to it, on the path for the model's element type; a Decision for each."""
    path = handoff.isa.name if handoff.element == "bf16" else AVX512F.name
    for op in ops:
        name, label = op.name, _label(op)  # read before the op is replaced
        if name in OTHERS:
            handoff.decisions.append(Decision(name, label, "iree", OTHERS[name]))
            continue
        rewrite = {"linalg.conv_2d_nchw_fchw": _conv, "linalg.matmul": _matmul}.get(name, _batch_matmul)
        try:
            call = rewrite(handoff, op)
        except _Skip as why:
            handoff.decisions.append(Decision(name, label, "iree", str(why)))
            continue
        handoff.taken += 1
        handoff.decisions.append(Decision(name, label, "kiln", f"{path} path of kiln_gemm_{path}.c", call, handoff.element))


def involves_bf16(op: ir.Operation) -> bool:
    """Whether either operand of contraction `op` is bf16, or f32 widened from bf16: a bf16 model's."""
    return any(
        isinstance(v.type, ir.RankedTensorType) and (element_of(v) == "bf16" or _widened_from_bf16(v) is not None)
        for v in list(op.operands)[:2]
    )


def _label(op: ir.Operation) -> str:
    shapes = " * ".join("x".join(map(str, shape_of(v))) for v in list(op.operands)[:2] if is_static(v))
    if op.name.startswith("linalg.conv"):
        strides = list(ir.DenseIntElementsAttr(op.attributes["strides"]))
        shapes += f" stride {strides[0] if len(set(strides)) == 1 else strides}"
    return shapes


def _function_name(handoff: HandOff, kind: str) -> str:
    return f"kiln_cpu_{kind}_{handoff.taken}"


def _conv(handoff: HandOff, op: ir.Operation) -> Call:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    _require_static_and_filled(x, w, init)
    e = handoff.element
    if (element_of(x), element_of(w), element_of(init)) != (e, e, "f32"):
        raise _Skip(f"{element_of(x)} x {element_of(w)} -> {element_of(init)}, not {e} x {e} -> f32")
    if set(ir.DenseIntElementsAttr(op.attributes["dilations"])) != {1}:
        raise _Skip("dilated")
    strides = set(ir.DenseIntElementsAttr(op.attributes["strides"]))
    if len(strides) != 1:
        raise _Skip("different strides along height and width")
    nb, cin, hp, wp = shape_of(x)
    cout, _, kh, kw = shape_of(w)
    stride = strides.pop()
    if cin % 32 == 0:
        call = conv_call(nb, hp, wp, cin, cout, kh, kw, stride)
    elif row_window(kw, cin) <= MAX_WINDOW_WASTE * kw * cin:
        call = row_window_call(nb, hp, wp, cin, cout, kh, kw, stride)
    else:
        raise _Skip(f"{cin} input channels x {kw} columns: a row window would be over {MAX_WINDOW_WASTE}x zeros")
    zero = _is_zero_fill(init)
    fresh = mlir.Namer()
    # The input's zero padding is done after the change to NHWC, so that IREE can fold that
    # transpose into the producer (a pad between them keeps it from doing so).
    source, low, high = _unpadded(x)
    _, _, h, w_ = shape_of(source)
    if call.hp != hp:  # a row window reads past the input's end: zero rows for it (row_window_call)
        high = [high[0] + call.hp - hp, high[1]]
    nhwc = f"tensor<{nb}x{h}x{w_}x{cin}x{e}>"
    out = f"tensor<{nb}x{cout}x{call.oh}x{call.ow}xf32>"
    body = [
        f"%te = tensor.empty() : {nhwc}",
        f"%t = linalg.transpose ins(%x : {source.type}) outs(%te : {nhwc}) permutation = [0, 2, 3, 1]",
    ]
    nhwc_value = "%t"
    if any(low) or any(high):
        body += [
            f"%pz = arith.constant 0.0 : {e}",
            f"%tp = tensor.pad %t low[0, {low[0]}, {low[1]}, 0] high[0, {high[0]}, {high[1]}, 0] {{\n"
            f"    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n      tensor.yield %pz : {e}\n"
            f"    }} : {nhwc} to tensor<{nb}x{call.hp}x{wp}x{cin}x{e}>",
        ]
        nhwc_value = "%tp"
    lines, packed = mlir.pack_weights("%w", call, "oihw", fresh, conv=(cin, kh, kw), element=e)
    body += lines
    lines, y = mlir.dispatch(nhwc_value, packed, call, fresh, e)
    body += lines
    body += _nchw_result(y, call, None if zero else "%init")
    name = _function_name(handoff, "conv")
    arguments = f"%x: {source.type}, %w: {w.type}" + ("" if zero else f", %init: {out}")
    handoff.replace(op, name, [source, w] if zero else [source, w, init], private_function(name, arguments, out, body))
    return call


def _matmul(handoff: HandOff, op: ir.Operation) -> Call:
    a, b, init = op.operands[0], op.operands[1], op.operands[2]
    _require_static_and_filled(a, b, init)
    if element_of(init) != "f32":
        raise _Skip(f"{element_of(init)} result, not f32")
    m, k = shape_of(a)
    n = shape_of(b)[1]
    _check_depth(handoff.element, k, m * n)
    if handoff.element == "f32":
        if (element_of(a), element_of(b)) != ("f32", "f32"):
            raise _Skip(f"{element_of(a)} x {element_of(b)}, not f32 x f32")
        weight, layout = _weight_of(b)
        return _gemm(handoff, op, a, False, [m, k], weight, layout, n, init)
    b16 = _widened_from_bf16(b) if element_of(b) == "f32" else b if element_of(b) == "bf16" else None
    if b16 is None:
        raise _Skip("the right operand is not bf16")
    weight, layout = _weight_of(b16)
    a16, truncate = _activations(a)
    return _gemm(handoff, op, a16, truncate, [m, k], weight, layout, n, init)


def _batch_matmul(handoff: HandOff, op: ir.Operation) -> Call:
    a, b, init = op.operands[0], op.operands[1], op.operands[2]
    _check_batch_matmul(op, handoff.element)
    batch, m, k = shape_of(a)
    n = shape_of(b)[2]
    shared = _shared_weight(b, handoff.element)
    if shared is not None:
        weight, layout = _weight_of(shared)
        a16, truncate = _activations(a) if handoff.element == "bf16" else (a, False)
        return _gemm(handoff, op, a16, truncate, [batch, m, k], weight, layout, n, init)
    if not handoff.attention and handoff.element == "bf16":
        raise _Skip("both operands are activations (attention), kept in f32 (--cpu-attention f32)")
    return _attention(handoff, op, a, b, batch, m, k, n, init)


def _gemm(
    handoff: HandOff,
    op: ir.Operation,
    a16: ir.Value,
    truncate: bool,
    a_shape: list[int],
    weight: ir.Value,
    layout: str,
    n: int,
    init: ir.Value,
) -> Call:
    """`op` as one GEMM of the activations [..., M, K] (the model's element type, or bf16-valued f32
    in a bf16 model) by a packed weight."""
    e = handoff.element
    k = a_shape[-1]
    m = 1
    for size in a_shape[:-1]:
        m *= size
    depth = _rounded(k)
    kx = depth + mlir.row_padding(depth, e)
    call = matmul_call(m, depth, n, pixel_stride=kx)
    fresh = mlir.Namer()
    a_type = f"tensor<{mlir.dims(a_shape)}x{'f32' if truncate else e}>"
    out = f"tensor<{mlir.dims([*a_shape[:-1], n])}xf32>"
    body, x = [], "%a"
    if len(a_shape) == 3:
        body.append(f"%a2 = tensor.collapse_shape %a [[0, 1], [2]] : {a_type} into tensor<{m}x{k}x{'f32' if truncate else e}>")
        x = "%a2"
    if truncate:
        lines, x = mlir.truncate(x, [m, k], fresh)
        body += lines
    lines, packed = mlir.pack_weights("%w", call, layout, fresh, element=e, depth=k)
    body += lines
    lines, x = mlir.pad_last(x, [m, k], kx - k, fresh, e)
    body += lines
    rows, strip = call.oh, call.ow
    body.append(
        f"%x = tensor.expand_shape {x} [[0, 1, 2], [3]] output_shape [1, {rows}, {strip}, {kx}] : "
        f"tensor<{m}x{kx}x{e}> into tensor<1x{rows}x{strip}x{kx}x{e}>"
    )
    lines, y = mlir.dispatch("%x", packed, call, fresh, e)
    body += lines
    body.append(f"%r = tensor.collapse_shape {y} [[0, 1, 2], [3]] : tensor<1x{rows}x{strip}x{n}xf32> into tensor<{m}x{n}xf32>")
    result = "%r"
    if len(a_shape) == 3:
        body.append(
            f"%r3 = tensor.expand_shape %r [[0, 1], [2]] output_shape [{a_shape[0]}, {a_shape[1]}, {n}] : "
            f"tensor<{m}x{n}xf32> into {out}"
        )
        result = "%r3"
    zero = _is_zero_fill(init)
    if not zero:
        lines, result = _add_init(result, "%init", [*a_shape[:-1], n], fresh)
        body += lines
    body.append(f"return {result} : {out}")
    name = _function_name(handoff, "matmul")
    arguments = f"%a: {a_type}, %w: {weight.type}" + ("" if zero else f", %init: {out}")
    handoff.replace(op, name, [a16, weight] if zero else [a16, weight, init], private_function(name, arguments, out, body))
    return call


def _attention(
    handoff: HandOff, op: ir.Operation, a: ir.Value, b: ir.Value, batch: int, m: int, k: int, n: int, init: ir.Value
) -> Call:
    """A batch matmul of two activations, the right one packed on every call: in a bf16 model both
    rounded to bf16, in an f32 model in f32."""
    e = handoff.element
    depth = _rounded(k)
    kx = depth + mlir.row_padding(depth, e)
    call = matmul_call(m, depth, n, batch=batch, batched=True, pixel_stride=kx)
    strip = call.ow
    fresh = mlir.Namer()
    body, names = [], {}
    operands = {"a": a, "b": b}
    for label, shape in (("a", [batch, m, k]), ("b", [batch, k, n])):
        value, names[label] = operands[label], f"%{label}"
        narrow = _bf16_behind(value) if e == "bf16" and element_of(value) != e else None
        if narrow is not None:  # widened from bf16 (a softmax kiln rounded, a bf16 model's V): taken as it was
            operands[label], reshape = narrow
            if reshape is not None:
                body.append(_reshaped(f"%{label}", reshape, operands[label].type, f"tensor<{mlir.dims(shape)}xbf16>"))
                names[label] = f"%{label}_r"
        elif element_of(value) != e:
            lines, names[label] = mlir.truncate(f"%{label}", shape, fresh)
            body += lines
    a, b = operands["a"], operands["b"]
    lines, packed = mlir.pack_batched(names["b"], call, fresh, e, depth=k)
    body += lines
    lines, rows = mlir.pad_last(names["a"], [batch, m, k], kx - k, fresh, e)
    body += lines
    body.append(
        f"%x = tensor.expand_shape {rows} [[0], [1, 2], [3]] output_shape [{batch}, {m // strip}, {strip}, {kx}] : "
        f"tensor<{batch}x{m}x{kx}x{e}> into tensor<{batch}x{m // strip}x{strip}x{kx}x{e}>"
    )
    lines, y = mlir.dispatch("%x", packed, call, fresh, e)
    body += lines
    out = f"tensor<{batch}x{m}x{n}xf32>"
    body.append(f"%r = tensor.collapse_shape {y} [[0], [1, 2], [3]] : tensor<{batch}x{m // strip}x{strip}x{n}xf32> into {out}")
    result = "%r"
    zero = _is_zero_fill(init)
    if not zero:
        lines, result = _add_init(result, "%init", [batch, m, n], fresh)
        body += lines
    body.append(f"return {result} : {out}")
    name = _function_name(handoff, "attention")
    arguments = f"%a: {a.type}, %b: {b.type}" + ("" if zero else f", %init: {out}")
    handoff.replace(op, name, [a, b] if zero else [a, b, init], private_function(name, arguments, out, body))
    return call


def _rounded(k: int) -> int:
    """K rounded up to the kernel's steps of 32."""
    return -(-k // 32) * 32


def _check_depth(element: str, k: int, outputs: int) -> None:
    """_Skip a contraction of `outputs` results over K that the kernel takes only with zeros where
    they do not pay (MIN_PADDED_MACS) or would be most of the work (MAX_WINDOW_WASTE)."""
    depth = _rounded(k)
    if depth == k:
        return
    if element != "bf16":
        raise _Skip(f"K = {k}, not a multiple of 32 (in f32, zeros up to one cost more than they gain)")
    if outputs * depth < MIN_PADDED_MACS:
        raise _Skip(f"K = {k}, not a multiple of 32, in a contraction too small for zeros up to {depth} to pay")
    if depth > MAX_WINDOW_WASTE * k:
        raise _Skip(f"K = {k}: rounded up to {depth}, it would be over {MAX_WINDOW_WASTE}x zeros")


def _is_zero_fill(value: ir.Value) -> bool:
    fill = producer_of(value)
    if name_of(fill) != "linalg.fill":
        return False
    scalar = producer_of(fill.operands[0])
    if name_of(scalar) != "arith.constant":
        return False
    attribute = scalar.attributes["value"]
    return isinstance(attribute, ir.FloatAttr) and attribute.value == 0.0


def _is_identity(attribute: ir.Attribute) -> bool:
    affine = ir.AffineMapAttr(attribute).value
    return [str(e) for e in affine.results] == [f"d{i}" for i in range(affine.n_dims)]


def _widened_from_bf16(value: ir.Value) -> ir.Value | None:
    """The bf16 tensor that f32 `value` is a plain extf of, else None."""
    generic = producer_of(value)
    if name_of(generic) != "linalg.generic" or len(generic.operands) != 2:
        return None
    if [op.name for op in body_of(generic)] != ["arith.extf", "linalg.yield"]:
        return None
    source = generic.operands[0]
    if element_of(source) != "bf16" or shape_of(source) != shape_of(value):
        return None
    if not all(_is_identity(m) for m in generic.attributes["indexing_maps"]):
        return None
    return source


def _bf16_valued(value: ir.Value) -> bool:
    """Whether f32 `value` is made by a generic that yields extf of a bf16 value: exact in bf16."""
    generic = producer_of(value)
    if name_of(generic) != "linalg.generic" or len(generic.results) != 1:
        return False
    yielded = producer_of(body_of(generic)[-1].operands[0])
    return name_of(yielded) == "arith.extf" and str(yielded.operands[0].type) == "bf16"


def _require_static_and_filled(*values: ir.Value) -> None:
    """Skip an op whose operands have dynamic shapes, or an empty one: with nothing to multiply, the
    kernel would never write the result."""
    if not all(is_static(v) for v in values):
        raise _Skip("dynamic shapes")
    if any(0 in shape_of(v) for v in values):
        raise _Skip("an empty operand")


def _unpadded(x: ir.Value) -> tuple[ir.Value, list[int], list[int]]:
    """The NCHW tensor `x` zero-pads in height and width, with the low and high padding; else `x`, 0s."""
    source, low, high, value = padded_by_constant(x)
    if value is not None and not (isinstance(value, ir.FloatAttr) and value.value == 0.0):
        return x, [0, 0], [0, 0]
    return source, low, high


def _weight_of(b16: ir.Value) -> tuple[ir.Value, str]:
    """The weight behind a bf16 [K, N] right operand: W [N, K] when it is W's transpose, else itself."""
    transpose = producer_of(b16)
    if name_of(transpose) == "linalg.transpose" and list(ir.DenseI64ArrayAttr(transpose.attributes["permutation"])) == [1, 0]:
        return transpose.operands[0], "nk"
    return b16, "kn"


def _bf16_behind(a: ir.Value) -> tuple[ir.Value, ir.Operation | None] | None:
    """(the bf16 tensor, the reshape after its widening or None) where f32 `a` is a plain widening of
    a bf16 tensor, or a collapse or expand of one; None otherwise."""
    widened = _widened_from_bf16(a)
    if widened is not None:
        return widened, None
    reshape = producer_of(a)
    if name_of(reshape) in ("tensor.collapse_shape", "tensor.expand_shape"):
        widened = _widened_from_bf16(reshape.operands[0])
        if widened is not None:
            return widened, reshape
    return None


def _reshaped(source: str, reshape: ir.Operation, source_type: ir.Type, result_type: str) -> str:
    """The line making `source`_r: `reshape` (a collapse or expand) applied to `source`, of type
    `source_type`, giving `result_type`."""
    groups = reshape.attributes["reassociation"]
    if reshape.name == "tensor.collapse_shape":
        return f"{source}_r = tensor.collapse_shape {source} {groups} : {source_type} into {result_type}"
    shape = shape_of(reshape.results[0])
    return f"{source}_r = tensor.expand_shape {source} {groups} output_shape {shape} : {source_type} into {result_type}"


def _shared_weight(b: ir.Value, element: str) -> ir.Value | None:
    """The weight [K][N] of `element` that a batch matmul's right operand `b` broadcasts over the batch
    (one GEMM), else None (b is an activation: attention's K^T or V)."""
    broadcast = producer_of(b)
    shared = (
        name_of(broadcast) == "linalg.generic"
        and len(broadcast.operands) == 2
        and element_of(b) == element
        and [o.name for o in body_of(broadcast)] == ["linalg.yield"]
        and "(d0, d1, d2) -> (d1, d2)" in str(broadcast.attributes["indexing_maps"])
    )
    return broadcast.operands[0] if shared else None


def _check_batch_matmul(op: ir.Operation, element: str) -> None:
    """Skip batch matmul `op` of a model of `element` where the kernel cannot take it."""
    a, b, init = op.operands[0], op.operands[1], op.operands[2]
    _require_static_and_filled(a, b, init)
    if element_of(init) != "f32":
        raise _Skip(f"{element_of(init)} result, not f32")
    batch, m, k = shape_of(a)
    _check_depth(element, k, batch * m * shape_of(b)[2])
    if element == "f32" and (element_of(a), element_of(b)) != ("f32", "f32"):
        raise _Skip(f"{element_of(a)} x {element_of(b)}, not f32 x f32")


def attention_operands(op: ir.Operation) -> bool:
    """Whether `_batch_matmul` gives batch matmul `op` of a bf16 model to `_attention`: the kernel
    takes it, and its right operand is an activation, not a shared weight."""
    try:
        _check_batch_matmul(op, "bf16")
    except _Skip:
        return False
    return _shared_weight(op.operands[1], "bf16") is None


def _activations(a: ir.Value) -> tuple[ir.Value, bool]:
    """The bf16 activations behind a matmul's left operand, and whether they must be truncated (exactly)."""
    if element_of(a) == "bf16":
        return a, False
    widened = _widened_from_bf16(a)
    if widened is not None:
        return widened, False
    if _bf16_valued(a):
        return a, True
    raise _Skip("the left operand is f32 with values that are not all bf16")


def _nchw_result(y: str, call: Call, init: str | None) -> list[str]:
    """Lines turning the kernel's NHWC f32 result into the op's NCHW result (plus `init`), returned.

    The init (a bias) is added while the result is NHWC, and a plain transpose makes it NCHW: IREE
    moves such a transpose into the consumers, NHWC themselves in a channels-last network. Added by
    one generic that wrote NCHW, the sum stayed NCHW, and ConvNeXt-T's residual adds read it across
    its channels (on the 16-core Xeon, bf16: 13.6 -> 10.2 ms at batch 1, 236 -> 203 at batch 32)."""
    nb, cout, oh, ow = call.nb, call.cout, call.oh, call.ow
    out, nhwc = f"tensor<{nb}x{cout}x{oh}x{ow}xf32>", f"tensor<{nb}x{oh}x{ow}x{cout}xf32>"
    lines, result = [], y
    if init is not None:
        identity = "affine_map<(d0, d1, d2, d3) -> (d0, d1, d2, d3)>"
        nchw_map = "affine_map<(d0, d1, d2, d3) -> (d0, d3, d1, d2)>"
        parallel = ", ".join(['"parallel"'] * 4)
        lines = [
            f"%se = tensor.empty() : {nhwc}",
            f"%s = linalg.generic {{indexing_maps = [{identity}, {nchw_map}, {identity}], iterator_types = [{parallel}]}} "
            f"ins({y}, {init} : {nhwc}, {out}) outs(%se : {nhwc}) {{\n"
            "    ^bb0(%v: f32, %i: f32, %o: f32):\n      %a = arith.addf %v, %i : f32\n      linalg.yield %a : f32\n"
            f"    }} -> {nhwc}",
        ]
        result = "%s"
    return [
        *lines,
        f"%re = tensor.empty() : {out}",
        f"%r = linalg.transpose ins({result} : {nhwc}) outs(%re : {out}) permutation = [0, 3, 1, 2]",
        f"return %r : {out}",
    ]


def _add_init(value: str, init: str, shape: list[int], fresh: mlir.Namer) -> tuple[list[str], str]:
    """Lines adding a contraction's (non-zero) init to its result, elementwise in f32."""
    rank = len(shape)
    identity = f"affine_map<({', '.join(f'd{i}' for i in range(rank))}) -> ({', '.join(f'd{i}' for i in range(rank))})>"
    parallel = ", ".join(['"parallel"'] * rank)
    tensor = f"tensor<{mlir.dims(shape)}xf32>"
    name = fresh("sum")
    return [
        f"{name}e = tensor.empty() : {tensor}",
        f"{name} = linalg.generic {{indexing_maps = [{identity}, {identity}, {identity}], iterator_types = [{parallel}]}} "
        f"ins({value}, {init} : {tensor}, {tensor}) outs({name}e : {tensor}) {{\n"
        "    ^bb0(%v: f32, %i: f32, %o: f32):\n      %s = arith.addf %v, %i : f32\n      linalg.yield %s : f32\n"
        f"    }} -> {tensor}",
    ], name
