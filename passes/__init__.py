"""kiln's pass pipeline: a registry of named passes and the pipelines as data.

A pipeline is a tuple of pass groups; each group is one compiler stage (its name is the IR it
produces) and writes one dump. To add a pass: write it in its own file, add it to `PASSES`, and
name it in a group. Nothing else changes: the compiler's driver, `kiln passes` and the
`--pipeline`, `--disable-pass` and `--print-after` flags all read these.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass

from kiln.errors import KilnError

from .check_primitives import CHECK_PRIMITIVES
from .check_static_shapes import CHECK_STATIC_SHAPES
from .decompose_adaptive_pool import DECOMPOSE_ADAPTIVE_POOL
from .decompose_diagonal import DECOMPOSE_DIAGONAL
from .decompose_gelu import DECOMPOSE_GELU
from .decompose_math import DECOMPOSE_MATH
from .decompose_pool_indices import DECOMPOSE_POOL_INDICES
from .decompose_scatter_reduce import DECOMPOSE_SCATTER_REDUCE
from .decompose_sigmoid import DECOMPOSE_SIGMOID
from .decompose_slice_scatter import DECOMPOSE_SLICE_SCATTER
from .decompose_unfold import DECOMPOSE_UNFOLD
from .decompose_vector_norm import DECOMPOSE_VECTOR_NORM
from .expand_pow_int import EXPAND_POW_INT
from .expand_pow_square import EXPAND_POW_SQUARE
from .fmod_scalar_to_tensor import FMOD_SCALAR_TO_TENSOR
from .fold_add_zero import FOLD_ADD_ZERO
from .fold_mul_one import FOLD_MUL_ONE
from .fold_neg_neg import FOLD_NEG_NEG
from .fold_relu_relu import FOLD_RELU_RELU
from .fold_reshape_chain import FOLD_RESHAPE_CHAIN
from .fold_sin_cos import FOLD_SIN_COS
from .fold_sub_self import FOLD_SUB_SELF
from .fold_transpose_chain import FOLD_TRANSPOSE_CHAIN
from .fuse_elementwise import FUSE_ELEMENTWISE
from .pass_api import Pass
from .promote_int_clamp import PROMOTE_INT_CLAMP
from .round_float_scalars import ROUND_FLOAT_SCALARS
from .slice_strided_pointwise_conv import SLICE_STRIDED_POINTWISE_CONV
from .split_negative_pad import SPLIT_NEGATIVE_PAD
from .upstream import UPSTREAM_PASSES

STAGE = "pipeline"


@dataclass(frozen=True)
class PassGroup:
    name: str  # the stage name: the IR this group produces
    passes: tuple[str, ...]


PASSES: dict[str, Pass] = {
    **{p.name: p for p in UPSTREAM_PASSES},
    "check-static-shapes": CHECK_STATIC_SHAPES,
    "fmod-scalar-to-tensor": FMOD_SCALAR_TO_TENSOR,
    "decompose-gelu": DECOMPOSE_GELU,
    "decompose-sigmoid": DECOMPOSE_SIGMOID,
    "decompose-math": DECOMPOSE_MATH,
    "decompose-vector-norm": DECOMPOSE_VECTOR_NORM,
    "decompose-diagonal": DECOMPOSE_DIAGONAL,
    "decompose-slice-scatter": DECOMPOSE_SLICE_SCATTER,
    "decompose-scatter-reduce": DECOMPOSE_SCATTER_REDUCE,
    "decompose-unfold": DECOMPOSE_UNFOLD,
    "decompose-adaptive-pool": DECOMPOSE_ADAPTIVE_POOL,
    "decompose-pool-indices": DECOMPOSE_POOL_INDICES,
    "expand-pow-int": EXPAND_POW_INT,
    "promote-int-clamp": PROMOTE_INT_CLAMP,
    "split-negative-pad": SPLIT_NEGATIVE_PAD,
    "round-float-scalars": ROUND_FLOAT_SCALARS,
    "check-primitives": CHECK_PRIMITIVES,
    "fold-sin-cos": FOLD_SIN_COS,
    "fold-mul-one": FOLD_MUL_ONE,
    "fold-add-zero": FOLD_ADD_ZERO,
    "fold-sub-self": FOLD_SUB_SELF,
    "fold-neg-neg": FOLD_NEG_NEG,
    "fold-relu-relu": FOLD_RELU_RELU,
    "fold-transpose-chain": FOLD_TRANSPOSE_CHAIN,
    "fold-reshape-chain": FOLD_RESHAPE_CHAIN,
    "expand-pow-square": EXPAND_POW_SQUARE,
    "slice-strided-pointwise-conv": SLICE_STRIDED_POINTWISE_CONV,
    "fuse-elementwise": FUSE_ELEMENTWISE,
}

TORCH_BACKEND = (
    "torch-match-quantized-custom-ops",
    "torch-backend-contract",  # torch-mlir's decompositions: most composite ops end here
)

DEFAULT_PIPELINE: tuple[PassGroup, ...] = (
    PassGroup(
        "prims",
        (
            "check-static-shapes",  # before the backend contract, which never returns on x[mask]
            "fmod-scalar-to-tensor",  # before the backend contract, which decomposes fmod.Tensor only
            *TORCH_BACKEND,
            "decompose-gelu",
            "decompose-sigmoid",
            "decompose-math",
            "decompose-vector-norm",
            "decompose-diagonal",  # before decompose-slice-scatter: diagonal_scatter becomes a slice_scatter
            "decompose-slice-scatter",
            "decompose-scatter-reduce",
            "decompose-unfold",
            "decompose-adaptive-pool",
            "decompose-pool-indices",
            "expand-pow-int",
            "promote-int-clamp",
            "split-negative-pad",
            "round-float-scalars",  # after the decompositions above, which make float scalars too
            "check-primitives",  # last: the promise this stage makes to the ones after it
        ),
    ),
    PassGroup(
        "simplified",
        (
            "fold-sin-cos",  # matches pow(s, 2) and s * s alike, so it could go anywhere here
            "fold-sub-self",
            "canonicalize",  # torch-mlir's folds, e.g. `to.dtype` of a literal made above, for the folds below
            "fold-mul-one",
            "fold-add-zero",
            "fold-neg-neg",
            "fold-relu-relu",
            "fold-transpose-chain",
            "fold-reshape-chain",
            "expand-pow-square",
            "slice-strided-pointwise-conv",  # exact; IREE's CUDA backend miscompiles the stride left in
            "cse",
        ),
    ),
    PassGroup("linalg", ("torch-to-linalg",)),
    PassGroup(
        "fused",
        (
            "canonicalize",  # first: duplicate operands and dead ops would otherwise show up as fusions
            "cse",
            "fuse-elementwise",
        ),
    ),
)

# torch-mlir's lowering alone, without kiln's passes: what kiln did before it had its own, and the
# baseline that benchmarks/passes_effect.py measures them against.
TORCH_MLIR_PIPELINE: tuple[PassGroup, ...] = (
    PassGroup("prims", TORCH_BACKEND),
    PassGroup("linalg", ("torch-to-linalg",)),
)

PIPELINES: dict[str, tuple[PassGroup, ...]] = {
    "default": DEFAULT_PIPELINE,
    "torch-mlir": TORCH_MLIR_PIPELINE,
}


def pipeline_text(pipeline: tuple[PassGroup, ...]) -> str:
    """The pipeline as `--pipeline` takes it: `stage(pass,pass),stage(pass)`."""
    return ",".join(f"{group.name}({','.join(group.passes)})" for group in pipeline)


_GROUP = re.compile(r"\s*([\w-]+)\s*\(([^()]*)\)\s*")


def parse_pipeline(text: str) -> tuple[PassGroup, ...]:
    """A named pipeline (`default`, `torch-mlir`) or one written out as `stage(pass,pass),stage(...)`."""
    if text in PIPELINES:
        return PIPELINES[text]
    groups, position = [], 0
    while position < len(text):
        match = _GROUP.match(text, position)
        if match is None:
            raise KilnError(
                f"cannot read --pipeline at character {position + 1}: {text[position:position + 30]!r}",
                stage=STAGE,
                hint=f"write stage(pass,pass),stage(pass), or name one of: {', '.join(PIPELINES)}",
            )
        name, passes = match.groups()
        groups.append(PassGroup(name, tuple(p.strip() for p in passes.split(",") if p.strip())))
        position = match.end()
        if position < len(text) and text[position] == ",":
            position += 1
    pipeline = tuple(groups)
    check_pipeline(pipeline)
    return pipeline


def check_pipeline(pipeline: tuple[PassGroup, ...], level: str | None = "torch") -> None:
    """Every pass is known, and each runs on the level of IR the passes before it leave.

    `level` is the input's (a model starts as torch IR); None: whatever the first pass expects.
    """
    for group in pipeline:
        for name in group.passes:
            pass_ = PASSES.get(name) or _unknown_pass(name)
            if level is None and pass_.level != "any":
                level = pass_.level
            if pass_.level not in ("any", level):
                raise KilnError(
                    f"pass '{name}' in stage '{group.name}' works on {pass_.level} IR, but the IR is {level} there",
                    stage=STAGE,
                    hint="`kiln passes` lists each pass's level; torch-to-linalg lowers torch IR to linalg",
                )
            level = pass_.lowers_to or level


def without_passes(pipeline: tuple[PassGroup, ...], names: tuple[str, ...]) -> tuple[PassGroup, ...]:
    """`pipeline` with the passes `names` removed from every group (`--disable-pass`)."""
    present = {name for group in pipeline for name in group.passes}
    for name in names:
        if name not in present:
            PASSES.get(name) or _unknown_pass(name)
            raise KilnError(f"pass '{name}' is not in the pipeline, so it cannot be disabled", stage=STAGE)
    return tuple(PassGroup(group.name, tuple(p for p in group.passes if p not in names)) for group in pipeline)


def _unknown_pass(name: str) -> Pass:
    close = difflib.get_close_matches(name, PASSES, n=3)
    raise KilnError(
        f"unknown pass '{name}'" + (f"; did you mean {', '.join(close)}?" if close else ""),
        stage=STAGE,
        hint="`kiln passes` lists every pass",
    )
