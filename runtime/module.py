"""A compiled artifact, loaded and callable like the module it came from.

Every call is checked against the manifest first (count, shape, dtype), so a wrong input is a
clear error naming the input instead of a crash deep inside IREE.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import iree.runtime as rt
import numpy as np
import torch

from kiln.errors import KilnError

from .devices import open_device
from .manifest import Manifest, TensorSpec, manifest_path
from .tensors import dtype_name, to_device, to_host_array, to_torch

STAGE = "runtime"

Value = torch.Tensor | np.ndarray


class LoadedModule:
    """An artifact bound to a device. Call it with tensors; get tensors back (a tuple if several)."""

    def __init__(self, vmfb: bytes | Path, manifest: Manifest, device: str | None = None) -> None:
        self.manifest = manifest
        self.device = open_device(device, manifest.driver)
        instance = rt.VmInstance()
        try:
            if isinstance(vmfb, Path):
                vm_module = rt.VmModule.mmap(instance, str(vmfb))
            else:
                vm_module = rt.VmModule.copy_buffer(instance, vmfb)
        except Exception as exc:
            raise KilnError(f"not a valid IREE module ({exc})", stage=STAGE) from exc
        context = rt.SystemContext(vm_modules=[vm_module], config=rt.Config(device=self.device))
        self._function = context.modules[vm_module.name][manifest.entry]

    def __call__(self, *args: Value, as_numpy: bool = False) -> Any:
        if len(args) != len(self.manifest.inputs):
            expected = ", ".join(spec.describe() for spec in self.manifest.inputs)
            raise KilnError(
                f"expected {len(self.manifest.inputs)} input(s) ({expected}), got {len(args)}", stage=STAGE
            )
        arrays = [self._checked(spec, value) for spec, value in zip(self.manifest.inputs, args)]
        results = self._function(
            *(to_device(self.device, array, spec.dtype) for array, spec in zip(arrays, self.manifest.inputs))
        )
        if not isinstance(results, tuple):
            results = (results,)
        host = [result.to_host() for result in results]
        outputs = tuple(host) if as_numpy else tuple(to_torch(array) for array in host)
        return outputs[0] if len(outputs) == 1 else outputs

    def _checked(self, spec: TensorSpec, value: Value) -> np.ndarray:
        if not isinstance(value, (torch.Tensor, np.ndarray)):
            raise KilnError(
                f"input '{spec.name}' must be a torch.Tensor or numpy array, got {type(value).__name__}",
                stage=STAGE,
            )
        got_dtype = dtype_name(value.dtype)
        if got_dtype != spec.dtype:
            raise KilnError(f"input '{spec.name}' has dtype {got_dtype}; expected {spec.dtype}", stage=STAGE)
        if tuple(value.shape) != spec.shape:
            raise KilnError(
                f"input '{spec.name}' has shape {list(value.shape)}; expected {list(spec.shape)}", stage=STAGE
            )
        return to_host_array(value)


def load(path: str | Path, device: str | None = None) -> LoadedModule:
    """Load `model.vmfb` (with its `model.json` manifest) onto `device` (default: the artifact's own)."""
    path = Path(path)
    if not path.is_file():
        raise KilnError(f"artifact not found: {path}", stage=STAGE)
    manifest_file = manifest_path(path)
    if not manifest_file.is_file():
        raise KilnError(
            f"manifest not found: {manifest_file}",
            stage=STAGE,
            hint="a kiln artifact is a .vmfb plus the .json manifest written beside it by `kiln compile`",
        )
    try:
        manifest = Manifest.from_json(manifest_file.read_text())
    except (ValueError, KeyError, TypeError) as exc:
        raise KilnError(f"corrupt manifest {manifest_file}: {exc}", stage=STAGE) from exc
    try:
        return LoadedModule(path, manifest, device)
    except KilnError as exc:
        raise KilnError(f"{path}: {exc.message}", stage=STAGE, hint=exc.hint) from exc
