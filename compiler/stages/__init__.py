"""The stage bodies beside the driver loop (compiler/pipeline.py), one module per stage and named like
its dump: `00-exported.txt` is exported.py's, `01-aten.mlir` aten.py's, each pass group's dump
(`02-prims.mlir`, ...) pass_groups.py's, and `NN-vmfb.*` vmfb.py's. Here: what they share.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from torch_mlir import ir

from kiln.runtime.manifest import FunctionSpec, GenerationSpec

from ..dump_text import dump_text

if TYPE_CHECKING:
    from kiln.targets.target import ResolvedTarget

    from ..iree_backend import IreeRun
    from ..model_file import ModelSpec
    from ..options import CompileOptions
    from ..weights import Parameters


@dataclass
class Program:
    """MLIR on its way down, with the calling convention read off at import.

    Pass stages rewrite `module` in place: each stage's dump is the record of what it produced. The
    calling convention also rides in the module itself (CALLING_CONVENTION), so that a compile can
    start again from any stage's dump (`--start-from`).
    """

    module: ir.Module
    functions: tuple[FunctionSpec, ...]  # one per entry point, in order
    precision: str | None  # "bf16"/"f16" when kiln converted an f32 model
    parameters: Parameters | None  # weights lifted out of the IR, when externalized
    generation: GenerationSpec | None = None  # --generate: the functions are prefill and decode
    quantized: str | None = None  # --quantize: the Linear layers' weight scheme (compiler/quantize.py)

    def __str__(self) -> str:
        """The dump text (dump_text.py): a model with a weight over DUMP_RESOURCE_LIMIT gets its ops alone, so a
        dump stays readable and small (GPT-2's would be 1 GB a stage); a small model's reproduces the stage."""
        return dump_text(self.module)


@dataclass
class StageContext:
    """What every stage may read: the model, the options as given and as resolved, and where its dump goes."""

    spec: ModelSpec | None  # None when the compile starts from a dump
    options: CompileOptions
    resolved: ResolvedTarget
    dump_stem: Path | None  # <dump_dir>/<index>-<name>, or None when not dumping
    input_dump: Path | None  # the previous stage's dump: the reproducer if this stage fails
    pass_times: dict[str, float] = field(default_factory=dict)  # a pass stage's passes; the vmfb stage's steps
    say: Callable[[str], None] = lambda line: None  # a line the user sees even when quiet (notes)
    iree_runs: list[IreeRun] = field(default_factory=list)  # every iree-compile run of the stage, in order


def shorten(text: str, limit: int = 240) -> str:
    """`text` cut to `limit` characters, for one line of an error."""
    return text if len(text) <= limit else text[: limit - 3] + "..."
