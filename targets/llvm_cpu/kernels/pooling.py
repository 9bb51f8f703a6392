"""NCHW poolings as NHWC ones between transposes, in a module where kiln's GEMM kernel takes something.

The pooling stays IREE's code; only its layout changes. The kernel's convolutions are NHWC inside
(gemm.py), so a conv-pool-conv chain in NCHW would keep the transposes around the pooling; with the
pooling in NHWC too, IREE cancels them and the chain stays in NHWC.
"""

from __future__ import annotations

from iree.compiler import ir

from .handoff import (
    HandOff,
    element_of,
    is_static,
    name_of,
    padded_by_constant,
    private_function,
    producer_of,
    shape_of,
)

# Poolings next to the kernel's NHWC convolutions are computed in NHWC too (IREE's code), so that the
# transposes around them cancel against the convolutions' instead of being left in between.
POOLINGS = ("linalg.pooling_nchw_max", "linalg.pooling_nchw_sum")


def to_nhwc(handoff: HandOff, op: ir.Operation) -> None:
    """`op` (NCHW) as the same pooling in NHWC between transposes, its padding moved after the first."""
    x, window, init = op.operands[0], op.operands[1], op.operands[2]
    if not all(is_static(v) for v in (x, window, init)):
        return
    fill = producer_of(init)
    if name_of(fill) != "linalg.fill" or name_of(producer_of(fill.operands[0])) != "arith.constant":
        return
    value = producer_of(fill.operands[0]).attributes["value"]
    source, low, high, padding = padded_by_constant(x)
    nb, c, h, w = shape_of(source)
    _, _, oh, ow = shape_of(init)
    element = element_of(x)
    kind = op.name.removeprefix("linalg.pooling_nchw_")
    nhwc_in, nhwc_out = f"tensor<{nb}x{h}x{w}x{c}x{element}>", f"tensor<{nb}x{oh}x{ow}x{c}x{element}>"
    hp, wp = h + low[0] + high[0], w + low[1] + high[1]
    body = [
        f"%te = tensor.empty() : {nhwc_in}",
        f"%t = linalg.transpose ins(%x : {source.type}) outs(%te : {nhwc_in}) permutation = [0, 2, 3, 1]",
    ]
    pooled_in = "%t"
    if any(low) or any(high):
        body += [
            f"%pv = arith.constant {padding}",
            f"%tp = tensor.pad %t low[0, {low[0]}, {low[1]}, 0] high[0, {high[0]}, {high[1]}, 0] {{\n"
            f"    ^bb0(%i0: index, %i1: index, %i2: index, %i3: index):\n      tensor.yield %pv : {element}\n"
            f"    }} : {nhwc_in} to tensor<{nb}x{hp}x{wp}x{c}x{element}>",
        ]
        pooled_in = "%tp"
    strides, dilations = op.attributes["strides"], op.attributes["dilations"]
    body += [
        f"%fv = arith.constant {value}",
        f"%oe = tensor.empty() : {nhwc_out}",
        f"%of = linalg.fill ins(%fv : {element}) outs(%oe : {nhwc_out}) -> {nhwc_out}",
        f"%p = linalg.pooling_nhwc_{kind} {{dilations = {dilations}, strides = {strides}}} "
        f"ins({pooled_in}, %w : tensor<{nb}x{hp}x{wp}x{c}x{element}>, {window.type}) outs(%of : {nhwc_out}) -> {nhwc_out}",
        f"%re = tensor.empty() : {init.type}",
        f"%r = linalg.transpose ins(%p : {nhwc_out}) outs(%re : {init.type}) permutation = [0, 3, 1, 2]",
        f"return %r : {init.type}",
    ]
    name = f"kiln_cpu_pooling_{handoff.poolings}"
    handoff.poolings += 1
    handoff.replace(op, name, [source, window], private_function(name, f"%x: {source.type}, %w: {window.type}", str(init.type), body))
