"""Measuring `kiln tune`'s candidates: check each artifact against eager PyTorch's outputs, then time it.

This half of the tuner runs where the artifacts run, which for a GPU is often a machine with only
the runtime (iree-base-runtime, torch, kiln; no torch-mlir, no iree-compile), so it imports nothing
from kiln.compiler. A tuning folder is a kiln.measure bundle: one entry per candidate (its
knobs and settings in `labels`; byte-identical artifacts `same_as` an earlier one), all sharing
`reference.pt` (the example inputs and eager PyTorch's outputs, computed on the compiling
machine's CPU) and, with external weights, `weights.irpa`; the bundle's settings hold the tuning
key and the `kiln compile --tuned` command. `measure` adds measured.json: one Measurement per
candidate.

A candidate is checked with `kiln bench`'s numerics check (relative L2 error of the worst output
within its dtype's tolerance; kiln.runtime.numerics), every function of the artifact, and the first
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
from kiln.measure.bundle import Bundle, Entry, open_entry
from kiln.measure.bundle import read_reference as read_bundle_reference
from kiln.measure.results import Numerics, Timing
from kiln.measure.timing import Settings, measure
from kiln.runtime.executors import CALLS_TO_CHOOSE
from kiln.runtime.numerics import computes_in_tf32

STAGE = "tune"
MEASURED_SCHEMA = "kiln-tune-measured/1"
REFERENCE, WEIGHTS, MEASURED = "reference", "weights.irpa", "measured.json"

# function name -> (example inputs, eager PyTorch's outputs)
Reference = dict[str, tuple[tuple[torch.Tensor, ...], tuple[torch.Tensor, ...]]]


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
        numerics = Numerics.loaded(data["numerics"]) if data.get("numerics") else None
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


def reference_record(reference: Reference) -> dict[str, Any]:
    """The reference as the bundle stores it: {function: {"inputs": [...], "expected": [...]}}."""
    return {name: {"inputs": list(inputs), "expected": list(expected)} for name, (inputs, expected) in reference.items()}


def read_reference(folder: Path, entry: Entry) -> Reference:
    data = read_bundle_reference(folder, entry)
    return {name: (tuple(item["inputs"]), tuple(item["expected"])) for name, item in data.items()}


def measure_candidate(
    folder: Path, candidate: Entry, reference: Reference, settings: Settings, device: str | None
) -> Measurement:
    """Load the candidate's artifact, check every function against `reference`, time the first one."""
    result = Measurement(candidate.name, candidate.compile_s, error=candidate.error)
    if candidate.error is not None or candidate.artifact is None:
        return result
    try:
        module = open_entry(folder, candidate, device)
        tf32 = computes_in_tf32(module.manifest.kernels)
        checks = []
        for name, (inputs, expected) in reference.items():
            actual = module.functions[name](*inputs)
            checks.append(check_numerics(actual if isinstance(actual, tuple) else (actual,), expected, tf32))
        numerics = max(checks, key=lambda check: (not check.ok, check.rel_l2_error))
        if not numerics.ok:
            why = f"numerics: relative L2 error {numerics.rel_l2_error:.1e} > {numerics.tolerance:.0e}"
            return replace(result, numerics=numerics, error=why)
        uploaded = upload(module, reference[module.manifest.entry][0])
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
    """Measure every candidate of the tuning folder; write and return measured.json."""
    bundle = Bundle.read(folder)
    shared = bundle.entries[0].parameters
    if shared is not None and not (folder / shared).is_file():
        raise KilnError(
            f"{folder / shared} is missing: the candidates read their weights from it",
            stage=STAGE,
            hint="copy it from where `kiln tune prepare` wrote it",
        )
    reference = read_reference(folder, bundle.entries[0])
    done: dict[str, Measurement] = {}
    for index, candidate in enumerate(bundle.entries):
        if candidate.same_as is not None:
            done[candidate.name] = twin_of(done[candidate.same_as], candidate)
        else:
            done[candidate.name] = measure_candidate(folder, candidate, reference, settings, device)
        measurement = done[candidate.name]
        verdict = f"same artifact as {candidate.same_as}" if candidate.same_as else measurement.error or "ok"
        progress(f"[{index + 1}/{len(bundle.entries)}] {candidate.name:<36} {measurement.line()}  {verdict}")
    measured = Measured(device, machine, asdict(settings), tuple(done.values()))
    (folder / MEASURED).write_text(measured.to_json())
    return measured


def twin_of(measured: Measurement, candidate: Entry) -> Measurement:
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

