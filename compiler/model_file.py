"""Load a user's model file: a Python file defining a module and its example inputs.

Convention: `model` and `example_inputs` (a tuple of tensors), or `get_model()` and
`get_example_inputs()`; `dynamic_shapes` is optional and passed to `torch.export`. Other names are
picked with `--model NAME` / `--inputs NAME`. Everything that can go wrong here is the user's file,
so each failure names the file and what was expected.

Weights from a checkpoint: a file that also defines `weights` (safetensors files: a glob or a list of
paths, relative to the file) or `load_weights(name) -> tensor` has `get_model()` called with its
parameters on the meta device, and the weights stay in the checkpoint until the `.irpa` is written
(checkpoint.py): a model of any size compiles in the memory its graph needs.
"""

from __future__ import annotations

import copy
import hashlib
import importlib.util
import inspect
import sys
import traceback
from contextlib import nullcontext
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import torch

from kiln.errors import KilnError
from kiln.runtime.manifest import PREFILL_CHUNK, GenerationSpec

from .checkpoint import (
    BoundWeights,
    SafetensorsCheckpoint,
    WeightHook,
    WeightSource,
    bind,
    meta_parameters,
    weightless_names,
)

STAGE = "load"
STAGE_OPTIONS = "options"


@dataclass(frozen=True)
class EntryPoint:
    """One function of the artifact: `module.<method>` called with inputs shaped like `example_inputs`."""

    name: str  # the artifact's function name: "main" for a plain model file
    module: torch.nn.Module
    example_inputs: tuple[Any, ...]  # tensors, Python scalars, and tuples, lists and dicts of them
    method: str = "forward"
    dynamic_shapes: Any = None

    def __call__(self, *inputs: torch.Tensor) -> Any:
        """Eager PyTorch: what the compiled function must reproduce."""
        with torch.no_grad():
            return getattr(self.module, self.method)(*inputs)


@dataclass(frozen=True)
class ModelSpec:
    """A model ready to capture: its entry points (eval-mode modules and example inputs) and origin.

    Most models have one entry point, `main`; `module`, `example_inputs` and `dynamic_shapes`
    are the first entry point's.
    """

    entries: tuple[EntryPoint, ...]
    source: Path | None
    source_sha256: str | None
    precision: str | None = None  # "bf16"/"f16" when kiln converted an f32 model (see precision.py)
    weights: BoundWeights | None = None  # where the meta tensors' weights are, for a model built without them
    generation: GenerationSpec | None = None  # --generate: the entry points are prefill and decode (generation.py)
    tokenizer: str | None = None  # the file's `tokenizer`: a name or path for transformers' AutoTokenizer
    quantized: str | None = None  # --quantize: the scheme of the Linear layers' weights (quantize.py)

    @property
    def module(self) -> torch.nn.Module:
        return self.entries[0].module

    @property
    def example_inputs(self) -> tuple[torch.Tensor, ...]:
        return self.entries[0].example_inputs

    @property
    def dynamic_shapes(self) -> Any:
        return self.entries[0].dynamic_shapes

    @property
    def weight_bytes(self) -> int:
        """The bytes of every parameter and buffer of the entry points' modules, each tensor once."""
        tensors = {
            id(tensor): tensor
            for entry in self.entries
            for tensor in (*entry.module.parameters(), *entry.module.buffers())
        }
        return sum(tensor.numel() * tensor.element_size() for tensor in tensors.values())


@dataclass(frozen=True)
class GenerationOptions:
    """`--generate --max-seq-len N --batch B --prefill-chunk C`: compile a causal LM's prefill and decode (generation.py)."""

    max_seq_len: int
    batch: int = 1
    prefill_chunk: int = PREFILL_CHUNK  # prompt tokens a prefill call takes (fewer if the cache is shorter)


@dataclass(frozen=True)
class ModelSource:
    """A model as the command line names it: the file, and the options that pick and shape it."""

    path: Path
    model_name: str | None = None  # --model
    inputs_name: str | None = None  # --inputs
    dynamic_dims: tuple[str, ...] = ()  # --dynamic-dim INPUT:AXIS
    precision: str | None = None  # --dtype
    generation: GenerationOptions | None = None  # --generate --max-seq-len N --batch B --prefill-chunk C
    quantize: str | None = None  # --quantize: int8 or int4[-gG], the Linear layers' weights

    def load(self) -> ModelSpec:
        """The model as kiln captures it."""
        from .generation import for_generation  # they convert a ModelSpec, defined here
        from .precision import convert_precision
        from .quantize import quantize_model

        spec = mark_dynamic(load_model_file(self.path, self.model_name, self.inputs_name), self.dynamic_dims)
        if self.generation is not None:
            spec = for_generation(spec, self.generation)
        return quantize_model(convert_precision(spec, self.precision), self.quantize)

    def args(self) -> list[str]:
        """These options on a command line."""
        args = [str(self.path)]
        args += ["--model", self.model_name] if self.model_name else []
        args += ["--inputs", self.inputs_name] if self.inputs_name else []
        for dim in self.dynamic_dims:
            args += ["--dynamic-dim", dim]
        args += ["--dtype", self.precision] if self.precision else []
        if self.generation is not None:
            generation = self.generation
            args += ["--generate", "--max-seq-len", str(generation.max_seq_len), "--batch", str(generation.batch)]
            args += ["--prefill-chunk", str(generation.prefill_chunk)]
        args += ["--quantize", self.quantize] if self.quantize else []
        return args


def load_model_file(
    path: Path, model_name: str | None = None, inputs_name: str | None = None
) -> ModelSpec:
    path = Path(path)
    if not path.is_file():
        raise KilnError(f"model file not found: {path}", stage=STAGE)
    namespace = _execute(path)
    source = _weight_source(namespace, path)
    if "entry_points" in namespace and model_name is None and inputs_name is None:
        entries = _entries_from(namespace["entry_points"], path)
    else:
        with meta_parameters() if source is not None else nullcontext():
            module = _module_from(namespace, path, model_name)
        inputs = _inputs_from(namespace, path, inputs_name)
        entries = (EntryPoint("main", module.eval(), inputs, dynamic_shapes=namespace.get("dynamic_shapes")),)
    weights = bind(source, _one_module(entries, path), path) if source is not None else None
    if source is None:
        _check_weights_present(entries, str(path))
    sha256 = hashlib.sha256(path.read_bytes()).hexdigest()
    tokenizer = namespace.get("tokenizer")
    if tokenizer is not None and not isinstance(tokenizer, str | Path):
        raise KilnError(f"{path}: `tokenizer` must name a tokenizer (a transformers name or a path), got {type(tokenizer).__name__}", stage=STAGE)
    return ModelSpec(
        entries=entries, source=path, source_sha256=sha256, weights=weights, tokenizer=str(tokenizer) if tokenizer else None
    )


def with_weights(spec: ModelSpec) -> ModelSpec:
    """`spec` with its checkpoint's weights loaded into a copy of its module, to run it in eager PyTorch."""
    if spec.weights is None:
        return spec
    module = copy.deepcopy(spec.module)  # a meta module: no weights to copy
    spec.weights.materialize(module)
    return replace(spec, entries=tuple(replace(entry, module=module) for entry in spec.entries))


def _weight_source(namespace: dict[str, Any], path: Path) -> WeightSource | None:
    """The file's `weights` (safetensors files) or `load_weights` hook, if it names one."""
    if "weights" in namespace and "load_weights" in namespace:
        raise KilnError(f"{path} defines both `weights` and `load_weights`; keep one", stage=STAGE)
    if "load_weights" in namespace:
        if not callable(namespace["load_weights"]):
            raise KilnError(f"{path}: `load_weights` must be a function name -> tensor", stage=STAGE)
        return WeightHook(namespace["load_weights"], path)
    if "weights" in namespace:
        pattern = namespace["weights"]
        if not (isinstance(pattern, str | Path) or (isinstance(pattern, list | tuple) and all(isinstance(p, str | Path) for p in pattern))):
            raise KilnError(
                f"{path}: `weights` must be a path or glob of safetensors files (or a list of them), "
                f"got {type(pattern).__name__}",
                stage=STAGE,
            )
        return SafetensorsCheckpoint.from_pattern(pattern, path.parent, path)
    return None


def _check_weights_present(entries: tuple[EntryPoint, ...], where: str) -> None:
    for entry in entries:
        missing = weightless_names(entry.module)
        if missing:
            raise KilnError(
                f"{where}: the model's tensor '{missing[0]}' has no data (it is on the meta device)"
                + (f", nor have {len(missing) - 1} more" if len(missing) > 1 else "")
                + ", and no checkpoint is named",
                stage=STAGE,
                hint="name the weights: `weights = \"dir/*.safetensors\"` or `def load_weights(name)` in the model file",
            )


def _one_module(entries: tuple[EntryPoint, ...], path: Path) -> torch.nn.Module:
    """The module a checkpoint is bound to: one, whose state_dict names are the checkpoint's."""
    modules = {id(entry.module): entry.module for entry in entries}
    if len(modules) > 1:
        raise KilnError(
            f"{path}: weights from a checkpoint need every entry point to be a method of one module",
            stage=STAGE,
        )
    return entries[0].module


def spec_from_module(module: torch.nn.Module, example_inputs: Any, dynamic_shapes: Any = None) -> ModelSpec:
    """The Python API's way in: a module and inputs already in hand."""
    if not isinstance(module, torch.nn.Module):
        raise KilnError(f"expected a torch.nn.Module, got {type(module).__name__}", stage=STAGE)
    inputs = _check_inputs(example_inputs, "example_inputs", "the call")
    _check_weights_present((EntryPoint("main", module, inputs),), "kiln.compile")
    return ModelSpec(
        entries=(EntryPoint("main", module.eval(), inputs, dynamic_shapes=dynamic_shapes),), source=None, source_sha256=None
    )


def _entries_from(value: Any, path: Path) -> tuple[EntryPoint, ...]:
    """`entry_points = {"encode": (model.encode, (x,)), "decode": (model.decode, (z,))}`: one artifact
    function per item; the callable is a module (its forward) or a bound method of one."""
    if not isinstance(value, dict) or not value:
        raise KilnError(f"{path}: `entry_points` must be a non-empty dict name -> (method, example_inputs)", stage=STAGE)
    entries = []
    for name, item in value.items():
        if not (isinstance(name, str) and name.isidentifier()):
            raise KilnError(f"{path}: entry point name {name!r} is not an identifier", stage=STAGE)
        if not (isinstance(item, tuple) and len(item) == 2):
            raise KilnError(f"{path}: entry point '{name}' must be (method, example_inputs)", stage=STAGE)
        function, inputs = item
        if isinstance(function, torch.nn.Module):
            module, method = function, "forward"
        elif isinstance(getattr(function, "__self__", None), torch.nn.Module):
            module, method = function.__self__, function.__name__
        else:
            raise KilnError(
                f"{path}: entry point '{name}' must be an nn.Module or a method of one, got {type(function).__name__}",
                stage=STAGE,
            )
        entries.append(EntryPoint(name, module.eval(), _check_inputs(inputs, f"entry point '{name}' inputs", str(path)), method))
    return tuple(entries)


def _execute(path: Path) -> dict[str, Any]:
    module_name = f"kiln_user_model_{hashlib.sha1(str(path.resolve()).encode()).hexdigest()[:8]}"
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    user_module = importlib.util.module_from_spec(spec)
    sys.path.insert(0, str(path.parent.resolve()))  # let the file import its neighbours
    try:
        spec.loader.exec_module(user_module)
    except Exception as exc:
        line = _line_in(exc, path)
        where = f"{path}:{line}" if line else str(path)
        raise KilnError(
            f"{where} raised {type(exc).__name__} while being imported: {exc}", stage=STAGE
        ) from exc
    finally:
        sys.path.remove(str(path.parent.resolve()))
    return vars(user_module)


def _line_in(exc: BaseException, path: Path) -> int | None:
    frames = [f for f in traceback.extract_tb(exc.__traceback__) if Path(f.filename) == path]
    return frames[-1].lineno if frames else None


def _module_from(namespace: dict[str, Any], path: Path, name: str | None) -> torch.nn.Module:
    candidates = [name] if name else ["model", "get_model"]
    for candidate in candidates:
        if candidate in namespace:
            value = _call_if_factory(namespace[candidate], candidate, path)
            if not isinstance(value, torch.nn.Module):
                raise KilnError(
                    f"{path}: `{candidate}` is a {type(value).__name__}, not a torch.nn.Module", stage=STAGE
                )
            return value
    found = sorted(
        key
        for key, value in namespace.items()
        if not key.startswith("_")
        and (isinstance(value, torch.nn.Module) or (callable(value) and key.startswith("get_")))
    )
    wanted = f"`{name}`" if name else "`model` or `get_model()`"
    listing = ", ".join(found) if found else "none"
    raise KilnError(
        f"{path} defines no {wanted}; modules and factories found: {listing}",
        stage=STAGE,
        hint="define `model = MyModule()` in the file, or pick one with --model NAME",
    )


def _inputs_from(namespace: dict[str, Any], path: Path, name: str | None) -> tuple[torch.Tensor, ...]:
    candidates = [name] if name else ["example_inputs", "get_example_inputs"]
    for candidate in candidates:
        if candidate in namespace:
            value = _call_if_factory(namespace[candidate], candidate, path)
            return _check_inputs(value, f"`{candidate}`", str(path))
    wanted = f"`{name}`" if name else "`example_inputs` or `get_example_inputs()`"
    raise KilnError(
        f"{path} defines no {wanted}",
        stage=STAGE,
        hint="define `example_inputs = (torch.randn(8, 64),)`, a tuple of tensors, or pick one with --inputs NAME",
    )


def _call_if_factory(value: Any, name: str, path: Path) -> Any:
    if not name.startswith("get_"):
        return value
    try:
        return value()
    except Exception as exc:
        raise KilnError(f"{path}: `{name}()` raised {type(exc).__name__}: {exc}", stage=STAGE) from exc


def _check_inputs(value: Any, what: str, where: str) -> tuple[Any, ...]:
    """forward's example arguments, as a tuple: tensors, Python scalars (which torch.export fixes as
    constants), and tuples, lists or dicts of them."""
    if isinstance(value, torch.Tensor):
        value = (value,)
    if isinstance(value, list):
        value = tuple(value)
    if not isinstance(value, tuple) or not all(_is_argument(v) for v in value):
        kinds = (
            ", ".join(type(v).__name__ for v in value) if isinstance(value, tuple) else type(value).__name__
        )
        raise KilnError(
            f"{where}: {what} must be a tuple of tensors (or Python scalars, or tuples, lists and dicts of them), "
            f"got {kinds}",
            stage=STAGE,
            hint="e.g. `example_inputs = (torch.randn(8, 64),)`",
        )
    return value


def _is_argument(value: Any) -> bool:
    if isinstance(value, (torch.Tensor, bool, int, float, str)) or value is None:
        return True
    if isinstance(value, (tuple, list)):
        return all(_is_argument(item) for item in value)
    if isinstance(value, dict):
        return all(_is_argument(item) for item in value.values())
    return False


def mark_dynamic(spec: ModelSpec, marks: tuple[str, ...]) -> ModelSpec:
    """Apply `--dynamic-dim INPUT:AXIS` marks (INPUT: a forward() argument name or its position).

    Each marked axis becomes `Dim.DYNAMIC`: torch.export infers its bounds and which inputs share it,
    and fails if the model forces it to one size.
    """
    if not marks:
        return spec
    if len(spec.entries) > 1:
        raise KilnError(
            "--dynamic-dim applies to one-function models; give each entry point's dynamic_shapes in the file",
            stage=STAGE_OPTIONS,
        )
    names = list(inspect.signature(spec.module.forward).parameters)[: len(spec.example_inputs)]
    shapes: list[dict[int, object]] = [{} for _ in spec.example_inputs]
    for mark in marks:
        name, _, axis_text = mark.partition(":")
        index = names.index(name) if name in names else int(name) if name.isdigit() else -1
        if not 0 <= index < len(shapes) or not axis_text.isdigit():
            raise KilnError(
                f"bad --dynamic-dim '{mark}': expected INPUT:AXIS with INPUT one of {', '.join(names)} "
                f"(or 0..{len(shapes) - 1}) and AXIS a number",
                stage=STAGE_OPTIONS,
            )
        axis = int(axis_text)
        if not isinstance(spec.example_inputs[index], torch.Tensor):
            raise KilnError(f"bad --dynamic-dim '{mark}': input '{names[index]}' is not a tensor", stage=STAGE_OPTIONS)
        if axis >= spec.example_inputs[index].dim():
            raise KilnError(
                f"bad --dynamic-dim '{mark}': input '{names[index]}' has {spec.example_inputs[index].dim()} dimensions",
                stage=STAGE_OPTIONS,
            )
        shapes[index][axis] = torch.export.Dim.DYNAMIC
    entry = replace(spec.entries[0], dynamic_shapes=tuple(shape or None for shape in shapes))
    return replace(spec, entries=(entry,))
