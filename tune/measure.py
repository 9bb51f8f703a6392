"""Measuring `kiln tune`'s candidates: check each artifact against eager PyTorch's outputs, then time it.

This half of the tuner runs where the artifacts run, which for a GPU is often a machine with only
the runtime (iree-base-runtime, torch, kiln; no torch-mlir, no iree-compile). So it imports nothing
from kiln.compiler, and it owns the tuning folder's format, which the compiler writes:

    tune.json        the plan: the tuning key, and every candidate (its artifact or why it has none)
    reference.pt     the example inputs and eager PyTorch's outputs for them, computed on the
                     compiling machine's CPU (torch.save: {function: {"inputs", "expected"}})
    weights.irpa     the external weights every candidate shares (only with --params external)
    cNN.vmfb, .json  one artifact and manifest per candidate
    measured.json    what `measure` found, one Measurement per candidate

A candidate is checked with `kiln bench`'s numerics check (relative L2 error of the worst output
within its dtype's tolerance; kiln.runtime.bench), every function of the artifact, and the first
function is timed as `kiln bench` times it: inputs on the device, warm-up calls, then the median.
"""

from __future__ import annotations

import gc
import json
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

import torch

from kiln.errors import KilnError
from kiln.measure.bench import check_numerics, upload
from kiln.measure.results import Numerics, Timing
from kiln.measure.timing import Settings, measure
from kiln.runtime.executors import CALLS_TO_CHOOSE
from kiln.runtime.manifest import Manifest, manifest_path
from kiln.runtime.module import LoadedModule

STAGE = "tune"
PLAN_SCHEMA = "kiln-tune-plan/1"
MEASURED_SCHEMA = "kiln-tune-measured/1"
PLAN, REFERENCE, WEIGHTS, MEASURED = "tune.json", "reference.pt", "weights.irpa", "measured.json"

# function name -> (example inputs, eager PyTorch's outputs)
Reference = dict[str, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]]


@dataclass(frozen=True)
class Candidate:
    """One way of compiling the model, as compiled into the tuning folder."""

    name: str  # "default", or the knobs it moves: "ukernels=all, handoff=torch"
    choices: dict[str, str]  # knob -> label, non-default knobs only
    settings: dict[str, Any]  # what it changes in the compile (the compiler's TunedSettings, as a dict)
    artifact: str | None = None  # cNN.vmfb in the folder; None when it failed or repeats another
    compile_s: float | None = None
    error: str | None = None  # why it has no artifact: the compile failed
    same_as: str | None = None  # the earlier candidate whose artifact is byte-identical: measured once


@dataclass(frozen=True)
class Plan:
    """tune.json: what `kiln tune prepare` compiled, for `measure` there and `accept` here."""

    key: str  # the tuning cache key
    key_fields: dict[str, Any]  # what the key was made of
    target: str
    driver: str  # the IREE runtime driver of the target
    command: str  # the command that made the folder
    compile_with: str  # the `kiln compile --tuned` command that uses the result
    created: str
    compiled_on: dict[str, Any]
    candidates: tuple[Candidate, ...]  # the first is kiln's default
    weights: str | None = None  # WEIGHTS when the candidates' weights are external
    schema: str = PLAN_SCHEMA

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def read(folder: Path) -> Plan:
        data = _read_json(folder / PLAN, PLAN_SCHEMA, "kiln tune prepare")
        data["candidates"] = tuple(Candidate(**candidate) for candidate in data["candidates"])
        return Plan(**data)


@dataclass(frozen=True)
class Measurement:
    """One candidate's verdict: its time, or why it was rejected."""

    name: str
    compile_s: float | None
    timing: Timing | None = None
    numerics: Numerics | None = None
    error: str | None = None  # why it was rejected: compile failure, load or call failure, numerics
    same_as: str | None = None  # its artifact is byte-identical to this candidate's, whose numbers it shares

    @property
    def ok(self) -> bool:
        return self.error is None and self.timing is not None

    @property
    def median_ms(self) -> float | None:
        return self.timing.median_ms if self.ok and self.timing is not None else None

    def line(self) -> str:
        """compile s, median ms, numerics: the columns of tune's progress output."""
        compile_s = f"compile {self.compile_s:5.1f} s" if self.compile_s is not None else "compile     - "
        timing = f"{self.timing.median_ms:9.3f} ms" if self.timing is not None else "        - ms"
        numerics = (
            f"numerics {self.numerics.rel_l2_error:.1e} {'ok' if self.numerics.ok else 'MISMATCH'}"
            if self.numerics is not None
            else "numerics -"
        )
        return f"{compile_s}  {timing}  {numerics}"

    @staticmethod
    def from_dict(data: dict[str, Any]) -> Measurement:
        timing = Timing(**data["timing"]) if data.get("timing") else None
        numerics = Numerics(**data["numerics"]) if data.get("numerics") else None
        return Measurement(data["name"], data["compile_s"], timing, numerics, data.get("error"), data.get("same_as"))


@dataclass(frozen=True)
class Measured:
    """measured.json: every candidate of a plan, measured on one device."""

    device: str | None  # as asked for; None: the artifacts' own
    machine: dict[str, Any]
    settings: dict[str, Any]
    measurements: tuple[Measurement, ...]
    schema: str = MEASURED_SCHEMA

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def read(folder: Path) -> Measured:
        data = _read_json(folder / MEASURED, MEASURED_SCHEMA, "kiln tune measure")
        data["measurements"] = tuple(Measurement.from_dict(m) for m in data["measurements"])
        return Measured(**data)


def write_reference(folder: Path, reference: Reference) -> None:
    data = {name: {"inputs": list(inputs), "expected": list(expected)} for name, (inputs, expected) in reference.items()}
    torch.save(data, folder / REFERENCE)


def read_reference(folder: Path) -> Reference:
    data = torch.load(folder / REFERENCE, weights_only=True)
    return {name: (tuple(item["inputs"]), tuple(item["expected"])) for name, item in data.items()}


def measure_candidate(
    folder: Path, candidate: Candidate, reference: Reference, settings: Settings, device: str | None, weights: str | None
) -> Measurement:
    """Load the candidate's artifact, check every function against `reference`, time the first one."""
    result = Measurement(candidate.name, candidate.compile_s, error=candidate.error)
    if candidate.error is not None or candidate.artifact is None:
        return result
    path = folder / candidate.artifact
    try:
        manifest = Manifest.from_json(manifest_path(path).read_text())
        module = LoadedModule(path, manifest, device, folder / weights if weights else None)
        checks = []
        for name, (inputs, expected) in reference.items():
            actual = module.functions[name](*inputs)
            checks.append(check_numerics(actual if isinstance(actual, tuple) else (actual,), expected))
        numerics = max(checks, key=lambda check: (not check.ok, check.rel_l2_error))
        if not numerics.ok:
            why = f"numerics: relative L2 error {numerics.rel_l2_error:.1e} > {numerics.tolerance:.0e}"
            return replace(result, numerics=numerics, error=why)
        uploaded = upload(module, reference[manifest.entry][0])
        warm = replace(settings, warmup=max(settings.warmup, CALLS_TO_CHOOSE))  # the CPU's executor chosen first
        timing = Timing.of(measure(lambda: module.call_on_device(uploaded), lambda: None, warm), candidate.compile_s)
        return replace(result, numerics=numerics, timing=timing)
    except Exception as exc:  # one candidate's failure (a KilnError, or IREE's) is a verdict, not the end
        return replace(result, error=f"run failed: {first_line(exc)}")
    finally:
        gc.collect()  # the module and its device buffers, before the next candidate's


def measure_plan(
    folder: Path,
    settings: Settings,
    device: str | None,
    machine: dict[str, Any],
    progress: Callable[[str], None],
) -> Measured:
    """Measure every candidate of the folder's plan; write and return measured.json."""
    plan = Plan.read(folder)
    if plan.weights is not None and not (folder / plan.weights).is_file():
        raise KilnError(
            f"{folder / plan.weights} is missing: the candidates read their weights from it",
            stage=STAGE,
            hint="copy it from where `kiln tune prepare` wrote it, or rebuild it there from the model file",
        )
    reference = read_reference(folder)
    done: dict[str, Measurement] = {}
    for index, candidate in enumerate(plan.candidates):
        if candidate.same_as is not None:
            done[candidate.name] = twin_of(done[candidate.same_as], candidate)
        else:
            done[candidate.name] = measure_candidate(folder, candidate, reference, settings, device, plan.weights)
        measurement = done[candidate.name]
        verdict = f"same artifact as {candidate.same_as}" if candidate.same_as else measurement.error or "ok"
        progress(f"[{index + 1}/{len(plan.candidates)}] {candidate.name:<36} {measurement.line()}  {verdict}")
    measured = Measured(device, machine, asdict(settings), tuple(done.values()))
    (folder / MEASURED).write_text(measured.to_json())
    return measured


def twin_of(measured: Measurement, candidate: Candidate) -> Measurement:
    """The measurement of `candidate`, whose artifact is byte-identical to the one `measured` measured."""
    return replace(measured, name=candidate.name, compile_s=candidate.compile_s, same_as=measured.name)


def _read_json(path: Path, schema: str, writer: str) -> dict[str, Any]:
    if not path.is_file():
        raise KilnError(f"{path} not found: not a tuning folder, or `{writer}` has not run on it yet", stage=STAGE)
    data: dict[str, Any] = json.loads(path.read_text())
    if data.get("schema") != schema:
        raise KilnError(f"{path} is not a {schema} file (schema: {data.get('schema')!r})", stage=STAGE)
    return data


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]

