"""depthwise-to-nhwc: a depthwise convolution in NCHW becomes the same one in NHWC, between transposes.

torch-to-linalg lowers PyTorch's depthwise convolutions (groups = channels, MobileNet's 3x3 layers)
to `linalg.depthwise_conv_2d_nchw_chw`, which IREE's llvm-cpu backend cannot vectorize along the
channels: on the 16-core host it took most of mobilenet_block's time. In NHWC
(`depthwise_conv_2d_nhwc_hwc`) each filter tap is a vector FMA over contiguous channels, which IREE
compiles well. The input (its zero padding rebuilt in NHWC), the filter ([C, R, S] -> [R, S, C]) and
the result are transposed around it: IREE computes the filter's once, at load, and moves the others
into the neighbouring dispatches, which are NHWC themselves once kiln's channels-last lever has
turned the other convolutions.

The llvm-cpu room places it (targets/llvm_cpu/target.py), where it was measured (benchmarks/NOTES.md);
the cuda hand-off is torch, where kiln's own depthwise kernel is NHWC already.
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import arith, linalg, tensor

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_ir import producer

NCHW_TO_NHWC, NHWC_TO_NCHW = [0, 2, 3, 1], [0, 3, 1, 2]


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for op in ops_named(module, ("linalg.depthwise_conv_2d_nchw_chw",)):
        _to_nhwc(op)


def _to_nhwc(op: ir.Operation) -> None:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    strides = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["strides"])]
    dilations = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["dilations"])]
    with op.location, ir.InsertionPoint(op):
        x_nhwc = padded_nhwc(x)
        w_rsc = transposed(w, [1, 2, 0])
        y_nhwc = value_of(linalg.depthwise_conv_2d_nhwc_hwc(
            x_nhwc, w_rsc, outs=[transposed(init, NCHW_TO_NHWC)], strides=strides, dilations=dilations
        ))
        y = transposed(y_nhwc, NHWC_TO_NCHW)
    op.results[0].replace_all_uses_with(y)
    op.erase()


def padded_nhwc(x: ir.Value) -> ir.Value:
    """`x` [N, C, H, W] in NHWC. Where it is a zero `tensor.pad` of H and W only, the source is
    transposed and padded again in NHWC, so the transpose moves into the producer and the padding
    into the convolution's dispatch; otherwise `x` itself is transposed."""
    pad = producer(x, "tensor.pad")
    if pad is None or len(pad.operands) != 1:
        return transposed(x, NCHW_TO_NHWC)
    low, high = (list(ir.DenseI64ArrayAttr(pad.attributes[name])) for name in ("static_low", "static_high"))
    yielded = pad.regions[0].blocks[0].operations[0].operands[0]
    constant = yielded.owner.operation if isinstance(yielded.owner, (ir.Operation, ir.OpView)) else None
    zero = constant is not None and constant.name == "arith.constant" and ir.FloatAttr(constant.attributes["value"]).value == 0.0
    if not zero or low[:2] != [0, 0] or high[:2] != [0, 0]:
        return transposed(x, NCHW_TO_NHWC)
    source = transposed(pad.operands[0], NCHW_TO_NHWC)
    shape = ir.RankedTensorType(source.type).shape
    element = ir.RankedTensorType(source.type).element_type
    padded_shape = [shape[0], shape[1] + low[2] + high[2], shape[2] + low[3] + high[3], shape[3]]
    result_type = ir.RankedTensorType.get(padded_shape, element)
    nhwc_low, nhwc_high = [0, low[2], low[3], 0], [0, high[2], high[3], 0]
    padded = tensor.PadOp(result_type, source, [], [], nhwc_low, nhwc_high)
    block = padded.regions[0].blocks.append(*([ir.IndexType.get()] * 4))
    with ir.InsertionPoint(block):
        tensor.YieldOp(value_of(arith.constant(element, 0.0)))
    return padded.result


def transposed(value: ir.Value, permutation: list[int]) -> ir.Value:
    shaped = ir.RankedTensorType(value.type)
    shape = [shaped.shape[axis] for axis in permutation]
    empty = tensor.empty(shape, shaped.element_type)
    return value_of(linalg.transpose(value, outs=[empty], permutation=permutation))


def value_of(built: ir.Value | ir.OpView) -> ir.Value:
    """The result of a dialect builder, which returns the op itself for some ops (linalg.transpose)."""
    return built if isinstance(built, ir.Value) else built.results[0]


PASS = Pass(
    name="depthwise-to-nhwc",
    summary="linalg.depthwise_conv_2d_nchw_chw -> transposes around depthwise_conv_2d_nhwc_hwc (llvm-cpu)",
    level="linalg",
    run=run,
)
