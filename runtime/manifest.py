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
    # Roughly how many element operations a call does (compiler/work.py), for choosing a CPU driver;
    # None where a size is dynamic or the compiler did not say.
    work: int | None = None


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
    # One entry per contraction a kiln kernel could compute: which code computes it ("kiln": kernel,
    # tiles, grid; or "iree") and why. Empty where kiln has no kernels for the target or model.
    kernels: tuple[dict[str, Any], ...] = ()
    # CPU features (LLVM's names) the artifact's code needs beyond its target's baseline: kiln's CPU
    # kernels' (amx-bf16, avx512bf16). The runtime checks them, and asks Linux for AMX state, at load.
    cpu_features: tuple[str, ...] = ()
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
        data["cpu_features"] = tuple(data.get("cpu_features", ()))
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
        work=data.get("work"),
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
