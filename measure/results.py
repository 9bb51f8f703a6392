"""Benchmark results as data: timing statistics, one record per case, ratio tables and JSON.

Pure Python (no torch, no IREE), so results can be written on any machine and merged and tabled on
another. A ratio is kiln's median time over the other contender's: below 1 means kiln is faster.
"""

from __future__ import annotations

import json
import math
import statistics
from collections import Counter
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

SCHEMA = "kiln-bench/1"

# Every contender a case may time, in table order, with what its number includes.
CONTENDERS: dict[str, str] = {
    "kiln": "kiln artifact called with inputs already imported on the device; results where calls write them (CUDA: tensors torch allocates)",
    "kiln_call": "kiln `module(*tensors)` with torch tensors already on the device: checks and boundary included",
    "eager": "eager PyTorch, model and inputs on the device",
    "inductor": "torch.compile (Inductor, default mode), model and inputs on the device",
}
TITLES = {"kiln": "kiln", "kiln_call": "kiln call", "eager": "eager", "inductor": "Inductor"}


@dataclass(frozen=True)
class Timing:
    """`calls` timed calls after warm-up, each ended by a full synchronization with the device."""

    median_ms: float
    min_ms: float
    max_ms: float
    calls: int
    compile_s: float | None = None  # kiln: pipeline wall time; Inductor: first call minus median; eager: 0

    @staticmethod
    def of(samples_ns: Sequence[int], compile_s: float | None = None) -> Timing:
        if not samples_ns:
            raise ValueError("no timed calls")
        ms = [sample / 1e6 for sample in samples_ns]
        return Timing(statistics.median(ms), min(ms), max(ms), len(ms), compile_s)


@dataclass(frozen=True)
class Numerics:
    """kiln's outputs against eager PyTorch's, same inputs, same device; the worst output counts."""

    ok: bool
    rel_l2_error: float  # ||kiln - eager|| / ||eager||
    max_abs_error: float
    tolerance: float  # on rel_l2_error
    # where kiln failed against eager's 16-bit outputs: kiln's and eager's rel. L2 from the f32 model's,
    # which then decide `ok` (measure/bench.py)
    f32_rel_l2: tuple[float, float] | None = None

    @classmethod
    def loaded(cls, data: dict[str, Any]) -> Numerics:
        """From its JSON form (a list where the field is a pair)."""
        pair = data.get("f32_rel_l2")
        return cls(**{**data, "f32_rel_l2": tuple(pair) if pair is not None else None})


@dataclass(frozen=True)
class CaseResult:
    """One model at one batch size and dtype: its timings, or why it has none."""

    name: str  # "<model>-<dtype>-<batch>"; for `kiln bench`, the model file's stem
    model: str
    dtype: str  # "f32", "bf16", or for `kiln bench` the first input's dtype
    batch: str  # "small", "large", or "" for `kiln bench`
    inputs: str  # e.g. "f32[64, 1024]"
    timings: dict[str, Timing] = field(default_factory=dict)
    numerics: Numerics | None = None
    error: str | None = None  # why a contender is missing, e.g. "kiln compile failed: ..."
    artifact: str | None = None  # SHA-256 of the artifact timed (bundle.entry_digest); None before 2026-12

    def ratio(self, other: str, kiln: str = "kiln") -> float | None:
        """kiln's median time over `other`'s; None when either was not timed."""
        if kiln not in self.timings or other not in self.timings:
            return None
        return self.timings[kiln].median_ms / self.timings[other].median_ms

    @property
    def comparable(self) -> bool:
        """Counted in the summary: numerics checked and within tolerance."""
        return self.numerics is not None and self.numerics.ok


@dataclass(frozen=True)
class Report:
    """One run: every case for one target on one device, and how the numbers were made."""

    target: str
    device: str
    created: str  # ISO 8601, UTC
    command: str
    machine: dict[str, Any]
    versions: dict[str, str]
    settings: dict[str, Any]
    cases: tuple[CaseResult, ...]
    schema: str = SCHEMA
    # The per-call overhead: kiln.measure.overhead's one-add model, by contender ("kiln_call",
    # "kiln", "eager"); empty where it was not measured.
    overhead: dict[str, Timing] = field(default_factory=dict)

    def to_json(self) -> str:
        return json.dumps(asdict(self), indent=2) + "\n"

    @staticmethod
    def from_json(text: str) -> Report:
        data: dict[str, Any] = json.loads(text)
        if data.get("schema") != SCHEMA:
            raise ValueError(f"not a {SCHEMA} report (schema: {data.get('schema')!r})")
        data["cases"] = tuple(_case(case) for case in data["cases"])
        data["overhead"] = {name: Timing(**timing) for name, timing in data.get("overhead", {}).items()}
        return Report(**data)

    def with_cases(self, cases: Iterable[CaseResult]) -> Report:
        return Report(**{**self.__dict__, "cases": tuple(cases)})


@dataclass(frozen=True)
class Summary:
    """The geometric means over one dtype's comparable cases, and the worst case against Inductor."""

    dtype: str
    vs_eager: float | None
    vs_inductor: float | None
    worst: tuple[str, float] | None  # (case name, kiln/Inductor) with the largest ratio
    counted: int  # cases in the means
    left_out: int  # cases with an error or failed numerics


@dataclass(frozen=True)
class Held:
    """The bundle a merge checks its parts' cases against: each case's artifact must be the same bytes
    as this bundle's (SHA-256 by case name), compiled from kiln at `source`. Parts timed from kiln at
    other revisions then count as timings of `source`'s artifacts."""

    source: str
    digests: dict[str, str]


def merge_reports(parts: Sequence[Report], held: Held | None = None) -> Report:
    """One run from the reports of its parts: the shards of a run timed side by side on a host's
    GPUs, or the calls a device's time limit cut it into. The parts must have timed one kiln source
    with one set of versions on one kind of device, or, with `held`, artifacts byte-identical to
    `held`'s, wherever compiled; a case timed twice is an error, not a choice, except that with
    `held` a timing of an artifact that has since changed gives way to one of `held`'s artifact (the
    changed cases timed again; `settings["superseded"]` names them). Each part's command and start
    stay in `settings["parts"]`; the others' share of the CPUs is the largest of any part's."""
    if not parts:
        raise ValueError("no reports to merge")
    first = parts[0]
    for part in parts[1:]:
        for what in ("target", "device", "versions"):
            if getattr(part, what) != getattr(first, what):
                raise ValueError(f"the parts differ in {what}: {getattr(first, what)} and {getattr(part, what)}")
    sources = list(dict.fromkeys(part.settings.get("kiln_source") for part in parts))
    if len(sources) > 1 and held is None:
        raise ValueError(
            f"the parts timed different kiln sources: {', '.join(map(str, sources))} (a bundle whose "
            "artifacts are the same bytes as every part's lets them merge)"
        )
    cases = [case for part in parts for case in part.cases]
    superseded: list[str] = []
    if held is not None:
        cases, superseded = _timed_again(cases, held)
        _check_held(cases, held)
    twice = sorted(name for name, count in Counter(case.name for case in cases).items() if count > 1)
    if twice:
        raise ValueError(f"cases timed in more than one part: {', '.join(twice)}")
    shares = [part.machine["others_cpu_share"] for part in parts if part.machine.get("others_cpu_share") is not None]
    compiled = list(dict.fromkeys(part.settings.get("compile_command") for part in parts if part.settings.get("compile_command")))
    return Report(
        target=first.target,
        device=first.device,
        created=min(part.created for part in parts),
        command=" ; ".join(dict.fromkeys(part.command for part in parts)),
        machine={**first.machine, **({"others_cpu_share": max(shares)} if shares else {})},
        versions=first.versions,
        settings={
            **first.settings,
            **({"kiln_source": held.source, "timed_sources": sources} if held is not None else {}),
            **({"superseded": superseded} if superseded else {}),
            **({"compile_command": " ; ".join(compiled)} if compiled else {}),
            "parts": [{"created": part.created, "command": part.command, "cases": len(part.cases)} for part in parts],
        },
        cases=tuple(cases),
        overhead=next((part.overhead for part in parts if part.overhead), {}),
    )


def _timed_again(cases: Sequence[CaseResult], held: Held) -> tuple[list[CaseResult], list[str]]:
    """`cases` less the timings of artifacts other than `held`'s where the same case was timed
    again on `held`'s artifact, and the names of the cases that were."""
    def held_bytes(case: CaseResult) -> bool:
        return case.artifact is not None and case.artifact == held.digests.get(case.name)

    current = {case.name for case in cases if held_bytes(case)}
    stale = {case.name for case in cases if case.name in current and not held_bytes(case)}
    return [case for case in cases if case.name not in stale or held_bytes(case)], sorted(stale)


def _check_held(cases: Sequence[CaseResult], held: Held) -> None:
    """Every timed case's artifact is the held bundle's, byte for byte; a case without an artifact
    (its compile failed) must have none there either."""
    wrong = []
    for case in cases:
        expected = held.digests.get(case.name)
        if case.artifact != expected:
            recorded = case.artifact[:12] if case.artifact else "no digest recorded"
            wrong.append(f"{case.name} ({recorded}, the bundle's {expected[:12] if expected else 'none'})")
    if wrong:
        raise ValueError(f"not the same bytes as the bundle's artifacts: {', '.join(wrong)}")


def geomean(values: Sequence[float]) -> float | None:
    if not values:
        return None
    return math.exp(sum(math.log(value) for value in values) / len(values))


def summarize(cases: Sequence[CaseResult]) -> tuple[Summary, ...]:
    dtypes = list(dict.fromkeys(case.dtype for case in cases))
    return tuple(_summary(dtype, [case for case in cases if case.dtype == dtype]) for dtype in dtypes)


def worst_per_model(cases: Sequence[CaseResult]) -> dict[str, tuple[str, float]]:
    """model -> (case name, kiln/Inductor) of its slowest comparable case against Inductor."""
    worst: dict[str, tuple[str, float]] = {}
    for case in cases:
        ratio = case.ratio("inductor")
        if case.comparable and ratio is not None and ratio > worst.get(case.model, ("", -1.0))[1]:
            worst[case.model] = (case.name, ratio)
    return worst


def _summary(dtype: str, cases: list[CaseResult]) -> Summary:
    counted = [case for case in cases if case.comparable]
    vs_eager = [r for r in (case.ratio("eager") for case in counted) if r is not None]
    vs_inductor = [(case.name, r) for case in counted if (r := case.ratio("inductor")) is not None]
    return Summary(
        dtype=dtype,
        vs_eager=geomean(vs_eager),
        vs_inductor=geomean([r for _, r in vs_inductor]),
        worst=max(vs_inductor, key=lambda item: item[1]) if vs_inductor else None,
        counted=len(counted),
        left_out=len(cases) - len(counted),
    )


# ---------------------------------------------------------------------------------------------------
# Tables (markdown, which also reads well in a terminal)


def suite_table(cases: Sequence[CaseResult]) -> str:
    """One row per case: median times, the two ratios, compile times, numerics; then the summary."""
    header = (
        "| case | inputs | kiln ms | kiln call ms | eager ms | Inductor ms "
        "| kiln/eager | kiln/Inductor | compile s kiln / Inductor | numerics (rel L2) |"
    )
    lines = [header, "|" + "---|" * 10]
    for case in cases:
        times = [_cell(case.timings.get(name)) for name in CONTENDERS]
        compile_s = f"{_seconds(case.timings.get('kiln'))} / {_seconds(case.timings.get('inductor'))}"
        lines.append(
            f"| {case.name} | {case.inputs} | {' | '.join(times)} | {_ratio(case.ratio('eager'))} "
            f"| {_ratio(case.ratio('inductor'))} | {compile_s} | {_numerics(case)} |"
        )
    notes = [f"- {case.name}: {case.error}" for case in cases if case.error]
    return "\n".join(lines) + "\n\n" + summary_table(cases) + ("\n" + "\n".join(notes) + "\n" if notes else "")


def report_markdown(report: Report) -> str:
    """A report as a markdown section: where, when and how the numbers were made, then the table."""
    machine = report.machine
    gpu = f"; GPU: {machine['gpu']}" if "gpu" in machine else ""
    tf32 = machine.get("torch_tf32")
    if tf32:
        gpu += f" (torch TF32: matmul {_on(tf32['matmul'])}, cuDNN convolutions {_on(tf32['cudnn'])})"
    suite = f"{report.settings['suite']}: " if report.settings.get("suite") else ""  # another suite than the default one
    lines = [
        f"## {suite}{report.target} on {report.device}" + (f" ({machine['cores']} cores)" if report.device == "cpu" and "cores" in machine else ""),
        "",
        f"- date: {report.created}",
        f"- machine: {machine.get('cpu')}, {machine.get('cores')} cores{gpu}; "
        f"{machine.get('threads')} CPU threads for torch and for IREE; other processes used "
        f"{_share(machine.get('others_cpu_share'))} of the CPUs meanwhile (load average at the start: "
        f"{machine.get('load_average')})",
        "- versions: " + ", ".join(f"{name} {version}" for name, version in report.versions.items()),
        f"- command: `{report.command}`",
        "- settings: " + ", ".join(f"{name}={value}" for name, value in report.settings.items()),
        "- times are medians in ms; a ratio is kiln's time over the other's (below 1: kiln is faster). Columns:",
        *(f"  - {TITLES[name]}: {meaning}" for name, meaning in CONTENDERS.items()),
        *([f"- {overhead_line(report.overhead)}"] if report.overhead else []),
        "",
        suite_table(report.cases),
    ]
    return "\n".join(lines)


def summary_table(cases: Sequence[CaseResult]) -> str:
    lines = [
        "| dtype | geomean kiln/eager | geomean kiln/Inductor | worst kiln/Inductor | cases counted |",
        "|---|---|---|---|---|",
    ]
    for summary in summarize(cases):
        worst = f"{_ratio(summary.worst[1])} ({summary.worst[0]})" if summary.worst else "-"
        left_out = f" ({summary.left_out} left out)" if summary.left_out else ""
        lines.append(
            f"| {summary.dtype} | {_ratio(summary.vs_eager)} | {_ratio(summary.vs_inductor)} | {worst} "
            f"| {summary.counted}{left_out} |"
        )
    worst = worst_per_model(cases)
    if worst:
        lines += ["", "| model | worst case | kiln/Inductor |", "|---|---|---|"]
        lines += [f"| {model} | {name} | {_ratio(ratio)} |" for model, (name, ratio) in worst.items()]
    return "\n".join(lines) + "\n"


def case_table(case: CaseResult) -> str:
    """`kiln bench`'s table: one row per contender, with min and max, and kiln against it."""
    lines = [
        f"{case.name}: {case.inputs}; numerics {_numerics(case)}",
        "",
        "| contender | median ms | min ms | max ms | calls | compile s | kiln / this |",
        "|---|---|---|---|---|---|---|",
    ]
    for name, timing in case.timings.items():
        lines.append(
            f"| {TITLES.get(name, name)} | {_ms(timing.median_ms)} | {_ms(timing.min_ms)} | {_ms(timing.max_ms)} "
            f"| {timing.calls} | {_seconds(timing)} | {_ratio(case.ratio(name))} |"
        )
    if case.error:
        lines += ["", f"note: {case.error}"]
    return "\n".join(lines) + "\n"


def overhead_line(overhead: dict[str, Timing]) -> str:
    """The per-call overhead in words, e.g. "per-call overhead (one add on f32[1], median): kiln call 9.1 us, ..."."""
    parts = [f"{TITLES[name]} {timing.median_ms * 1e3:.1f} us" for name, timing in overhead.items()]
    return f"per-call overhead (one add on f32[1], median): {', '.join(parts)}"


def _share(value: float | None) -> str:
    return "an unknown share" if value is None else f"{value:.0%}"


def _on(flag: bool) -> str:
    return "on" if flag else "off"


def _cell(timing: Timing | None) -> str:
    return _ms(timing.median_ms) if timing else "-"


def _ms(value: float) -> str:
    return f"{value:.3g}" if value < 100 else f"{value:.0f}"


def _seconds(timing: Timing | None) -> str:
    return "-" if timing is None or timing.compile_s is None else f"{timing.compile_s:.1f}"


def _ratio(value: float | None) -> str:
    return "-" if value is None else f"{value:.2f}x"


def _numerics(case: CaseResult) -> str:
    if case.numerics is None:
        return "error (see notes)" if case.error else "-"
    verdict = "ok" if case.numerics.ok else "MISMATCH"
    if case.numerics.f32_rel_l2 is not None:
        kiln, eager = case.numerics.f32_rel_l2
        return f"{verdict} ({case.numerics.rel_l2_error:.1e}; from f32: kiln {kiln:.1e}, eager {eager:.1e})"
    return f"{verdict} ({case.numerics.rel_l2_error:.1e})"


def _case(data: dict[str, Any]) -> CaseResult:
    timings = {name: Timing(**timing) for name, timing in data["timings"].items()}
    numerics = Numerics.loaded(data["numerics"]) if data.get("numerics") else None
    return CaseResult(**{**data, "timings": timings, "numerics": numerics})
