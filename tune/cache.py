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

from kiln.compiler.artifact import versions
from kiln.compiler.model_file import ModelSource, ModelSpec
from kiln.compiler.options import CompileOptions
from kiln.errors import KilnError
from kiln.runtime.tensors import describe_inputs
from kiln.targets import get_target
from kiln.targets.resolve import resolve

from .measure import Measurement
from .space import TunedSettings, apply_settings

STAGE = "tune"
ENTRY_SCHEMA = "kiln-tune/1"
# What a target's details say about the device compiled for (kiln.targets); the rest explains a choice.
DEVICE_DETAILS = ("cpu", "machine", "host_cpu", "gpu_arch")


def key_fields(spec: ModelSpec, ref: ModelSource, options: CompileOptions) -> dict[str, Any]:
    details = resolve(options).details
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


def lookup(spec: ModelSpec, ref: ModelSource, options: CompileOptions) -> TuneEntry:
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


def command_for(words: list[str], ref: ModelSource, options: CompileOptions) -> str:
    """`words` (e.g. kiln tune run) on this model, for this compile's target and device: one tuning key."""
    args = [*words, *ref.args(), "--target", options.target]
    args += ["--cpu", options.cpu] if options.cpu != "host" and get_target(options.target).archs is None else []
    args += ["--gpu-arch", options.gpu_arch] if options.gpu_arch else []
    return shlex.join(args)


def tuned_options(source: ModelSource, options: CompileOptions) -> tuple[CompileOptions, str]:
    """`options` with the settings `kiln tune` stored for this model, target and machine applied and
    recorded (the manifest's target_details say "tuned"), and a one-line summary of them."""
    entry = lookup(source.load(), source, options)
    tuned = f"{entry.settings.describe()} (key {entry.key[:12]}, tuned {entry.created[:10]})"
    return replace(apply_settings(options, entry.settings), tuned=tuned), entry.summary()
