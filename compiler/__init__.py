"""kiln.compiler: from a PyTorch module to an IREE artifact, one named stage at a time."""

from __future__ import annotations

from typing import Any

import torch

from .artifact import Compiled
from .model_file import ModelSpec, load_model_file, spec_from_module
from .options import CompileOptions
from .pipeline import Compilation, run_pipeline, stage_names

__all__ = [
    "Compilation",
    "CompileOptions",
    "Compiled",
    "ModelSpec",
    "compile",
    "load_model_file",
    "run_pipeline",
    "spec_from_module",
    "stage_names",
]


def compile(
    module: torch.nn.Module, example_args: Any, target: str = "llvm-cpu", **options: Any
) -> Compiled:
    """Compile `module` for `target`; the result is callable and has `.save(path)`.

    `options` are CompileOptions fields (cpu, opt_level, extra_iree_flags, dump_dir, ...).
    """
    spec = spec_from_module(module, example_args, options.pop("dynamic_shapes", None))
    compilation = run_pipeline(spec, CompileOptions(target=target, **options))
    if compilation.compiled is None:
        raise ValueError("kiln.compile returns an artifact; stop_after is for run_pipeline")
    return compilation.compiled
