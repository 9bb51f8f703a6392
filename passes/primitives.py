"""kiln's primitive set: every op the module may hold after the `prims` stage.

The `prims` group decomposes a model into these ops (torch-mlir's decompositions, then ours where
those keep a composite op whole), and check-primitives rejects anything else by name. Later
passes only need to understand these. An op is primitive when it is one step for the backend: a
single scalar function applied elementwise, one reduction, one contraction, one window, or pure
data movement. Composites (gelu, sigmoid, silu, softmax, layer_norm, ...) are not.
"""

from __future__ import annotations


def _aten(*names: str) -> frozenset[str]:
    return frozenset(f"torch.aten.{name}" for name in names)


# The module's frame: functions, constants, lists, literal tensors, weights kept outside the IR
# (compiler/weights.py loads them as ml_program globals), and state the module keeps across calls
# (compiler/boundary.py: a mutable global, loaded and stored).
STRUCTURE = frozenset(
    {
        "builtin.module",
        "func.func",
        "func.return",
        "ml_program.global",
        "ml_program.global_load_const",
        "ml_program.global_load",
        "ml_program.global_store",
        "torch_c.from_builtin_tensor",
        "torch_c.to_builtin_tensor",
        "torch.constant.int",
        "torch.constant.float",
        "torch.constant.bool",
        "torch.constant.none",
        "torch.constant.str",
        "torch.constant.device",
        "torch.constant.number",
        "torch.prim.ListConstruct",
        "torch.vtensor.literal",
    }
)

# Elementwise arithmetic, with PyTorch's broadcasting and type promotion.
ARITHMETIC = _aten(
    "add.Tensor", "add.Scalar", "sub.Tensor", "sub.Scalar", "rsub.Scalar",
    "mul.Tensor", "mul.Scalar", "div.Tensor", "div.Scalar", "div.Tensor_mode", "div.Scalar_mode",
    "remainder.Tensor", "remainder.Scalar", "fmod.Tensor", "fmod.Scalar", "floor_divide",
    "neg", "abs", "sign", "reciprocal", "floor", "ceil", "round", "trunc",
    "pow.Tensor_Scalar", "pow.Tensor_Tensor", "pow.Scalar",
    "maximum", "minimum", "clamp", "clamp.Tensor",
)  # fmt: skip

# Elementwise functions that MLIR's math dialect computes in one step. relu is kept whole: it is
# one compare and select, and that select is what gives relu(NaN) = NaN.
MATH = _aten(
    "exp", "exp2", "expm1", "log", "log2", "log10", "log1p", "sqrt", "rsqrt",
    "sin", "cos", "tan", "asin", "acos", "atan", "atan2", "sinh", "cosh", "tanh", "erf", "relu",
)  # fmt: skip

# Comparisons, selection, logic, bit operations, and dtype conversion. (Not isnan and isinf: the
# backend contract decomposes them into comparisons, and torch-to-linalg has no lowering of them.)
COMPARE_AND_SELECT = _aten(
    "eq.Tensor", "eq.Scalar", "ne.Tensor", "ne.Scalar", "lt.Tensor", "lt.Scalar",
    "le.Tensor", "le.Scalar", "gt.Tensor", "gt.Scalar", "ge.Tensor", "ge.Scalar",
    "where.self", "where.Scalar", "where.ScalarSelf", "where.ScalarOther", "masked_fill.Scalar",
    "logical_and", "logical_or", "logical_xor", "logical_not",
    "bitwise_and.Tensor", "bitwise_or.Tensor", "bitwise_xor.Tensor", "bitwise_not", "to.dtype",
    "bitwise_left_shift.Tensor", "bitwise_right_shift.Tensor",
)  # fmt: skip

# Reductions over some dimensions.
REDUCTIONS = _aten(
    "sum", "sum.dim_IntList", "prod", "prod.dim_int", "amax", "amin", "max", "min", "max.dim", "min.dim",
    "argmax", "argmin", "all", "all.dim", "any", "any.dim", "cumsum", "cumprod",
)  # fmt: skip

# Contractions and sliding windows: one structured op each for the backend.
CONTRACTIONS_AND_WINDOWS = _aten(
    "mm", "bmm", "convolution",
    "max_pool1d", "max_pool2d", "max_pool3d", "max_pool2d_with_indices", "avg_pool1d", "avg_pool2d", "avg_pool3d",
    "upsample_nearest2d", "upsample_bilinear2d", "_adaptive_avg_pool3d",
)  # fmt: skip

# Composites kept whole on purpose: only when kiln hands IREE the torch dialect (compiler/importer.py
# FUSED_IN_IREE), for IREE to lower to one fused op. With the linalg hand-off they are decomposed at
# import and never reach this check.
FUSED_IN_BACKEND = _aten("scaled_dot_product_attention")

# Data movement and creation: no arithmetic on the elements.
DATA_MOVEMENT = _aten(
    "view", "permute", "unsqueeze", "squeeze", "squeeze.dim", "slice.Tensor", "select.int", "cat", "stack",
    "broadcast_to", "flip", "constant_pad_nd", "embedding", "index_select", "gather", "index.Tensor",
    "index.Tensor_hacked_twin", "scatter.src", "scatter_add", "scatter_reduce.two", "index_put.hacked_twin",
    "sort",  # one sort along a dimension (topk, argsort and msort become it)
    "empty.memory_format", "zeros", "ones", "full", "zeros_like", "ones_like", "full_like", "fill.Scalar",
    "arange.start_step",
)  # fmt: skip

# Sizes of dynamic dimensions, read from tensors and handed to them (scalar arithmetic on them,
# `torch.aten.mul.int` and the like, touches no tensor and is primitive by the rule below).
SHAPES = frozenset({"torch.aten.size.int", "torch.aten.dim", "torch.prim.NumToTensor.Scalar", "torch.bind_symbolic_shape"})

# Run-time checks: a 0-d bool tensor read on the host and asserted (check-index-inputs).
CHECKS = frozenset({"torch.aten.Bool.Tensor", "torch.runtime.assert"})

PRIMITIVES: frozenset[str] = (
    STRUCTURE | ARITHMETIC | MATH | COMPARE_AND_SELECT | REDUCTIONS | CONTRACTIONS_AND_WINDOWS | FUSED_IN_BACKEND
    | DATA_MOVEMENT | SHAPES | CHECKS
)


def is_primitive(op_name: str, operand_and_result_types: list[str]) -> bool:
    """In PRIMITIVES, or an op on scalars only: it computes no tensor, so it decomposes nothing."""
    return op_name in PRIMITIVES or not any(_is_tensor(type_) for type_ in operand_and_result_types)


def _is_tensor(type_: str) -> bool:
    return type_.startswith(("!torch.vtensor", "!torch.tensor", "tensor<"))
