"""The manifest: the JSON file beside every `.vmfb` that says how to call it.

It is the contract between the compiler, which writes it, and the runtime, which checks every call
against it. The runtime owns the format so that a deployment needs only `kiln.runtime`.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

FORMAT_VERSION = 1


@dataclass(frozen=True)
class TensorSpec:
    name: str
    shape: tuple[int, ...]
    dtype: str  # torch dtype name without the prefix: "float32", "bfloat16", "int64", "bool"

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


@dataclass(frozen=True)
class Manifest:
    entry: str
    inputs: tuple[TensorSpec, ...]
    outputs: tuple[TensorSpec, ...]
    target: str  # kiln target name, e.g. "llvm-cpu"
    driver: str  # IREE runtime driver that runs it, e.g. "local-task"
    target_details: dict[str, str]  # what the target was built for, e.g. {"cpu": "host", "host_cpu": ...}
    iree_flags: tuple[str, ...]
    versions: dict[str, str]
    source: dict[str, str] = field(default_factory=dict)  # {"path": ..., "sha256": ...}
    format_version: int = FORMAT_VERSION

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> Manifest:
        data: dict[str, Any] = json.loads(text)
        data["inputs"] = tuple(_tensor_spec(t) for t in data["inputs"])
        data["outputs"] = tuple(_tensor_spec(t) for t in data["outputs"])
        data["iree_flags"] = tuple(data["iree_flags"])
        return Manifest(**data)


def manifest_path(vmfb_path: Path) -> Path:
    return Path(vmfb_path).with_suffix(".json")


def _tensor_spec(data: dict[str, Any]) -> TensorSpec:
    return TensorSpec(name=data["name"], shape=tuple(data["shape"]), dtype=data["dtype"])
