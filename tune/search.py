"""`kiln tune`: find the fastest right way to compile one model for one target on one machine.

Each candidate (a choice per knob of the target's space, space.py) is compiled into a tuning
folder, checked against eager PyTorch and timed by kiln.tune.measure; the winner goes
into the tuning cache (cache.py), where `kiln compile --tuned` finds it.

- `tune`, where the target's device is: coordinate descent from kiln's default. Each knob's other
  choices are tried in turn on top of the best so far; one that is faster by more than `min_gain`
  becomes the best. Sweeps repeat while something moved, within the candidate and time budgets.
  At the end the winner and the default are timed again, back to back, and the winner is kept
  only if it still wins: on a shared machine, one lucky run is not a gain.
- `prepare` here, `measure` there, `accept` here, for a device on another machine (a GPU host
  with only the runtime). Coordinate descent needs each step's times before the next, so the
  split tries kiln's default and every single-knob variant of it, compiled in one go.
"""

from __future__ import annotations

import hashlib
import statistics
import tempfile
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timezone
from pathlib import Path

import torch
from iree.runtime import save_archive_file

from kiln.compiler.artifact import versions
from kiln.compiler.model_file import ModelSource, ModelSpec
from kiln.compiler.options import CompileOptions
from kiln.compiler.pipeline import run_pipeline
from kiln.compiler.weights import Parameters
from kiln.errors import KilnError
from kiln.measure.bundle import Bundle, Entry, add_artifact, write_reference
from kiln.measure.timing import Settings, cpu_clock, environment, others_share, torch_device_for
from kiln.targets import get_target

from .cache import TuneEntry, command_for, key_fields, key_of, store
from .measure import (
    REFERENCE,
    WEIGHTS,
    Measured,
    Measurement,
    Reference,
    first_line,
    measure_candidate,
    reference_record,
    twin_of,
)
from .space import Assignment, Space, TunedSettings, apply_settings, assign, describe, settings_of

STAGE = "tune"
RETIME_ROUNDS = 5
Progress = Callable[[str], None]


@dataclass(frozen=True)
class Limits:
    max_candidates: int = 20  # candidates compiled, kiln's default included
    budget_s: float = 1200.0  # no candidate is started after this long
    sweeps: int = 2  # coordinate descent: passes over the knobs (fewer once nothing moves)
    min_gain: float = 0.03  # a candidate must be this much faster than the best so far to replace it


def improves(median_ms: float, best_ms: float, min_gain: float) -> bool:
    return median_ms < best_ms * (1.0 - min_gain)


def reference_of(spec: ModelSpec) -> Reference:
    """Each function's example inputs and eager PyTorch's outputs for them, on this machine's CPU."""
    reference: Reference = {}
    for entry in spec.entries:
        expected = entry(*entry.example_inputs)
        reference[entry.name] = (entry.example_inputs, expected if isinstance(expected, tuple) else (expected,))
    return reference


class CandidateFolder:
    """Compiles candidates into a tuning folder (a kiln.measure bundle): one artifact per distinct
    candidate, the reference and the weights shared.

    A candidate whose artifact is byte-identical to an earlier one's (a flag that changes nothing
    for this model) is not written again: it is `same_as` the earlier one and measured once.
    """

    def __init__(self, folder: Path, spec: ModelSpec, base: CompileOptions, space: Space) -> None:
        self.folder, self.spec, self.base, self.space = folder, spec, base, space
        self.candidates: dict[str, Entry] = {}
        self.reference = write_reference(folder, REFERENCE, reference_record(reference_of(spec)))
        self._digests: dict[str, str] = {}  # artifact SHA-256 -> the candidate that has it
        self._weights: dict[str, torch.Tensor] = {}

    def compile(self, assignment: Assignment) -> Entry:
        name, settings = describe(assignment), settings_of(self.space, assignment)
        labels = {"choices": dict(assignment), "settings": asdict(settings)}
        candidate = Entry(name, reference=self.reference, labels=labels)
        start = time.perf_counter()
        try:
            compiled = run_pipeline(self.spec, apply_settings(self.base, settings)).compiled
        except Exception as exc:  # a candidate that does not compile is a verdict, not the end of the search
            candidate = replace(candidate, error=f"compile failed: {first_line(exc)}")
        else:
            candidate = replace(candidate, compile_s=round(time.perf_counter() - start, 2))
            if compiled.parameters is not None:
                self._share(compiled.parameters)
                candidate = replace(candidate, parameters=WEIGHTS)
            digest = hashlib.sha256(compiled.vmfb).hexdigest()
            if digest in self._digests:
                candidate = replace(candidate, same_as=self._digests[digest])
            else:
                self._digests[digest] = name
                named = replace(candidate, name=f"c{len(self._digests) - 1:02d}")
                candidate = replace(candidate, artifact=add_artifact(self.folder, named, compiled).artifact)
        self.candidates[name] = candidate
        return candidate

    def artifact_of(self, name: str) -> Entry:
        """The candidate that holds `name`'s artifact: itself, or the one it is the same as."""
        candidate = self.candidates[name]
        return self.candidates[candidate.same_as] if candidate.same_as else candidate

    def _share(self, parameters: Parameters) -> None:
        """Every candidate reads the same weights: write them once (again only if a candidate adds some)."""
        if parameters.tensors.keys() <= self._weights.keys():
            return
        self._weights.update(parameters.tensors)
        save_archive_file(Parameters(self._weights).arrays(), self.folder / WEIGHTS)


def coordinate_descent(
    space: Space, evaluate: Callable[[Assignment], Measurement], limits: Limits, progress: Progress
) -> tuple[dict[str, str], list[Measurement]]:
    """The best assignment found from kiln's default, and every candidate's measurement in the order tried."""
    start = time.perf_counter()
    baseline = evaluate({})
    progress(_line(1, baseline, "baseline"))
    if not baseline.ok or baseline.median_ms is None:
        raise KilnError(
            f"kiln's default compile of this model is rejected ({baseline.error}); there is nothing to tune against",
            stage=STAGE,
        )
    tried: dict[str, Measurement] = {baseline.name: baseline}
    best: dict[str, str] = {}
    best_ms = baseline.median_ms
    for _ in range(limits.sweeps):
        moved = False
        for knob in space:
            for choice in knob.choices:
                assignment = assign(space, best, knob, choice.label)
                if describe(assignment) in tried:
                    continue
                if len(tried) >= limits.max_candidates or time.perf_counter() - start > limits.budget_s:
                    progress(f"stopped: {len(tried)} candidates, {time.perf_counter() - start:.0f} s (see --max-candidates, --budget-s)")
                    return best, list(tried.values())
                measurement = evaluate(assignment)
                tried[measurement.name] = measurement
                verdict = f"rejected: {measurement.error}"
                if measurement.median_ms is not None:
                    change = f"{measurement.median_ms / best_ms - 1:+.1%} vs best"
                    if improves(measurement.median_ms, best_ms, limits.min_gain):
                        best, best_ms, moved, verdict = assignment, measurement.median_ms, True, f"kept ({change})"
                    else:
                        verdict = f"not kept ({change})"
                if measurement.same_as:
                    verdict += f"; same artifact as {measurement.same_as}"
                progress(_line(len(tried), measurement, verdict))
        if not moved:
            break
    return best, list(tried.values())


def tune(
    ref: ModelSource,
    base: CompileOptions,
    space: Space,
    limits: Limits,
    settings: Settings,
    device: str | None,
    command: str,
    progress: Progress,
) -> TuneEntry:
    """Tune here: compile, check and time candidates on this machine's device; store and return the winner."""
    spec = ref.load()
    fields = key_fields(spec, ref, base)
    with tempfile.TemporaryDirectory(prefix="kiln-tune-") as temporary:
        folder = Path(temporary)
        candidates = CandidateFolder(folder, spec, base, space)
        reference = reference_of(spec)
        measured: dict[str, Measurement] = {}

        def time_candidate(name: str) -> Measurement:
            return measure_candidate(folder, candidates.artifact_of(name), reference, settings, device)

        def evaluate(assignment: Assignment) -> Measurement:
            candidate = candidates.compile(assignment)
            if candidate.same_as is not None:
                measured[candidate.name] = twin_of(measured[candidate.same_as], candidate)
            else:
                measured[candidate.name] = time_candidate(candidate.name)
            return measured[candidate.name]

        clock = cpu_clock()
        best, trail = coordinate_descent(space, evaluate, limits, progress)
        default_ms = tuned_ms = trail[0].median_ms
        if best:
            default_ms, tuned_ms, ratio = _retime(time_candidate, trail[0].name, describe(best), progress)
            if ratio is None or not improves(ratio, 1.0, limits.min_gain):
                progress("the gain did not hold when re-timed: keeping kiln's default")
                best = {}
                default_ms = tuned_ms = default_ms or trail[0].median_ms
        busy = others_share(clock, cpu_clock())
    if busy is not None and busy > 0.1:
        progress(f"note: other processes used {busy:.0%} of the CPUs meanwhile; CPU timings suffer from that")
    assert default_ms is not None and tuned_ms is not None
    torch_device = torch_device_for(get_target(base.target).driver, device)
    entry = TuneEntry(
        key=key_of(fields),
        key_fields=fields,
        settings=settings_of(space, best),
        default_ms=default_ms,
        tuned_ms=tuned_ms,
        candidates=tuple(trail),
        created=_now(),
        machine={**environment(torch_device)[0], "others_cpu_share": busy},
        command=command,
    )
    store(entry)
    return entry


def single_knob_assignments(space: Space) -> list[dict[str, str]]:
    """kiln's default, then each knob's other choices one at a time: the split's candidates."""
    return [{}, *({knob.name: choice.label} for knob in space for choice in knob.choices[1:])]


def prepare(
    ref: ModelSource, base: CompileOptions, space: Space, limits: Limits, folder: Path, command: str, progress: Progress
) -> Bundle:
    """Compile the split's candidates into `folder` with the reference outputs; write and return its bundle."""
    if folder.exists() and any(folder.iterdir()):
        raise KilnError(f"{folder} is not empty; prepare writes a fresh tuning folder", stage=STAGE)
    folder.mkdir(parents=True, exist_ok=True)
    spec = ref.load()
    fields = key_fields(spec, ref, base)
    candidates = CandidateFolder(folder, spec, base, space)
    assignments = single_knob_assignments(space)[: limits.max_candidates]
    start = time.perf_counter()
    for index, assignment in enumerate(assignments):
        if index and time.perf_counter() - start > limits.budget_s:
            progress(f"stopped at the budget: {index} of {len(assignments)} candidates compiled (see --budget-s)")
            break
        candidate = candidates.compile(assignment)
        outcome = candidate.error or (f"same artifact as {candidate.same_as}" if candidate.same_as else candidate.artifact)
        compile_s = f"compile {candidate.compile_s:5.1f} s" if candidate.compile_s is not None else "compile     - "
        progress(f"[{index + 1}/{len(assignments)}] {candidate.name:<36} {compile_s}  {outcome}")
    if all(c.artifact is None for c in candidates.candidates.values()):
        raise KilnError("no candidate compiled; see the errors above", stage=STAGE)
    machine, compiled_with = environment("cpu")
    bundle = Bundle(
        target=base.target,
        driver=get_target(base.target).driver,
        created=_now(),
        command=command,
        compiled_on=machine,
        versions=compiled_with,
        settings={
            "key": key_of(fields),
            "key_fields": fields,
            "compile_with": command_for(["kiln", "compile"], ref, base) + " --tuned",
        },
        entries=tuple(candidates.candidates.values()),
    )
    bundle.write(folder)
    return bundle


def accept(folder: Path, min_gain: float, progress: Progress) -> TuneEntry:
    """Store the winner of a measured tuning folder in the cache; returns the entry."""
    plan, measured = Bundle.read(folder), Measured.read(folder)
    found = {m.name: m for m in measured.measurements}
    default = found.get(plan.entries[0].name)
    if default is None or default.median_ms is None:
        why = default.error if default is not None else "not measured"
        raise KilnError(f"kiln's default was rejected where it was measured ({why}); nothing to tune against", stage=STAGE)
    fastest = min((m for m in found.values() if m.median_ms is not None), key=lambda m: m.median_ms or 0.0)
    assert fastest.median_ms is not None
    winner = fastest if improves(fastest.median_ms, default.median_ms, min_gain) else default
    for m in sorted(found.values(), key=lambda m: (m.median_ms is None, m.median_ms or 0.0)):
        verdict = f"{m.median_ms / default.median_ms - 1:+.1%} vs default" if m.median_ms else f"rejected: {m.error}"
        progress(f"{m.name:<36} {m.line()}  {verdict}{'  <- winner' if m is winner else ''}")
    here = versions()
    fields = plan.settings["key_fields"]
    made_with = (fields["kiln"], fields["iree_compiler"])
    if made_with != (here["torchkiln"], here["iree-base-compiler"]):
        progress(f"note: prepared with kiln {made_with[0]} / IREE {made_with[1]}; `kiln compile --tuned` here finds it only with those")
    candidate = plan.entry(winner.name)
    entry = TuneEntry(
        key=plan.settings["key"],
        key_fields=fields,
        settings=TunedSettings.from_dict(candidate.labels["settings"]),
        default_ms=default.median_ms,
        tuned_ms=winner.median_ms or default.median_ms,
        candidates=measured.measurements,
        created=_now(),
        machine=measured.machine,
        command=plan.command,
    )
    store(entry)
    return entry


def _retime(
    time_candidate: Callable[[str], Measurement], default: str, best: str, progress: Progress
) -> tuple[float | None, float | None, float | None]:
    """The default and the winner timed alternately, RETIME_ROUNDS rounds: their median times, and
    the median of the winner's time over the default's within each round (a round's two timings see
    about the same load, so the ratio cancels most of it); Nones if either fails."""
    rounds = [(time_candidate(default), time_candidate(best)) for _ in range(RETIME_ROUNDS)]
    times = [(a.median_ms, b.median_ms) for a, b in rounds if a.median_ms is not None and b.median_ms is not None]
    progress(f"re-timed alternately: default {', '.join(_ms(a) for a, _ in rounds)}; {best} {', '.join(_ms(b) for _, b in rounds)}")
    if len(times) < RETIME_ROUNDS:
        return None, None, None
    ratio = statistics.median(b / a for a, b in times)
    progress(f"  the winner's time over the default's, per round: {', '.join(f'{b / a:.2f}' for a, b in times)}; median {ratio:.2f}")
    return statistics.median(a for a, _ in times), statistics.median(b for _, b in times), ratio


def _line(index: int, measurement: Measurement, verdict: str) -> str:
    return f"[{index}] {measurement.name:<36} {measurement.line()}  {verdict}"


def _ms(measurement: Measurement) -> str:
    return f"{measurement.median_ms:.3f} ms" if measurement.median_ms is not None else f"rejected ({measurement.error})"


def _now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
