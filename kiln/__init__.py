"""kiln: ahead-of-time compiler for PyTorch models, from torch.export through MLIR to IREE.

    import kiln
    artifact = kiln.compile(model, (x,), target="llvm-cpu")   # in memory; artifact.save("m.vmfb")
    m = kiln.load("m.vmfb")                                    # from disk
    y = m(x)

The subpackages are the architecture: kiln.compiler (capture -> import -> passes -> IREE),
kiln.passes (our MLIR passes), kiln.runtime (load and call), kiln.cli (the `kiln` command).
Imports are lazy so that `import kiln` and `kiln --help` stay fast.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .errors import KilnError

if TYPE_CHECKING:
    from kiln.compiler import Compiled
    from kiln.runtime import LoadedModule

__version__ = "0.1.0"
__all__ = ["KilnError", "__version__", "compile", "load"]


def load(path: Any, device: str | None = None, verify_weights: bool = True) -> LoadedModule:
    """Load a `.vmfb` and its manifest; `device` is e.g. "cpu", "cuda", "cuda:1" (default: the artifact's).

    The files are checked against the manifest's sizes and sha256 first; `verify_weights=False`
    checks only the size of a large `.irpa` instead of hashing it.
    """
    from kiln.runtime import load as load_artifact

    return load_artifact(path, device, verify_weights)


def compile(module: Any, example_args: Any, target: str = "llvm-cpu", **options: Any) -> Compiled:
    """Compile an nn.Module for `target`; returns a callable artifact with `.save(path)`."""
    from kiln.compiler import compile as compile_module

    return compile_module(module, example_args, target, **options)
