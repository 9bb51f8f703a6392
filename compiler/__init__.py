"""kiln.compiler: from a PyTorch module to an IREE artifact, one named stage at a time.

Import rule: kiln.passes, kiln.runtime, kiln.errors, and kiln.targets' interface (target.py,
resolve.py, levers.py), never a target's room (tests/test_layout.py); never the tools beside it
(kiln.measure, kiln.tune, kiln.conformance, kiln.cli), which import it. Names below are imported on
first use, so that the command line can import a light module of this package (options) without torch.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import torch

    from .artifact import Compiled
    from .driver import CompileResult, StoppedResult, Verification, compile_file, run_file_until
    from .model_file import ModelSource, ModelSpec, load_model_file, spec_from_module
    from .options import CompileOptions
    from .pipeline import Compilation, Stopped, run_pipeline, run_until, stage_names

_EXPORTS = {
    "Compilation": "pipeline",
    "CompileOptions": "options",
    "CompileResult": "driver",
    "Compiled": "artifact",
    "ModelSource": "model_file",
    "ModelSpec": "model_file",
    "Stopped": "pipeline",
    "StoppedResult": "driver",
    "Verification": "driver",
    "compile_file": "driver",
    "load_model_file": "model_file",
    "run_file_until": "driver",
    "run_pipeline": "pipeline",
    "run_until": "pipeline",
    "spec_from_module": "model_file",
    "stage_names": "pipeline",
}
__all__ = [
    "Compilation",
    "CompileOptions",
    "CompileResult",
    "Compiled",
    "ModelSource",
    "ModelSpec",
    "Stopped",
    "StoppedResult",
    "Verification",
    "compile",
    "compile_file",
    "load_model_file",
    "run_file_until",
    "run_pipeline",
    "run_until",
    "spec_from_module",
    "stage_names",
]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kiln.compiler' has no attribute '{name}'")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)


def compile(module: torch.nn.Module, example_args: Any, target: str = "llvm-cpu", **options: Any) -> Compiled:
    """Compile `module` for `target`; the result is callable and has `.save(path)`.

    `options` are CompileOptions fields (cpu, opt_level, extra_iree_flags, dump_dir, ...).
    """
    from .model_file import spec_from_module
    from .options import CompileOptions
    from .pipeline import run_pipeline

    if options.get("stop_after") is not None:
        raise ValueError("kiln.compile returns an artifact; stop_after is for kiln.compiler.run_until")
    spec = spec_from_module(module, example_args, options.pop("dynamic_shapes", None))
    return run_pipeline(spec, CompileOptions(target=target, **options)).compiled
