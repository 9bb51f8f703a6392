"""split-grouped-convs: a grouped convolution whose groups have a multiple of 32 input channels
becomes one convolution per group, on channel slices, so that kiln's CPU kernel takes each.

torch-to-linalg lowers a grouped convolution (RegNet's and ResNeXt's 3x3 layers) to
`linalg.conv_2d_ngchw_gfchw`, which kiln's implicit-GEMM kernel does not take and IREE's llvm-cpu
code runs at a few GFLOP/s in bf16: RegNet-Y-4.0GF bf16 at batch 32 spent 16.2 of its 16.7 s a call
in them on this 2-core machine. Group g reads input channels [g*C, (g+1)*C) and writes output
channels [g*F, (g+1)*F): its own `conv_2d_nchw_fchw` on those channels, its result put into the whole.
Where the input is an NCHW tensor viewed as groups (as torch-to-linalg gives it), the groups are
sliced from it and gathered in NHWC, the layout the kernel computes in (`_split_in_nhwc`); otherwise
in NCHW. Groups whose C is not a multiple of 32 (ResNeXt's 4) are left to IREE: the kernel would take
them only as row windows, mostly zeros.

The llvm-cpu room places it where its kernels are on (targets/llvm_cpu/target.py).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from kiln.passes.pass_api import Pass, PassRun, ops_named
from kiln.passes.torch_ir import producer

from .depthwise_to_nhwc import NCHW_TO_NHWC, NHWC_TO_NCHW, padded_nhwc, transposed, value_of

KERNEL_K_STEP = 32  # the kernel walks input channels 32 at a time
_GROUPS_OF_CHANNELS = [[0], [1, 2], [3], [4]]  # [N, G*C, H, W] -> [N, G, C, H, W]


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for op in ops_named(module, ("linalg.conv_2d_ngchw_gfchw",)):
        x = ir.RankedTensorType(op.operands[0].type)
        if x.has_static_shape and x.shape[2] % KERNEL_K_STEP == 0:
            _split(op, x.shape[1])


def _split(op: ir.Operation, groups: int) -> None:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    strides = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["strides"])]
    dilations = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["dilations"])]
    whole = _ungrouped(x)
    with op.location, ir.InsertionPoint(op):
        if whole is None:
            result = init
            for g in range(groups):
                y = linalg.conv_2d_nchw_fchw(
                    _group(x, g, 1), _group(w, g, 0), outs=[_group(init, g, 1)], strides=strides, dilations=dilations
                )
                result = _inserted(y, result, g)
        else:
            result = _split_in_nhwc(whole, w, init, groups, strides, dilations)
    op.results[0].replace_all_uses_with(result)
    op.erase()
    if whole is not None:  # the grouped view of the input, and the NCHW padding under it, if nothing reads them now
        for dead in (x, whole):
            owner = producer(dead, "tensor.expand_shape", "tensor.pad")
            if owner is None or list(dead.uses):
                break
            owner.erase()


def _split_in_nhwc(
    x: ir.Value, w: ir.Value, init: ir.Value, groups: int, strides: list[int], dilations: list[int]
) -> ir.Value:
    """The grouped convolution of `x` [N, G*C, H, W], its groups sliced from and gathered in NHWC.

    Each group's convolution reads its channels as an NCHW tensor and writes an NCHW result, and
    kiln's kernel transposes both to and from NHWC; written as transposes of NHWC slices, those
    cancel in IREE, and only the whole input's transpose to NHWC and the whole result's back are
    left, which IREE moves into the neighbouring dispatches. Sliced and gathered in NCHW, each group's
    input and result was a transposing dispatch of its own, and the batch norms between stayed NCHW:
    RegNet-Y-4.0GF bf16 at batch 32 spent 104 of its 228 ms of dispatches in transposes on the 16-core Xeon."""
    x_nhwc = padded_nhwc(x)
    n, hp, wp, channels = ir.RankedTensorType(x_nhwc.type).shape
    _, g_count, f, oh, ow = ir.RankedTensorType(init.type).shape
    c = channels // groups
    element = ir.RankedTensorType(init.type).element_type
    gathered = tensor.empty([n, oh, ow, groups * f], element)
    for g in range(groups):
        x_g = tensor.ExtractSliceOp(
            ir.RankedTensorType.get([n, hp, wp, c], ir.RankedTensorType(x_nhwc.type).element_type),
            x_nhwc, [], [], [], [0, 0, 0, g * c], [n, hp, wp, c], [1, 1, 1, 1],
        ).result
        y = linalg.conv_2d_nchw_fchw(
            transposed(x_g, NHWC_TO_NCHW), _group(w, g, 0), outs=[_group(init, g, 1)], strides=strides, dilations=dilations
        )
        y_nhwc = transposed(value_of(y), NCHW_TO_NHWC)
        gathered = tensor.InsertSliceOp(
            y_nhwc, gathered, [], [], [], [0, 0, 0, g * f], [n, oh, ow, f], [1, 1, 1, 1]
        ).result
    nchw = transposed(gathered, NHWC_TO_NCHW)
    result_type = ir.RankedTensorType.get([n, g_count, f, oh, ow], element)
    return tensor.ExpandShapeOp(result_type, nchw, _GROUPS_OF_CHANNELS, [], [n, g_count, f, oh, ow]).result


def _ungrouped(x: ir.Value) -> ir.Value | None:
    """The [N, G*C, H, W] tensor that grouped input `x` [N, G, C, H, W] is an expand_shape of, else None."""
    expand = producer(x, "tensor.expand_shape")
    if expand is None or str(expand.attributes["reassociation"]) != str(_GROUPS_OF_CHANNELS):
        return None
    return expand.operands[0]


def _group(value: ir.Value, g: int, axis: int) -> ir.Value:
    """Group g of `value` along `axis`, that axis dropped."""
    shaped = ir.RankedTensorType(value.type)
    shape = list(shaped.shape)
    offsets, sizes = [0] * len(shape), list(shape)
    offsets[axis], sizes[axis] = g, 1
    result = ir.RankedTensorType.get(shape[:axis] + shape[axis + 1 :], shaped.element_type)
    return tensor.ExtractSliceOp(result, value, [], [], [], offsets, sizes, [1] * len(shape)).result


def _inserted(y: ir.Value, whole: ir.Value, g: int) -> ir.Value:
    """`whole` [N, G, F, OH, OW] with group g's result `y` [N, F, OH, OW] in place."""
    shape = list(ir.RankedTensorType(whole.type).shape)
    offsets, sizes = [0, g, 0, 0, 0], [shape[0], 1, *shape[2:]]
    return tensor.InsertSliceOp(y, whole, [], [], [], offsets, sizes, [1] * 5).result


PASS = Pass(
    name="split-grouped-convs",
    summary="linalg.conv_2d_ngchw_gfchw with C % 32 == 0 a group -> one conv_2d_nchw_fchw per group (llvm-cpu, kernels on)",
    level="linalg",
    run=run,
)
