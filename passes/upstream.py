"""Upstream passes kiln's pipeline uses, under the names kiln lists them by.

Each wraps a textual pipeline element of torch-mlir (or core MLIR) so that it mixes with our own
Python passes in one pipeline and shows up in `kiln passes` with a summary.
"""

from __future__ import annotations

from .pass_api import Pass

UPSTREAM_PASSES: tuple[Pass, ...] = (
    Pass(
        name="torch-match-quantized-custom-ops",
        summary="recognise quantize/dequantize custom ops so later passes can fold them",
        level="torch",
        pipeline="func.func(torch-match-quantized-custom-ops)",
    ),
    Pass(
        name="torch-backend-contract",
        summary="value semantics, shape/dtype refinement and torch-mlir's op decompositions",
        level="torch",
        pipeline="torchdynamo-export-to-torch-backend-pipeline",
    ),
    Pass(
        name="torch-to-linalg",
        summary="lower torch-dialect ops to linalg-on-tensors, arith, math and tensor",
        level="torch",
        pipeline="torch-backend-to-linalg-on-tensors-backend-pipeline",
    ),
)
