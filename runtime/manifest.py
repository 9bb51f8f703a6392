"""The manifest: the JSON file beside every `.vmfb` that says how to call it.

It is the contract between the compiler, which writes it, and the runtime, which checks every call
against it. The runtime owns the format so that a deployment needs only `kiln.runtime`.
"""

from __future__ import annotations

import importlib.metadata
import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 2  # 2: several functions


# A dimension: a size, or the name of a dynamic size's symbol ("s0"; outputs may hold an expression).
Dim = int | str


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[Dim, ...]
    dtype: str  # torch dtype name without the prefix: "float32", "bfloat16", "int64", "bool"

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class FunctionSpec:
    """One callable function of an artifact: its name, inputs and outputs, and its dynamic sizes."""

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    symbols: dict[str, list[int | None]] = field(default_factory=dict)  # dynamic size -> [min, max or null]


@dataclass(frozen=True)
class Manifest:
    functions: tuple[FunctionSpec, ...]  # the first is what calling the module runs
    target: str  # kiln target name, e.g. "llvm-cpu"
    driver: str  # IREE runtime driver that runs it, e.g. "local-task"
    target_details: dict[str, str]  # what the target was built for, e.g. {"cpu": "host", "host_cpu": ...}
    iree_flags: tuple[str, ...]
    versions: dict[str, str]
    source: dict[str, str] = field(default_factory=dict)  # {"path": ..., "sha256": ...}
    precision: str | None = None  # "bf16"/"f16" when compiled from an f32 model with --dtype
    parameters: dict[str, int] | None = None  # external weights {"count", "bytes"}, in <stem>.irpa
    # One entry per contraction the compiler outlined for its own GPU kernels: which code computes it
    # ("kiln": entry, tiles, layout, precision; or "iree") and why. Empty where kernels do not apply.
    kernels: tuple[dict[str, Any], ...] = ()
    format_version: int = FORMAT_VERSION

    @property
    def entry(self) -> str:
        return self.functions[0].name

    @property
    def inputs(self) -> tuple[TensorSpec, ...]:
        return self.functions[0].inputs

    @property
    def outputs(self) -> tuple[TensorSpec, ...]:
        return self.functions[0].outputs

    def function(self, name: str) -> FunctionSpec:
        for function in self.functions:
            if function.name == name:
                return function
        known = ", ".join(f.name for f in self.functions)
        raise KeyError(f"the artifact has no function '{name}'; it has: {known}")

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> Manifest:
        data: dict[str, Any] = json.loads(text)
        data["functions"] = tuple(function_spec(f) for f in data["functions"])
        data["iree_flags"] = tuple(data["iree_flags"])
        data["kernels"] = tuple(data.get("kernels", ()))
        return Manifest(**data)


def manifest_path(vmfb_path: Path) -> Path:
    return Path(vmfb_path).with_suffix(".json")


def parameters_path(vmfb_path: Path) -> Path:
    """Where an artifact with external weights keeps them: an IREE parameter archive beside it."""
    return Path(vmfb_path).with_suffix(".irpa")


PARAMETER_SCOPE = "model"  # the scope the compiler names parameters in and the runtime serves them


def function_spec(data: dict[str, Any]) -> FunctionSpec:
    return FunctionSpec(
        name=data["name"],
        inputs=tuple(_tensor_spec(t) for t in data["inputs"]),
        outputs=tuple(_tensor_spec(t) for t in data["outputs"]),
        symbols=data.get("symbols", {}),
    )


def _tensor_spec(data: dict[str, Any]) -> TensorSpec:
    return TensorSpec(name=data["name"], shape=tuple(data["shape"]), dtype=data["dtype"])


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The installed version of each distribution, "not installed" where it is missing: for manifests and reports."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
