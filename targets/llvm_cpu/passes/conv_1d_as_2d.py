"""conv-1d-as-2d: a 1-D convolution becomes the 2-D convolution of height 1 it is, so that kiln's CPU
kernel takes it.

torch-to-linalg lowers `nn.Conv1d` to `linalg.conv_1d_ncw_fcw`, which kiln's implicit-GEMM kernel
does not take; IREE's llvm-cpu code ran Whisper-small's two stem convolutions at 50 GFLOP/s in f32 on
the 16-core Xeon (the 768 -> 768 one with stride 2: 103 of the encoder's 594 ms at batch 1; in bf16
the two took 129 of 393 ms). As `conv_2d_nchw_fchw` over [N, C, 1, W] with a [F, C, 1, K] filter
it is the kernel's (a row window where C is no multiple of 32, as a stem's 80 mel bins). A zero
padding of the sequence is rebuilt on the 4-D input, so the kernel's route finds it and pads in
NHWC, as it does for 2-D convolutions.

The llvm-cpu room places it where its kernels are on (targets/llvm_cpu/target.py).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_ir import producer

from .depthwise_to_nhwc import value_of

# [N, C, W] -> [N, C, 1, W]: the new height joins the channels' group.
_HEIGHT_ONE = [[0], [1, 2], [3]]


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for op in ops_named(module, ("linalg.conv_1d_ncw_fcw",)):
        if all(ir.RankedTensorType(value.type).has_static_shape for value in op.operands):
            _as_2d(op)


def _as_2d(op: ir.Operation) -> None:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    (stride,) = (int(value) for value in ir.DenseIntElementsAttr(op.attributes["strides"]))
    (dilation,) = (int(value) for value in ir.DenseIntElementsAttr(op.attributes["dilations"]))
    pad = producer(x, "tensor.pad")
    with op.location, ir.InsertionPoint(op):
        y = value_of(linalg.conv_2d_nchw_fchw(
            _input(x, pad), _expanded(w), outs=[_expanded(init)], strides=[stride, stride], dilations=[dilation, dilation]
        ))
        shaped = ir.RankedTensorType(op.results[0].type)
        result = tensor.CollapseShapeOp(shaped, y, _HEIGHT_ONE).result
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if pad is not None and not list(pad.results[0].uses):
        pad.erase()


def _input(x: ir.Value, pad: ir.Operation | None) -> ir.Value:
    """`x` [N, C, W] as [N, C, 1, W]: where `pad`, which makes it, pads W alone, its source expanded and
    padded again."""
    if pad is None or len(pad.operands) != 1:  # dynamic padding sizes
        return _expanded(x)
    low, high = (list(ir.DenseI64ArrayAttr(pad.attributes[name])) for name in ("static_low", "static_high"))
    block = pad.regions[0].blocks[0]
    value = list(block.operations)[-1].operands[0]  # tensor.yield's: the padding value
    defined_inside = not isinstance(value.owner, ir.Block) and value.owner.operation.parent == pad
    if low[:2] != [0, 0] or high[:2] != [0, 0] or isinstance(value.owner, ir.Block) or defined_inside:
        return _expanded(x)
    shaped = ir.RankedTensorType(x.type)
    result_type = ir.RankedTensorType.get([shaped.shape[0], shaped.shape[1], 1, shaped.shape[2]], shaped.element_type)
    padded = tensor.PadOp(result_type, _expanded(pad.operands[0]), [], [], [0, 0, 0, low[2]], [0, 0, 0, high[2]])
    body = padded.regions[0].blocks.append(*([ir.IndexType.get()] * 4))
    with ir.InsertionPoint(body):
        tensor.YieldOp(value)
    return padded.result


def _expanded(value: ir.Value) -> ir.Value:
    """[A, B, W] -> [A, B, 1, W]."""
    shaped = ir.RankedTensorType(value.type)
    a, b, width = shaped.shape
    result_type = ir.RankedTensorType.get([a, b, 1, width], shaped.element_type)
    return tensor.ExpandShapeOp(result_type, value, _HEIGHT_ONE, [], [a, b, 1, width]).result


PASS = Pass(
    name="conv-1d-as-2d",
    summary="linalg.conv_1d_ncw_fcw -> conv_2d_nchw_fchw of height 1, between reshapes (llvm-cpu, kernels on)",
    level="linalg",
    run=run,
)
