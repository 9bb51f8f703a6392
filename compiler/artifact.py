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

from iree.runtime import save_archive_file

from kiln.runtime.manifest import Manifest, manifest_path, parameters_path
from kiln.runtime.module import LoadedModule

from .weights import Parameters


@dataclass(frozen=True)
class Compiled:
    """A compiled model: callable like the original (on the manifest's device), and saveable."""

    vmfb: bytes
    manifest: Manifest
    parameters: Parameters | None = None  # external weights, saved as <stem>.irpa
    _loaded: dict[str, Any] = field(default_factory=dict, repr=False, compare=False)

    def save(self, path: str | Path) -> Path:
        """Write `path` (.vmfb), its `.json` manifest and any `.irpa` weights beside it; returns the .vmfb path."""
        path = Path(path)
        path.parent.mkdir(parents=True, exist_ok=True)
        if self.parameters is not None:
            archive = parameters_path(path)
            temporary = archive.with_name(f".{archive.name}.tmp")
            save_archive_file(self.parameters.arrays(), temporary)
            os.replace(temporary, archive)
        _write_atomically(manifest_path(path), self.manifest.to_json().encode())
        _write_atomically(path, self.vmfb)
        return path

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        """Run the artifact's first function, as `kiln.load(saved)(*args)` would."""
        return self.load()(*args, **kwargs)

    def load(self) -> LoadedModule:
        """The artifact loaded onto its manifest's device (once), e.g. for `.functions["decode"]`."""
        if "module" not in self._loaded:
            parameters = self.parameters.arrays() if self.parameters is not None else None
            self._loaded["module"] = LoadedModule(self.vmfb, self.manifest, parameters=parameters)
        return self._loaded["module"]


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
