"""pointwise-conv-to-mm: on CUDA, a 16-bit 1x1 convolution becomes the matmul W @ X it is, per image.

IREE 3.13's CUDA backend computes bf16 1x1 convolutions wrong (relative error ~1.0 on an H100, built
for sm_80 and for sm_90a alike: benchmarks/results/kernels-h100.json), while its 3x3 convolutions and
its matmuls are right. IREE turns a 1x1 convolution into a matmul-like op whose first operand is the
activation X[N, C, H*W] and second the weight W[K, C]; for that operand order its tensor-core
configuration (no padding, workgroup tile [2, 32, 16] for 2x64x28x28 -> 128 channels) is the odd one
out. Written as `W @ X` instead, the weight is the first operand and IREE configures it as any matmul
(batch 1: a plain [K, C] x [C, H*W] matmul): no layout change, NCHW in and out, f32 accumulation.

    y = conv(x, w) (+ b)    x [N, C, H, W], w [K, C, 1, 1], stride 1, no padding, groups 1
    ->  y = view(mm(view(w, [K, C]), view(x, [C, H*W])), [1, K, H, W])                       (N = 1)
        y = view(bmm(broadcast_to(view(w, [K, C]), [N, K, C]), view(x, [N, C, H*W])), [N, K, H, W])
        (+ view(b, [1, K, 1, 1]))

The nn.Linear form (`permute` to NHWC, then `x @ W^T`) does not work around it: IREE folds the two
permutes back into the matmul and compiles the same wrong op. f16 is rewritten too (IREE picks the
same configuration with its f16 intrinsic). Strided 1x1 convolutions were sliced to stride 1 by
slice-strided-pointwise-conv before. The cuda room places it after outline-contractions; on Hopper, convolutions outline-contractions outlined get kiln's kernels, and this rewrite is the body
they fall back to.
"""

from __future__ import annotations

from torch_mlir import ir

from kiln.passes.pass_api import Pass, PassRun, Rewriter, apply_patterns
from kiln.passes.torch_build import constant_bool, constant_ints, view
from kiln.passes.torch_ir import int_constant, int_list, is_none, number, tensor_type, vtensor

# aten.convolution(input, weight, bias, stride, padding, dilation, transposed, output_padding, groups)
INPUT, WEIGHT, BIAS, STRIDE, PADDING, DILATION, TRANSPOSED, GROUPS = 0, 1, 2, 3, 4, 5, 6, 8
SIXTEEN_BIT = ("bf16", "f16")


def pointwise_conv_to_mm(conv: ir.OpView, rewriter: Rewriter) -> None:
    x, w, bias = conv.operands[INPUT], conv.operands[WEIGHT], conv.operands[BIAS]
    source, weight, result = tensor_type(x.type), tensor_type(w.type), tensor_type(conv.result.type)
    if source is None or weight is None or result is None or not (source.static and weight.static):
        return
    if len(source.shape) != 4 or weight.shape[2:] != (1, 1) or source.dtype not in SIXTEEN_BIT:
        return
    if weight.dtype != source.dtype or result.dtype != source.dtype:
        return
    if (
        constant_ints(conv.operands[STRIDE]) != [1, 1]
        or constant_ints(conv.operands[PADDING]) not in ([0, 0], [0])
        or constant_ints(conv.operands[DILATION]) not in ([1, 1], [1])
        or constant_bool(conv.operands[TRANSPOSED]) is not False
        or number(conv.operands[GROUPS]) != 1
    ):
        return
    has_bias = not is_none(bias)
    bias_type = tensor_type(bias.type) if has_bias else None
    if has_bias and (bias_type is None or bias_type.dtype != source.dtype):
        return
    n, c, h, width = (size for size in source.shape if size is not None)
    k, dtype = weight.shape[0], source.dtype
    assert k is not None
    w2 = view(rewriter, w, [k, c])
    if n == 1:
        product = rewriter.create("torch.aten.mm", [w2, view(rewriter, x, [c, h * width])], vtensor([k, h * width], dtype))
    else:
        weights = rewriter.create("torch.aten.broadcast_to", [w2, int_list(rewriter, [n, k, c])], vtensor([n, k, c], dtype))
        images = view(rewriter, x, [n, c, h * width])
        product = rewriter.create("torch.aten.bmm", [weights, images], vtensor([n, k, h * width], dtype))
    y = view(rewriter, product, [n, k, h, width])
    if has_bias:
        operands = [y, view(rewriter, bias, [1, k, 1, 1]), int_constant(rewriter, 1)]
        y = rewriter.create("torch.aten.add.Tensor", operands, y.type)
    rewriter.replace(y)


def run(module: ir.Operation, pass_run: PassRun) -> None:
    apply_patterns(module, {"torch.aten.convolution": pointwise_conv_to_mm})


PASS = Pass(
    name="pointwise-conv-to-mm",
    summary="cuda: 16-bit 1x1 convolution -> W @ X per image (IREE 3.13 miscompiles the convolution)",
    level="torch",
    run=run,
)
