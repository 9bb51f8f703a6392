"""kiln.runtime: load a compiled `.vmfb` and call it with torch tensors or numpy arrays."""

from .manifest import Manifest, TensorSpec
from .module import LoadedModule, load

__all__ = ["LoadedModule", "Manifest", "TensorSpec", "load"]
