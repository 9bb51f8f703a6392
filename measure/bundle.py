"""The one folder format for "compile here, run there": artifacts, and what the run side needs to check them.

kiln compiles on a CPU host (torch-mlir, iree-compile) and runs where the device is (a GPU host
with only torch, iree-base-runtime and kiln's runtime). Every tool that crosses that gap (the
benchmark suite, `kiln tune prepare`/`measure`, the GPU check of the examples, the model zoo)
writes a bundle folder:

    bundle.json       the header (who compiled what, where, how) and one Entry per artifact
    <entry>.vmfb/.json  an artifact and its manifest, or <entry>.thin: the artifact with its
                      weights zeroed and compressed (thin.py), rebuilt there from the model file
    <file>.pt         a reference: inputs and eager PyTorch's outputs computed here (torch.save)
    <file>.irpa       external weights; absent when the run side rebuilds them from the model file

An entry says how the run side gets everything it needs: the eager model and inputs from a model
file of the checkout (the device machine has the working tree) and its factories' arguments, or
the reference file; its weights inline, thinned, or in an archive (shared by entries, or rebuilt).
Nothing here imports the compiler.
"""

from __future__ import annotations

import hashlib
import json
import runpy
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch

from kiln.errors import KilnError
from kiln.runtime.manifest import Manifest, manifest_path
from kiln.runtime.module import LoadedModule
from kiln.runtime.tensors import to_host_array

from .thin import model_tensors, thicken, thin

SCHEMA = "kiln-bundle/1"
STAGE = "bundle"


@dataclass(frozen=True)
class ModelRecipe:
    """How the run side rebuilds the eager model and its example inputs: a model file of the checkout
    (`get_model(**model_kwargs)` or `model`, `get_example_inputs(**inputs_kwargs)` or `example_inputs`),
    seeded by the file itself, so both machines make the same weights."""

    file: str  # relative to the checkout's root
    model_kwargs: dict[str, Any] = field(default_factory=dict)
    inputs_kwargs: dict[str, Any] = field(default_factory=dict)


@dataclass(frozen=True)
class Entry:
    """One artifact of the bundle, or why there is none."""

    name: str
    artifact: str | None = None  # <name>.vmfb, or <name>.thin with `thin`
    compile_s: float | None = None
    # Peak resident memory while compiling, MiB: {"kiln": the compiling process, "iree_compile": its child}
    compile_memory_mib: dict[str, int] | None = None
    error: str | None = None  # why there is no artifact: the compile failed
    same_as: str | None = None  # an earlier entry whose artifact is byte-identical: run once
    model: ModelRecipe | None = None
    reference: str | None = None  # a .pt of {function: {"inputs", "expected"}} (and "state_dict")
    thin: dict[str, Any] | None = None  # thin.thin's recipe
    parameters: str | None = None  # the .irpa the artifact reads; rebuilt from `model` if absent
    labels: dict[str, Any] = field(default_factory=dict)  # the tool's own record: model, dtype, knobs, ...


@dataclass(frozen=True)
class Bundle:
    target: str
    driver: str  # the IREE runtime driver of the artifacts
    created: str
    command: str  # what made the bundle
    compiled_on: dict[str, Any]  # the compiling machine
    versions: dict[str, str]
    settings: dict[str, Any]  # the tool's own: gpu_arch, iree flags, a tuning plan's key, ...
    entries: tuple[Entry, ...]
    schema: str = SCHEMA

    def entry(self, name: str) -> Entry:
        for entry in self.entries:
            if entry.name == name:
                return entry
        raise KeyError(name)

    def write(self, folder: Path) -> None:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "bundle.json").write_text(json.dumps(asdict(self), indent=2) + "\n")

    @staticmethod
    def read(folder: Path) -> Bundle:
        path = folder / "bundle.json"
        if not path.is_file():
            raise KilnError(f"{path} not found: {folder} is not a kiln bundle", stage=STAGE)
        data = json.loads(path.read_text())
        if data.get("schema") != SCHEMA:
            raise KilnError(f"{path} is not a {SCHEMA} bundle (schema: {data.get('schema')!r})", stage=STAGE)
        data["entries"] = tuple(_entry(item) for item in data["entries"])
        return Bundle(**data)


def _entry(data: dict[str, Any]) -> Entry:
    model = ModelRecipe(**data["model"]) if data.get("model") else None
    return Entry(**{**data, "model": model})


# -- the compiling side ---------------------------------------------------------------------------


def add_artifact(folder: Path, entry: Entry, compiled: Any, thin_from: torch.nn.Module | None = None) -> Entry:
    """Write `compiled` (kiln.compiler's Compiled: .vmfb bytes, manifest, external weights) into the
    bundle as `entry`'s artifact; with `thin_from`, its weights zeroed, to be restored from that model.

    External weights are left for the caller: shared by several entries, or rebuilt on the run side.
    """
    if thin_from is not None:
        thinned, recipe = thin(compiled.vmfb, model_tensors(thin_from))
        (folder / f"{entry.name}.thin").write_bytes(thinned)
        (folder / f"{entry.name}.json").write_text(compiled.manifest.to_json())
        return replace(entry, artifact=f"{entry.name}.thin", thin=recipe)
    path = folder / f"{entry.name}.vmfb"
    path.write_bytes(compiled.vmfb)
    manifest_path(path).write_text(compiled.manifest.to_json())
    return replace(entry, artifact=path.name)


def write_reference(folder: Path, name: str, reference: dict[str, Any]) -> str:
    """Save a reference (inputs, eager outputs, optionally a state_dict) as `<name>.pt`; returns its file name."""
    torch.save(reference, folder / f"{name}.pt")
    return f"{name}.pt"


# -- the running side -----------------------------------------------------------------------------


def rebuild(entry: Entry, root: Path) -> tuple[torch.nn.Module, tuple[torch.Tensor, ...]]:
    """The entry's eager model (eval mode) and example inputs, made from its model file here."""
    if entry.model is None:
        raise KilnError(f"bundle entry {entry.name} names no model file to rebuild", stage=STAGE)
    path = Path(entry.model.file)
    namespace = runpy.run_path(str(path if path.is_absolute() else root / path), run_name=f"kiln_bundle_{path.stem}")
    model = namespace["get_model"](**entry.model.model_kwargs) if "get_model" in namespace else namespace["model"]
    if "get_example_inputs" in namespace:
        inputs = namespace["get_example_inputs"](**entry.model.inputs_kwargs)
    else:
        inputs = namespace["example_inputs"]
    return model.eval(), tuple(inputs)


def read_reference(folder: Path, entry: Entry) -> dict[str, Any]:
    if entry.reference is None:
        raise KilnError(f"bundle entry {entry.name} has no reference file", stage=STAGE)
    return torch.load(folder / entry.reference, weights_only=True)


def open_entry(
    folder: Path, entry: Entry, device: str | None, model: torch.nn.Module | None = None
) -> LoadedModule:
    """Load the entry's artifact onto `device`, its files made whole first (`entry_files`)."""
    path, parameters = entry_files(folder, entry, model)
    return LoadedModule(path, Manifest.from_json(manifest_path(path).read_text()), device, parameters)


def entry_digest(folder: Path, entry: Entry) -> str | None:
    """The SHA-256 of the entry's whole artifact (a thin one's recipe keeps it), or None without one:
    what a timing records, so that a case timed from one bundle can be shown to be the same bytes as
    another bundle's, compiled at another revision."""
    if entry.artifact is None:
        return None
    if entry.thin is not None:
        return entry.thin["sha256"]
    return hashlib.sha256((folder / entry.artifact).read_bytes()).hexdigest()


def entry_files(folder: Path, entry: Entry, model: torch.nn.Module | None = None) -> tuple[Path, Path | None]:
    """The entry's .vmfb and parameter archive, ready to load: a thin artifact made whole from
    `model`'s weights first, an absent archive written from `model`."""
    if entry.artifact is None:
        raise KilnError(f"bundle entry {entry.name} has no artifact: {entry.error}", stage=STAGE)
    path = folder / entry.artifact
    if entry.thin is not None:
        if model is None:
            raise KilnError(f"bundle entry {entry.name} is thin: its weights come from the model file", stage=STAGE)
        path = folder / f"{entry.name}.vmfb"
        path.write_bytes(thicken((folder / entry.artifact).read_bytes(), entry.thin, model_tensors(model)))
    parameters = None
    if entry.parameters is not None:
        parameters = folder / entry.parameters
        if not parameters.is_file():
            if model is None:
                raise KilnError(f"{parameters} is missing and entry {entry.name} has no model to rebuild it", stage=STAGE)
            write_parameters(model, parameters)
    return path, parameters


def write_parameters(model: torch.nn.Module, path: Path) -> None:
    """The model's weights as an IREE parameter archive, under their state_dict names (tied ones under each)."""
    import iree.runtime as rt

    tensors = model_tensors(model, remove_duplicate=False)
    arrays: dict[str, np.ndarray] = {name: to_host_array(tensor.detach()) for name, tensor in tensors.items()}
    rt.save_archive_file(arrays, path)
