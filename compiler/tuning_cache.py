"""Where `kiln tune`'s winners live, and how `kiln compile --tuned` finds them.

One JSON file per key in `~/.cache/kiln/tuned/` (`$KILN_CACHE_DIR/tuned/` when set). The key is a
SHA-256 over everything that decides which settings are fastest and still right: the model file's
content, the model and inputs picked from it, the example inputs' shapes and dtypes, the dynamic
dimensions, the precision, the target, the CPU or GPU architecture compiled for, and the versions
of kiln and IREE's compiler. Change any of them and the entry no longer applies, so `--tuned`
asks for a new `kiln tune` rather than applying settings measured on something else.
"""

from __future__ import annotations

import hashlib
import json
import os
import shlex
import tempfile
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from kiln.errors import KilnError
from kiln.runtime.bench import describe_inputs
from kiln.runtime.tuning_measure import Measurement

from .artifact import Compiled, versions
from .capture import mark_dynamic
from .model_file import ModelSpec, load_model_file
from .options import CompileOptions
from .precision import convert_precision
from .targets import get_target
from .tuning_space import TunedSettings

STAGE = "tune"
ENTRY_SCHEMA = "kiln-tune/1"
# What a target's details say about the device compiled for (targets.py); the rest explains a choice.
DEVICE_DETAILS = ("cpu", "machine", "host_cpu", "gpu_arch")


@dataclass(frozen=True)
class ModelRef:
    """A model as the command line names it: the file and `kiln compile`'s options that pick and shape it."""

    file: Path
    model_name: str | None = None
    inputs_name: str | None = None
    dynamic_dims: tuple[str, ...] = ()
    precision: str | None = None

    def load(self) -> ModelSpec:
        """The model as `kiln compile` would capture it."""
        spec = load_model_file(self.file, self.model_name, self.inputs_name)
        return convert_precision(mark_dynamic(spec, self.dynamic_dims), self.precision)

    def args(self) -> list[str]:
        """These options on a command line."""
        args = [str(self.file)]
        args += ["--model", self.model_name] if self.model_name else []
        args += ["--inputs", self.inputs_name] if self.inputs_name else []
        for dim in self.dynamic_dims:
            args += ["--dynamic-dim", dim]
        args += ["--dtype", self.precision] if self.precision else []
        return args


def key_fields(spec: ModelSpec, ref: ModelRef, options: CompileOptions) -> dict[str, Any]:
    details = get_target(options.target).details(options)
    return {
        "model_sha256": spec.source_sha256,
        "model": ref.model_name,
        "inputs": ref.inputs_name,
        "example_inputs": {entry.name: describe_inputs(entry.example_inputs) for entry in spec.entries},
        "dynamic_dims": list(ref.dynamic_dims),
        "precision": ref.precision,
        "target": options.target,
        "device": {name: value for name, value in details.items() if name in DEVICE_DETAILS},
        "kiln": versions()["torchkiln"],
        "iree_compiler": versions()["iree-base-compiler"],
    }


def key_of(fields: dict[str, Any]) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True).encode()).hexdigest()


@dataclass(frozen=True)
class TuneEntry:
    """One tuning result: the winning settings, how much they gained, and every candidate tried."""

    key: str
    key_fields: dict[str, Any]
    settings: TunedSettings
    default_ms: float
    tuned_ms: float
    candidates: tuple[Measurement, ...]
    created: str  # ISO 8601, UTC
    machine: dict[str, Any]  # where the candidates were timed
    command: str
    schema: str = ENTRY_SCHEMA

    def summary(self) -> str:
        """E.g. "ukernels=all (0.121 ms vs 0.150 ms default, tuned 2026-11-23)"."""
        tuned, default = (f"{ms:.3f}" if ms < 10 else f"{ms:.1f}" for ms in (self.tuned_ms, self.default_ms))
        return f"{self.settings.describe()} ({tuned} ms vs {default} ms default, tuned {self.created[:10]})"

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> TuneEntry:
        data: dict[str, Any] = json.loads(text)
        if data.get("schema") != ENTRY_SCHEMA:
            raise ValueError(f"not a {ENTRY_SCHEMA} entry")
        data["settings"] = TunedSettings.from_dict(data["settings"])
        data["candidates"] = tuple(Measurement.from_dict(m) for m in data["candidates"])
        return TuneEntry(**data)


def cache_dir() -> Path:
    return Path(os.environ.get("KILN_CACHE_DIR") or Path.home() / ".cache" / "kiln") / "tuned"


def entry_path(key: str) -> Path:
    return cache_dir() / f"{key}.json"


def store(entry: TuneEntry) -> Path:
    """Write the entry under its key, atomically; returns its path."""
    path = entry_path(entry.key)
    path.parent.mkdir(parents=True, exist_ok=True)
    descriptor, temporary = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    with os.fdopen(descriptor, "w") as file:
        file.write(entry.to_json())
    os.replace(temporary, path)
    return path


def lookup(spec: ModelSpec, ref: ModelRef, options: CompileOptions) -> TuneEntry:
    """The cached entry for this model, target and machine; a KilnError saying how to make one if none."""
    key = key_of(key_fields(spec, ref, options))
    path = entry_path(key)
    if path.is_file():
        try:
            return TuneEntry.from_json(path.read_text())
        except (ValueError, KeyError, TypeError) as exc:
            raise KilnError(f"corrupt tuning entry {path}: {exc}", stage=STAGE, hint="delete it and tune again") from exc
    run = command_for(["kiln", "tune", "run"], ref, options)
    prepare = command_for(["kiln", "tune", "prepare"], ref, options) + " -o DIR"
    raise KilnError(
        f"no tuned settings for this model, target and machine (key {key[:12]}, looked in {cache_dir()})",
        stage=STAGE,
        hint=f"tune it first: {run}   (its GPU elsewhere: {prepare}; then `kiln tune measure DIR` "
        "there and `kiln tune accept DIR` here)",
    )


def command_for(words: list[str], ref: ModelRef, options: CompileOptions) -> str:
    """`words` (e.g. kiln tune run) on this model, for this compile's target and device: one tuning key."""
    args = [*words, *ref.args(), "--target", options.target]
    args += ["--cpu", options.cpu] if options.cpu != "host" and get_target(options.target).archs is None else []
    args += ["--gpu-arch", options.gpu_arch] if options.gpu_arch else []
    return shlex.join(args)


def mark_tuned(compiled: Compiled, entry: TuneEntry) -> Compiled:
    """The artifact with its manifest saying it was tuned, and how (the flags are in iree_flags already)."""
    manifest = compiled.manifest
    tuned = f"{entry.settings.describe()} (key {entry.key[:12]}, tuned {entry.created[:10]})"
    return replace(compiled, manifest=replace(manifest, target_details={**manifest.target_details, "tuned": tuned}))
