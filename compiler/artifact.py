"""A compiled artifact in memory: the `.vmfb` bytes and their manifest.

`save` writes both atomically (temporary files, then rename), so a failure can never leave a
half-written artifact or a `.vmfb` without its manifest. External weights are written to the
`.irpa` one at a time (from a checkpoint, in slices), never all in memory at once.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from kiln.runtime.manifest import Manifest, manifest_path, package_versions, parameters_path
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
            with _atomically(parameters_path(path)) as temporary:
                self.parameters.save(temporary)
        with _atomically(manifest_path(path)) as temporary:
            temporary.write_text(self.manifest.to_json())
        with _atomically(path) as temporary:
            temporary.write_bytes(self.vmfb)
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
    return package_versions(("torchkiln", "torch", "torch-mlir", "iree-base-compiler", "iree-base-runtime"))


@contextmanager
def _atomically(path: Path) -> Iterator[Path]:
    """A temporary path beside `path` to write; renamed onto `path` on success, removed on failure."""
    descriptor, name = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    os.close(descriptor)
    temporary = Path(name)
    temporary.chmod(0o644)  # as a plain file write would make it, not mkstemp's private 0600
    try:
        yield temporary
        os.replace(temporary, path)
    except BaseException:
        temporary.unlink(missing_ok=True)
        raise
