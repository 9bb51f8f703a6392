"""kiln.runtime: load a compiled `.vmfb` and call it with torch tensors or numpy arrays.

Import rule: deploy-only. It imports nothing of kiln but kiln.errors, so a machine that only runs
artifacts needs iree-base-runtime, numpy and torch, never the compiler. The manifest format lives
here (the compiler writes it, the runtime checks every call against it), and so does the one
numerics comparison every check in kiln uses. Names below are imported on first use.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .boundary import KilnCopyWarning
    from .manifest import Manifest, TensorSpec
    from .module import LoadedModule, load

_EXPORTS = {
    "KilnCopyWarning": "boundary",
    "LoadedModule": "module",
    "Manifest": "manifest",
    "TensorSpec": "manifest",
    "load": "module",
}
__all__ = ["KilnCopyWarning", "LoadedModule", "Manifest", "TensorSpec", "load"]


def __getattr__(name: str) -> Any:
    if name not in _EXPORTS:
        raise AttributeError(f"module 'kiln.runtime' has no attribute '{name}'")
    return getattr(importlib.import_module(f".{_EXPORTS[name]}", __name__), name)
