"""A compiled artifact in memory: the `.vmfb` bytes and their manifest.

`save` writes both atomically (temporary files, then rename), so a failure can never leave a
half-written artifact or a `.vmfb` without its manifest.
"""

from __future__ import annotations

import importlib.metadata
import os
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln.runtime.manifest import Manifest, manifest_path


@dataclass(frozen=True)
class Compiled:
    """A compiled model: callable like the original (on the manifest's device), and saveable."""

    vmfb: bytes
    manifest: Manifest
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def save(self, path: str | Path) -> Path:
        """Write `path` (.vmfb) and its `.json` manifest beside it; returns the .vmfb path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        _write_atomically(manifest_path(path), self.manifest.to_json().encode())
        _write_atomically(path, self.vmfb)
        return path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if "module" not in self._loaded:
            from kiln.runtime.module import LoadedModule

            self._loaded["module"] = LoadedModule(self.vmfb, self.manifest)
        return self._loaded["module"](*args, **kwargs)


def versions() -> dict[str, str]:
    names = ("torchkiln", "torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime")
    return {name: _version(name) for name in names}


def _version(distribution: str) -> str:
    try:
        return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
        return "unknown"


def _write_atomically(path: Path, data: bytes) -> None:
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        os.unlink(temporary)
        raise
