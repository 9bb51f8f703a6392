"""split-grouped-convs: a grouped convolution whose groups have a multiple of 32 input channels
becomes one convolution per group, on channel slices, so that kiln's CPU kernel takes each.

torch-to-linalg lowers a grouped convolution (RegNet's and ResNeXt's 3x3 layers) to
`linalg.conv_2d_ngchw_gfchw`, which kiln's implicit-GEMM kernel does not take and IREE's llvm-cpu
code runs at a few GFLOP/s in bf16: RegNet-Y-4.0GF bf16 at batch 32 spent 16.2 of its 16.7 s a call
in them on this 2-core machine. Group g reads input channels [g*C, (g+1)*C) and writes output
channels [g*F, (g+1)*F): its own `conv_2d_nchw_fchw` on those slices (NCHW keeps each one contiguous
per image), its result inserted into the whole. Groups whose C is not a multiple of 32 (ResNeXt's 4)
are left to IREE: the kernel would take them only as row windows, mostly zeros.

The llvm-cpu room places it where its kernels are on (targets/llvm_cpu/target.py).
"""

from __future__ import annotations

from torch_mlir import ir
from torch_mlir.dialects import linalg, tensor

from kiln.passes.pass_api import Pass, PassRun, ops_named

KERNEL_K_STEP = 32  # the kernel walks input channels 32 at a time


def run(module: ir.Operation, pass_run: PassRun) -> None:
    for op in ops_named(module, ("linalg.conv_2d_ngchw_gfchw",)):
        x = ir.RankedTensorType(op.operands[0].type)
        if x.has_static_shape and x.shape[2] % KERNEL_K_STEP == 0:
            _split(op, x.shape[1])


def _split(op: ir.Operation, groups: int) -> None:
    x, w, init = op.operands[0], op.operands[1], op.operands[2]
    strides = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["strides"])]
    dilations = [int(value) for value in ir.DenseIntElementsAttr(op.attributes["dilations"])]
    with op.location, ir.InsertionPoint(op):
        result = init
        for g in range(groups):
            y = linalg.conv_2d_nchw_fchw(
                _group(x, g, 1), _group(w, g, 0), outs=[_group(init, g, 1)], strides=strides, dilations=dilations
            )
            result = _inserted(y, result, g)
    op.results[0].replace_all_uses_with(result)
    op.erase()


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
