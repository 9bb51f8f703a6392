"""kiln's passes: a registry of named passes, imported on first use, and the pipelines as data.

To add a pass: write it in its own file, `passes/<name_with_underscores>.py`, declaring `PASS`
(`pattern_pass(...)` when it is a set of rewrite patterns), and name it in a group of a pipeline
(pipelines.py). Nothing else changes: the registry finds the file, and the compiler's driver,
`kiln passes` and the `--pipeline`, `--disable-pass` and `--print-after` flags all read these.

Import rule: this package imports nothing of kiln but kiln.errors. Importing it, its registry or
its pipelines imports neither torch_mlir nor any pass; reading `PASSES` imports them all.
"""

from .pipelines import (
    DEFAULT_PIPELINE,
    PIPELINES,
    TORCH_BACKEND,
    TORCH_MLIR_PIPELINE,
    PassGroup,
    PassPlacement,
    check_pipeline,
    parse_pipeline,
    pipeline_text,
    with_placements,
    with_strict_primitives,
    without_passes,
)
from .registry import PASSES

__all__ = [
    "DEFAULT_PIPELINE",
    "PASSES",
    "PIPELINES",
    "TORCH_BACKEND",
    "TORCH_MLIR_PIPELINE",
    "PassGroup",
    "PassPlacement",
    "check_pipeline",
    "parse_pipeline",
    "pipeline_text",
    "with_placements",
    "with_strict_primitives",
    "without_passes",
]
