"""A compiled artifact, loaded and callable like the module it came from.

A call goes through three small parts, each in its own module:
- plans: every call is checked against the manifest (count, dtype, shape, dynamic sizes), once
  per input signature, so a wrong input is a clear error naming the input, never a crash in IREE;
- boundary: how tensors cross into IREE and back, without copies where memory allows;
- executors: which IREE context runs the call, one call at a time each.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import iree.runtime as rt
import numpy as np
import torch

from kiln.errors import KilnError

from . import convention
from .boundary import Boundary, Value, boundary_for
from .devices import iree_reason, open_device, open_sync_cpu, placement
from .executors import Context, CpuExecutor, Executor
from .integrity import artifact_lock, check_declarations, check_files
from .manifest import PARAMETER_SCOPE, FunctionSpec, Manifest, manifest_path, parameters_path
from .plans import Plan, plan, signature_of
from .result_pool import ResultPool
from .tensors import to_numpy

STAGE = "runtime"


class LoadedModule:
    """An artifact bound to a device. Call it with tensors; get tensors back (a tuple if several).

    Inputs are torch tensors or numpy arrays. Tensors already on the artifact's device, dense and
    64-byte aligned, are used in place; others are copied once, counted in `copies` (see
    kiln.runtime.boundary). Results are fresh torch tensors on the artifact's device (on a CPU,
    over IREE's memory; on a GPU, allocated by torch): they never alias the inputs and outlive
    the module. Where every input was a host tensor or array and the artifact runs on a GPU, the
    results come back to the host; a CPU artifact called with CUDA tensors returns them there.
    """

    def __init__(
        self,
        vmfb: bytes | Path,
        manifest: Manifest,
        device: str | None = None,
        parameters: Path | dict[str, np.ndarray] | None = None,
    ) -> None:
        self.manifest = manifest
        self.device = open_device(device, manifest.driver, manifest.cpu_features)
        kind, index = placement(device, manifest.driver)
        self.boundary = boundary_for(self.device, kind, index)
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
        modules.append(vm_module)
        try:  # a GPU artifact built for an architecture this GPU cannot run fails here
            context = Context(instance, self.device, modules, manifest.driver)
        except Exception as exc:
            raise KilnError(
                f"the {manifest.target} artifact could not be loaded onto the device ({iree_reason(exc)})",
                stage=STAGE,
                hint=f"it was built for {manifest.target_details}; recompile for this device",
            ) from exc
        # Two contexts would keep two copies of the artifact's state (mutable globals): a stateful
        # artifact keeps one context, local-task, unless --cpu-driver chose.
        stateless = not any(spec.state for spec in manifest.functions)
        if kind == "cpu" and stateless and manifest.target_details.get("cpu_driver", "auto") == "auto":
            executor: Executor = CpuExecutor(context, lambda: Context(instance, open_sync_cpu(), modules, "local-sync"))
        else:
            executor = Executor(context)
        self.executor = executor
        self.functions = {
            spec.name: Function(spec, vm_module, executor, self.boundary) for spec in manifest.functions
        }
        self._entry = self.functions[manifest.entry]

    def __call__(self, *args: Value, as_numpy: bool = False) -> Any:
        """Call the artifact's first function (`main` for a one-function model)."""
        return self._entry(*args, as_numpy=as_numpy)

    def __getattr__(self, name: str) -> Function:
        """`module.encode(x)`: the artifact's functions by name."""
        functions = self.__dict__.get("functions", {})
        if name in functions:
            return functions[name]
        raise AttributeError(f"the artifact has no function '{name}'; it has: {', '.join(functions)}")

    def generate(
        self,
        input_ids: torch.Tensor,
        max_new_tokens: int = 20,
        *,
        do_sample: bool = False,
        temperature: float = 1.0,
        top_k: int | None = None,
        top_p: float | None = None,
        seed: int | None = None,
    ) -> torch.Tensor:
        """An artifact compiled with `--generate`: the prompt [batch, tokens] and its new tokens, as
        transformers' `generate` returns them (greedy unless `do_sample`; rows stop at end-of-sequence)."""
        from .generation import Sampling, generate

        return generate(self, input_ids, max_new_tokens, Sampling(do_sample, temperature, top_k, top_p, seed))

    @property
    def copies(self) -> dict[str, int]:
        """How many values the calls so far copied at the boundary, by reason (empty: none)."""
        return self.boundary.copies.counts

    def upload(self, *values: Value) -> Uploaded:
        """The first function's `upload`."""
        return self.functions[self.manifest.entry].upload(*values)

    def call_on_device(self, uploaded: Uploaded) -> rt.VmVariantList:
        """The first function's `call_on_device`."""
        return self.functions[self.manifest.entry].call_on_device(uploaded)


@dataclass(frozen=True)
class Uploaded:
    """Inputs in IREE's hands, for calling with the boundary left out (`Function.call_on_device`)."""

    views: tuple[rt.HalBufferView, ...]
    signature: Hashable
    plan: Plan


class Function:
    """One function of a loaded artifact. Every call is checked against its FunctionSpec first."""

    def __init__(self, spec: FunctionSpec, vm_module: rt.VmModule, executor: Executor, boundary: Boundary) -> None:
        self.spec = spec
        self._function = vm_module.lookup_function(spec.name)
        # On a GPU, results go into tensors torch allocates, through the artifact's out variant.
        use_out = boundary.storage_results and spec.out_variant is not None
        self._out_function = vm_module.lookup_function(spec.out_variant) if use_out else None
        self._results = ResultPool(boundary.storage, capacity=2 * len(spec.returns)) if use_out else None
        # On a CPU, intermediate tensors go into the context's storage, through the transient variant.
        self._transients_function, self._transients = _transients_variant(vm_module, spec)
        self._executor = executor
        self._boundary = boundary
        self._plans: dict[Hashable, Plan] = {}
        # What every call would otherwise recompute: these are a small model's whole call overhead.
        self._returns = spec.returns
        self._plain = convention.is_plain(spec)
        self._carried_in = any(tensor.carried_as for tensor in spec.inputs)
        self._carried_out = any(tensor.carried_as for tensor in self._returns)
        self._written = spec.overwritten

    def __call__(self, *args: Any, as_numpy: bool = False) -> Any:
        """Call as forward is called: its arguments in, its result out (convention.py)."""
        if self._plain:  # forward(tensors...) -> tensor: no nesting to walk
            return self.flat(*args, as_numpy=as_numpy)[0]
        return convention.results(self.spec, self.flat(*convention.arguments(self.spec, args), as_numpy=as_numpy))

    def flat(self, *args: Value, as_numpy: bool = False) -> tuple[Any, ...]:
        """Call with the function's input tensors in the manifest's order; returns its output tensors.

        An input forward mutates gets its new value copied back (convention.write_back).
        """
        signature = signature_of(args)
        call_plan = self._plans.get(signature) or self._plan(args, signature)
        boundary = self._boundary
        stream = boundary.stream()
        tensors, views = self._enter(args)
        function, arguments, stored = self._arguments(views, call_plan, stream)
        results = rt.VmVariantList(len(call_plan.result_dtypes))
        boundary.before_call(stream)  # after _enter: its copies are queued on the stream too
        transients = self._transients if function is self._transients_function else 0
        try:
            self._executor.invoke((self.spec.name, signature), function, arguments, results, transients)
        except Exception as exc:
            raise KilnError(f"the call failed on the device ({iree_reason(exc)})", stage=STAGE) from exc
        if stored is None:
            outputs = self._left(results, call_plan, tensors)
        else:
            outputs = [tensor for tensor, _ in stored]
        if self._carried_out:
            outputs = [convention.from_carried(output, spec) for output, spec in zip(outputs, self._returns, strict=True)]
        where = boundary.results_device(args)
        if where is not None:
            outputs = self._moved(outputs, where)
        returned = len(self.spec.outputs)
        if self.spec.writes_back:
            convention.write_back(self.spec, args, outputs[returned:])
        if as_numpy:
            return tuple(to_numpy(output) for output in outputs[:returned])
        return tuple(outputs[:returned])

    def upload(self, *values: Value) -> Uploaded:
        """`values` checked and imported once (as a call would), for `call_on_device`."""
        signature = signature_of(values)
        call_plan = self._plans.get(signature) or self._plan(values, signature)
        _, views = self._enter(values)  # inputs IREE writes into are copied once here, not per timed call
        return Uploaded(tuple(views), ("uploaded", signature), call_plan)

    def call_on_device(self, uploaded: Uploaded) -> rt.VmVariantList:
        """Call with inputs already imported, the results left where a call leaves them before the
        boundary: in tensors torch allocates where calls write into those (CUDA), else in IREE's memory.

        It times the computation alone (kiln.measure.bench's "kiln" column): no checks, no boundary
        for the inputs. Returns IREE's views of the results once they are ready, like every call of a
        synchronous IREE function. Where calls write into torch's tensors, the views are of memory the
        next call may reuse (kiln.runtime.result_pool): read them before calling again.
        """
        function, arguments, stored = self._arguments(uploaded.views, uploaded.plan, self._boundary.stream())
        results = rt.VmVariantList(len(self._returns))
        transients = self._transients if function is self._transients_function else 0
        self._executor.invoke((self.spec.name, uploaded.signature), function, arguments, results, transients)
        if stored is not None:  # the views keep the torch tensors they view alive
            results = rt.VmVariantList(len(stored))
            for _, view in stored:
                results.push_ref(view)
        return results

    def _arguments(
        self, views: Sequence[rt.HalBufferView], call_plan: Plan, stream: Hashable
    ) -> tuple[rt.VmFunction, rt.VmVariantList, list[tuple[torch.Tensor, rt.HalBufferView]] | None]:
        """The function to invoke and its arguments: the inputs' views, then, where calls write their
        results into tensors torch allocates (the out variant), one per result from the pool (lent on
        `stream`), returned too (None: IREE allocates the results). The transient variant's storage
        is added by the executor, under its context's lock."""
        stored = None
        if self._results is not None and call_plan.result_shapes is not None:
            stored = [
                self._results.take(shape, dtype, stream)
                for shape, dtype in zip(call_plan.result_shapes, call_plan.result_dtypes, strict=True)
            ]
        arguments = rt.VmVariantList(len(views) + len(stored or ()) + 1)
        for view in [*views, *(view for _, view in stored or ())]:
            arguments.push_ref(view)
        if stored is not None:
            return self._out_function, arguments, stored
        return self._transients_function or self._function, arguments, None

    def _enter(self, values: tuple[Value, ...]) -> tuple[list[torch.Tensor], list[rt.HalBufferView]]:
        """The inputs handed to IREE (in the dtype each is carried as; a copy of those the artifact
        writes into), and IREE's views of them."""
        tensors, views = [], []
        written, carried = self._written, self._carried_in
        for index, (value, spec) in enumerate(zip(values, self.spec.inputs, strict=True)):
            tensor, view = self._boundary.enter(convention.to_carried(value, spec) if carried else value, spec.name, index in written)
            tensors.append(tensor)
            views.append(view)
        return tensors, views

    def _plan(self, args: tuple[Value, ...], signature: Hashable) -> Plan:
        call_plan = plan(self.spec, args)
        if signature is not None:
            self._plans[signature] = call_plan
        return call_plan

    def _left(self, results: rt.VmVariantList, call_plan: Plan, inputs: list[torch.Tensor]) -> list[torch.Tensor]:
        """Results IREE allocated, as tensors. A result in an input's memory (a model that returns its
        input, or a view of it, as is) is copied, so that results never alias inputs."""
        boundary = self._boundary
        spans = [(tensor.data_ptr(), tensor.nbytes) for tensor in inputs]
        outputs = []
        for index, dtype in enumerate(call_plan.result_dtypes):
            output = boundary.leave(results.get_as_object(index, rt.HalBufferView), dtype)
            pointer = output.data_ptr()
            for start, size in spans:
                if 0 <= pointer - start < size:
                    boundary.copies.count("result is an input", f"result {index}: IREE returned an input's memory")
                    output = output.clone()
                    break
            outputs.append(output)
        return outputs

    def _moved(self, outputs: list[torch.Tensor], where: torch.device) -> list[torch.Tensor]:
        for _ in outputs:
            self._boundary.copies.count(f"result to {where}", f"a result from {self._boundary.home} to {where}")
        return [output.to(where) for output in outputs]


def _transients_variant(vm_module: rt.VmModule, spec: FunctionSpec) -> tuple[rt.VmFunction | None, int]:
    """The function's transient variant and the storage bytes it needs, from its reflection; (None, 0)
    where it has none, or needs none (every intermediate fused away)."""
    if spec.transients_variant is None:
        return None, 0
    function = vm_module.lookup_function(spec.transients_variant)
    size = function.reflection.get("iree.abi.transients.size.constant") if function is not None else None
    if size is None or not size.isdigit() or int(size) == 0:
        return None, 0
    return function, int(size)


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
