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

from .devices import iree_reason, open_device
from .integrity import artifact_lock, check_declarations, check_files
from .manifest import PARAMETER_SCOPE, FunctionSpec, Manifest, TensorSpec, manifest_path, parameters_path
from .tensors import dtype_name, to_device, to_host_array, to_torch

STAGE = "runtime"

Value = torch.Tensor | np.ndarray


class LoadedModule:
    """An artifact bound to a device. Call it with tensors; get tensors back (a tuple if several).

    Inputs are numpy arrays or torch tensors on any device. IREE and torch share no device memory
    yet, so a call copies: each input to the host (`tensors.to_host_array`, where a CUDA tensor
    is copied) and from there into the IREE device's memory; each result back to the host, and
    from there onto the device of the first CUDA input, if any (else it stays on the CPU).
    """

    def __init__(
        self,
        vmfb: bytes | Path,
        manifest: Manifest,
        device: str | None = None,
        parameters: Path | dict[str, np.ndarray] | None = None,
    ) -> None:
        self.manifest = manifest
        self.device = open_device(device, manifest.driver)
        instance = rt.VmInstance()
        modules = [_parameters_module(instance, parameters)] if parameters is not None else []
        try:
            if isinstance(vmfb, Path):
                vm_module = rt.VmModule.mmap(instance, str(vmfb))
            else:
                vm_module = rt.VmModule.copy_buffer(instance, vmfb)
        except Exception as exc:
            raise KilnError(f"not a valid IREE module ({iree_reason(exc)})", stage=STAGE) from exc
        check_declarations(vm_module, manifest)
        try:  # a GPU artifact built for an architecture this GPU cannot run fails here
            context = rt.SystemContext(vm_modules=[*modules, vm_module], config=rt.Config(device=self.device))
        except Exception as exc:
            raise KilnError(
                f"the {manifest.target} artifact could not be loaded onto the device ({iree_reason(exc)})",
                stage=STAGE,
                hint=f"it was built for {manifest.target_details}; recompile for this device",
            ) from exc
        self.functions = {
            spec.name: Function(spec, context.modules[vm_module.name][spec.name], self.device)
            for spec in manifest.functions
        }

    def __call__(self, *args: Value, as_numpy: bool = False) -> Any:
        """Call the artifact's first function (`main` for a one-function model)."""
        return self.functions[self.manifest.entry](*args, as_numpy=as_numpy)

    def __getattr__(self, name: str) -> Function:
        """`module.encode(x)`: the artifact's functions by name."""
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"the artifact has no function '{name}'; it has: {', '.join(functions)}")

    def call_on_device(self, *values: Any) -> tuple[rt.DeviceArray, ...]:
        """The first function's `call_on_device`."""
        return self.functions[self.manifest.entry].call_on_device(*values)


class Function:
    """One function of a loaded artifact. Every call is checked against its FunctionSpec first."""

    def __init__(self, spec: FunctionSpec, function: Any, device: rt.HalDevice) -> None:
        self.spec = spec
        self._function = function
        self._device = device

    def __call__(self, *args: Value, as_numpy: bool = False) -> Any:
        inputs = self.spec.inputs
        if len(args) != len(inputs):
            expected = ", ".join(spec.describe() for spec in inputs)
            raise KilnError(f"expected {len(inputs)} input(s) ({expected}), got {len(args)}", stage=STAGE)
        sizes: dict[str, tuple[int, str]] = {}  # dynamic size symbol -> (size, the input that set it)
        arrays = [self._checked(spec, value, sizes) for spec, value in zip(inputs, args, strict=True)]
        try:
            results = self._function(
                *(to_device(self._device, array, spec.dtype) for array, spec in zip(arrays, inputs, strict=True))
            )
            if not isinstance(results, tuple):
                results = (results,)
            host = [result.to_host() for result in results]
        except Exception as exc:
            raise KilnError(f"the call failed on the device ({iree_reason(exc)})", stage=STAGE) from exc
        home = next((value.device for value in args if isinstance(value, torch.Tensor) and value.is_cuda), None)
        outputs = tuple(host) if as_numpy else tuple(to_torch(array).to(home or "cpu") for array in host)
        return outputs[0] if len(outputs) == 1 else outputs

    def call_on_device(self, *values: Any) -> tuple[rt.DeviceArray, ...]:
        """Call with inputs already on the device (device arrays, buffer views); results stay there.

        Unchecked and uncopied: it times the computation alone (kiln.measure.bench). Returns once
        the results are ready, like every call of a synchronous IREE function.
        """
        results = self._function(*values)
        return results if isinstance(results, tuple) else (results,)

    def _checked(self, spec: TensorSpec, value: Value, sizes: dict[str, tuple[int, str]]) -> np.ndarray:
        if not isinstance(value, (torch.Tensor, np.ndarray)):
            raise KilnError(
                f"input '{spec.name}' must be a torch.Tensor or numpy array, got {type(value).__name__}",
                stage=STAGE,
            )
        if isinstance(value, torch.Tensor) and value.is_meta:
            raise KilnError(f"input '{spec.name}' is a meta tensor: it has a shape but no data to compute on", stage=STAGE)
        got_dtype = dtype_name(value.dtype)
        if got_dtype != spec.dtype:
            raise KilnError(f"input '{spec.name}' has dtype {got_dtype}; expected {spec.dtype}", stage=STAGE)
        shape = tuple(value.shape)
        if len(shape) != len(spec.shape) or any(
            isinstance(want, int) and got != want for got, want in zip(shape, spec.shape, strict=False)
        ):
            raise KilnError(
                f"input '{spec.name}' has shape {list(shape)}; expected {list(spec.shape)}", stage=STAGE
            )
        for axis, (got, symbol) in enumerate(zip(shape, spec.shape, strict=True)):
            if isinstance(symbol, str):
                self._check_dynamic(spec.name, axis, got, symbol, sizes)
        return to_host_array(value)

    def _check_dynamic(self, name: str, axis: int, size: int, symbol: str, sizes: dict[str, tuple[int, str]]) -> None:
        low, high = self.spec.symbols.get(symbol, [0, None])
        if size < (low or 0) or (high is not None and size > high):
            accepted = f"{low}..{high}" if high is not None else f">= {low}"
            raise KilnError(
                f"input '{name}' dimension {axis} is {size}; the artifact accepts {accepted} (dynamic size {symbol})",
                stage=STAGE,
            )
        bound, by = sizes.setdefault(symbol, (size, name))
        if bound != size:
            raise KilnError(
                f"input '{name}' dimension {axis} is {size}, but input '{by}' set dynamic size {symbol} to {bound}",
                stage=STAGE,
            )


def _parameters_module(instance: rt.VmInstance, parameters: Path | dict[str, np.ndarray]) -> rt.VmModule:
    """The module that serves the artifact's external weights, from an .irpa archive or from memory."""
    index = rt.ParameterIndex()
    if isinstance(parameters, Path):
        try:
            index.load(str(parameters))
        except Exception as exc:
            raise KilnError(f"cannot read parameter archive {parameters} ({iree_reason(exc)})", stage=STAGE) from exc
    else:
        for name, array in parameters.items():
            index.add_buffer(name, array)
    return rt.create_io_parameters_module(instance, index.create_provider(scope=PARAMETER_SCOPE))


def load(path: str | Path, device: str | None = None, verify_weights: bool = True) -> LoadedModule:
    """Load `model.vmfb` (with its `model.json` manifest) onto `device` (default: the artifact's own).

    The files are data from elsewhere, checked before IREE reads them (kiln.runtime.integrity): the
    manifest field by field, the .vmfb's size and sha256, the .irpa's size, and its sha256 unless
    `verify_weights` is False (hashing a many-GB archive takes seconds).
    """
    path = Path(path)
    if not path.is_file():
        problem = "is not a file" if path.exists() else "not found"
        raise KilnError(f"artifact {problem}: {path}", stage=STAGE)
    manifest_file = manifest_path(path)
    if not manifest_file.is_file():
        raise KilnError(
            f"manifest not found: {manifest_file}",
            stage=STAGE,
            hint="a kiln artifact is a .vmfb plus the .json manifest written beside it by `kiln compile`",
        )
    with artifact_lock(path.parent, exclusive=False):  # a save into this folder renames nothing meanwhile
        manifest = _read_manifest(manifest_file)
        parameters = None
        if manifest.parameters is not None:
            parameters = parameters_path(path)
            if not parameters.is_file():
                raise KilnError(
                    f"parameter archive not found: {parameters}",
                    stage=STAGE,
                    hint="this artifact keeps its weights in an .irpa file beside the .vmfb; copy them together",
                )
        try:
            check_files(path, manifest, parameters, verify_weights)
            return LoadedModule(path, manifest, device, parameters)
        except KilnError as exc:
            raise KilnError(f"{path}: {exc.message}", stage=STAGE, hint=exc.hint) from exc


MAX_MANIFEST_BYTES = 16 << 20  # kiln's manifests are a few KiB; a bigger file is not one


def _read_manifest(file: Path) -> Manifest:
    size = file.stat().st_size
    if size > MAX_MANIFEST_BYTES:
        raise KilnError(f"corrupt manifest {file}: {size} bytes, too large to be a kiln manifest", stage=STAGE)
    try:
        return Manifest.from_json(file.read_bytes().decode())
    except ValueError as exc:  # JSONDecodeError, UnicodeDecodeError, ManifestError
        raise KilnError(f"corrupt manifest {file}: {exc}", stage=STAGE) from exc
