"""Upstream passes kiln's pipeline uses, under the names kiln lists them by.

Each wraps a textual pipeline element of torch-mlir (or core MLIR) so that it mixes with our own
Python passes in one pipeline and shows up in `kiln passes` with a summary.
"""

from __future__ import annotations

from .pass_api import Pass

NO_LOWERING = "the op has no lowering in torch-mlir; rewrite that part of the model with supported ops"

UPSTREAM_PASSES: tuple[Pass, ...] = (
    Pass(
        name="torch-match-quantized-custom-ops",
        summary="recognise quantize/dequantize custom ops so later passes can fold them",
        level="torch",
        pipeline="func.func(torch-match-quantized-custom-ops)",
        hint=NO_LOWERING,
    ),
    Pass(
        name="torch-backend-contract",
        summary="value semantics, shape/dtype refinement and torch-mlir's op decompositions",
        level="torch",
        # Attention reaches this pass only at the torch hand-off (compiler/importer.py FUSED_IN_IREE),
        # to stay whole for IREE's fused attention; without this option non-causal attention is decomposed.
        pipeline="torchdynamo-export-to-torch-backend-pipeline{backend-legal-ops=aten.scaled_dot_product_attention}",
        hint=NO_LOWERING,
    ),
    Pass(
        name="torch-to-linalg",
        summary="lower torch-dialect ops to linalg-on-tensors, arith, math and tensor",
        level="torch",
        pipeline="torch-backend-to-linalg-on-tensors-backend-pipeline",
        lowers_to="linalg",
        hint=NO_LOWERING,
    ),
    Pass(
        name="canonicalize",
        summary="MLIR's canonicalization: each op's folds and local rewrites, dead code removed",
        level="any",
        pipeline="canonicalize",
    ),
    Pass(
        name="cse",
        summary="MLIR's common subexpression elimination",
        level="any",
        pipeline="cse",
    ),
    Pass(
        name="linalg-fuse-elementwise-ops",
        summary="MLIR's elementwise fusion (single-use producers only); an alternative to fuse-elementwise",
        level="linalg",
        pipeline="func.func(linalg-fuse-elementwise-ops)",
    ),
)
