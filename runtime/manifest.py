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

FORMAT_VERSION = 3  # 2: several functions; 3: the calling convention (arguments, results, write-backs, state)


# A dimension: a size, or the name of a dynamic size's symbol ("s0"; outputs may hold an expression).
Dim = int | str


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[Dim, ...]
    dtype: str  # torch dtype name without the prefix: "float32", "bfloat16", "int64", "bool"
    carried_as: str | None = None  # the dtype the compiled function takes or returns instead, where the
    # target lacks `dtype` (float64 on a GPU target: float32); the runtime converts at the boundary

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


# The nesting of a function's arguments or results, as JSON: {"tuple": [...]}, {"list": [...]},
# {"dict": [[key, node], ...]}, {"namedtuple": "module.Name", "fields": [...], "items": [...]},
# {"node": "module.Name", "context": ..., "items": [...]} (another pytree container), and leaves
# {"input": i} / {"output": i} (a tensor of `inputs` / `outputs`; with "scalar": "int", a Python int
# carried as a 0-d int64 tensor) or {"constant": value} (a Python value fixed at compile time).
Tree = Any


@dataclass(frozen=True)
class FunctionSpec:
    """One callable function of an artifact: its name, inputs and outputs, and its dynamic sizes.

    `inputs` and `outputs` are the tensors the compiled function takes and returns; `arguments` and
    `results` say how they nest in forward's call (None in manifests before format 3: the inputs in
    order, and one output or a tuple). The compiled function returns `outputs`, then one new value
    per entry of `writes_back`: the index of the input it is copied into (forward mutated it).
    `state` names the buffers and parameters the artifact keeps across calls (forward mutates them).
    """

    name: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    symbols: dict[str, list[int | None]] = field(default_factory=dict)  # dynamic size -> [min, max or null]
    arguments: Tree = None
    results: Tree = None
    writes_back: tuple[int, ...] = ()
    state: tuple[str, ...] = ()
    # The exported function that writes the results into tensors the caller allocated (one trailing
    # argument per result, written-back inputs included), e.g. "main$out"; None in artifacts without one.
    out_variant: str | None = None

    @property
    def returns(self) -> tuple[TensorSpec, ...]:
        """What the compiled function returns: `outputs`, then the new value of each input in `writes_back`."""
        return (*self.outputs, *(self.inputs[index] for index in self.writes_back))


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
    # One entry per contraction a kiln kernel could compute (llvm-cpu: bf16; cuda on Hopper: those the
    # compiler outlined): which code computes it ("kiln": kernel, tiles, layout, precision; or "iree")
    # and why. Empty where kiln has no kernels for the target or model.
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
    """A FunctionSpec from its JSON; the fields a format before 3 lacks take their defaults."""
    return FunctionSpec(
        name=data["name"],
        inputs=tuple(_tensor_spec(t) for t in data["inputs"]),
        outputs=tuple(_tensor_spec(t) for t in data["outputs"]),
        symbols=data.get("symbols", {}),
        arguments=data.get("arguments"),
        results=data.get("results"),
        writes_back=tuple(data.get("writes_back", ())),
        state=tuple(data.get("state", ())),
        out_variant=data.get("out_variant"),
    )


def _tensor_spec(data: dict[str, Any]) -> TensorSpec:
    return TensorSpec(name=data["name"], shape=tuple(data["shape"]), dtype=data["dtype"], carried_as=data.get("carried_as"))


def package_versions(names: tuple[str, ...]) -> dict[str, str]:
    """The installed version of each distribution, "not installed" where it is missing: for manifests and reports."""
    versions = {}
    for name in names:
        try:
            versions[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            versions[name] = "not installed"
    return versions
