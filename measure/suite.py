"""The benchmark suite's timing half: a bundle's cases timed against eager and Inductor, reports, tables.

benchmarks/suite.py is the command line; this is its logic on the machine with the device, which
has the runtime but no compiler (kiln.tune.bench is the compiling half, and `kiln bench`'s whole
flow). `time_cases` times every case of a bundle into a results file (`results/<target>-<device>.json`
and `.md`, written after every case so that a run stopped at a deadline keeps what it measured;
`resume` carries on from such a file), `compare_bundles` times two bundles' artifacts of each case
in turn, `collect` rebuilds RESULTS.md from the results files. `bench_case` is the one step both
`kiln bench` and the suite take for a loaded artifact: check, time, record.
"""

from __future__ import annotations

import fnmatch
import gc
import json
import os
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, replace
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import torch

from kiln.runtime.module import LoadedModule, load
from kiln.runtime.tensors import describe_inputs

from .bench import bench, compare_artifacts
from .bundle import Bundle, Entry, entry_digest, open_entry, rebuild
from .overhead import call_overhead
from .results import SCHEMA, CaseResult, Report, Timing, report_markdown
from .timing import (
    CpuClock,
    Settings,
    cpu_clock,
    environment,
    fresh_inductor_cache,
    others_share,
    torch_device_for,
    use_threads,
)

Say = Callable[[str], None]

ONE_ADD = "one_add.vmfb"  # in a bundle: kiln.measure.overhead's model, for the per-call overhead
CASE_TIMEOUT_EXIT = 3  # the exit status of a run stopped by a case past --case-timeout-s
GENERATED = "<!-- Everything below is generated from results/*.json by `python benchmarks/suite.py collect`. -->"


def _silent(line: str) -> None:
    pass


def bench_case(
    case: CaseResult,
    module: LoadedModule,
    model: torch.nn.Module,
    inputs: Sequence[torch.Tensor],
    settings: Settings,
    device: str | None,
    compile_s: float | None,
) -> CaseResult:
    """`case` (its name and labels) with what `bench` found for the loaded artifact: kiln's numerics
    against eager's and the times of kiln, kiln's call, eager and Inductor."""
    numerics, timings, error = bench(module, model, inputs, settings, device, compile_s)
    return replace(case, inputs=describe_inputs(inputs), timings=timings, numerics=numerics, error=error)


def time_cases(
    bundle: Path,
    device: str | None,
    settings: Settings,
    threads: int,
    only: tuple[str, ...],
    resume: Path | None,
    deadline_s: float | None,
    output: Path | None,
    *,
    root: Path,
    results: Path,
    command: str,
    say: Say = _silent,
    case_timeout_s: float | None = None,
) -> Path:
    """Time every compiled case of `bundle` (model files relative to `root`); returns the results file
    (`output`, by default `<results>/<target>-<device>.json`, or `<suite>-<target>-<device>.json` for a
    bundle of another suite than the default one, e.g. benchmarks/real's "real"; its .md is beside it).

    A case still running after `case_timeout_s` is recorded as an error and the process exits with
    CASE_TIMEOUT_EXIT: it may be stuck where Python cannot interrupt it (an artifact's load, a device
    call), so the process is the only thing that can be stopped; `resume` carries on past the case."""
    use_threads(threads)  # before the first artifact is loaded
    data = Bundle.read(bundle)
    cases = [entry for entry in data.entries if not only or any(fnmatch.fnmatch(entry.name, p) for p in only)]
    torch_device = torch_device_for(data.driver, device)
    label = device_label(torch_device)
    suite = data.settings.get("suite")
    output = output or results / f"{suite + '-' if suite else ''}{data.target}-{label}.json"
    done = list(Report.from_json(resume.read_text()).cases) if resume and resume.is_file() else []
    machine, versions = environment(torch_device)
    for name in ("iree-base-compiler", "torch-mlir"):  # what compiled the artifacts, wherever that was
        versions[name] = data.versions[name]
    report = Report(
        target=data.target,
        device=label,
        created=now(),
        command=command,
        machine=machine,
        versions=versions,
        settings={
            **asdict(settings),
            "threads": threads,
            "gpu_arch": data.settings.get("gpu_arch"),
            "compiled_on": data.compiled_on["cpu"],
            "kiln_source": data.settings.get("kiln_source", "unknown"),
            "compile_command": data.command,
            "inductor_cache": "fresh",
            **({"suite": suite} if suite else {}),
        },
        cases=(),
    )
    previous = Report.from_json(resume.read_text()).overhead if resume and resume.is_file() else {}
    report = replace(report, overhead=previous or _time_overhead(bundle, data, device, say))
    fresh_inductor_cache(tempfile.mkdtemp(prefix="kiln-bench-inductor-"))
    order = {case.name: index for index, case in enumerate(cases)}
    start, clock, left = time.perf_counter(), cpu_clock(), []
    for case in cases:
        if case.name in {result.name for result in done}:
            continue
        if deadline_s is not None and time.perf_counter() - start > deadline_s:
            left.append(case.name)
            continue
        say(f"time {case.name} ...")
        with _watchdog(case_timeout_s, lambda case=case: _give_up(report, [*done, _unfinished(case, case_timeout_s)], clock, output, say)):
            done.append(time_entry(case, bundle, device, settings, root))
        done.sort(key=lambda result: order.get(result.name, len(order)))
        gc.collect()  # the case's model and artifact, before the next one's
        if torch.cuda.is_available():
            torch.cuda.empty_cache()
        _write(report, done, clock, output)
    _write(report, done, clock, output)
    if left:
        say(f"{len(left)} case(s) left at the deadline; carry on with --resume {output}")
    return output


@contextmanager
def _watchdog(seconds: float | None, expire: Callable[[], None]) -> Iterator[None]:
    """Calls `expire` from another thread if the block is still running after `seconds` (None: never)."""
    timer = threading.Timer(seconds, expire) if seconds is not None else None
    if timer is not None:
        timer.daemon = True
        timer.start()
    try:
        yield
    finally:
        if timer is not None:
            timer.cancel()


def _unfinished(entry: Entry, seconds: float | None) -> CaseResult:
    labels = entry.labels
    error = f"did not finish within {seconds:g} s (the run stopped there; --resume carries on past it)"
    return CaseResult(entry.name, labels["model"], labels["dtype"], labels["batch"], "", error=error)


def _give_up(report: Report, cases: list[CaseResult], clock: CpuClock | None, output: Path, say: Say) -> None:
    """The results with the stuck case's error written, then the process ended (from the watchdog's thread)."""
    _write(report, cases, clock, output)
    say(f"{cases[-1].name} {cases[-1].error}; wrote {output}")
    os._exit(CASE_TIMEOUT_EXIT)


def time_entry(entry: Entry, bundle: Path, device: str | None, settings: Settings, root: Path) -> CaseResult:
    """One case of the bundle: its model and inputs rebuilt from the model file, its artifact loaded,
    checked and timed; a failure is the result's error, not an exception."""
    labels = entry.labels
    result = CaseResult(
        entry.name, labels["model"], labels["dtype"], labels["batch"], "", error=entry.error,
        artifact=entry_digest(bundle, entry),
    )  # fmt: skip
    if entry.error is not None or entry.artifact is None:
        return result
    try:
        model, inputs = rebuild(entry, root)
        result = replace(result, inputs=describe_inputs(inputs))
        module = open_entry(bundle, entry, device, model)
        return bench_case(result, module, model, inputs, settings, device, entry.compile_s)
    except Exception as exc:  # one case's failure is a result; the run goes on
        return replace(result, error=f"{type(exc).__name__}: {first_line(exc)}")


def _time_overhead(bundle: Path, data: Bundle, device: str | None, say: Say) -> dict[str, Timing]:
    """The per-call overhead, from the bundle's one-add artifact (nothing for bundles without one)."""
    artifact = data.settings.get("overhead", {}).get("artifact")
    if artifact is None:
        return {}
    say("time the per-call overhead ...")
    try:
        return call_overhead(load(bundle / artifact, device), device)
    except Exception as exc:  # a finding, not the end of the run
        say(f"  failed: {type(exc).__name__}: {first_line(exc)}")
        return {}


def compare_bundles(
    bundles: tuple[Path, ...],
    device: str | None,
    settings: Settings,
    threads: int,
    only: tuple[str, ...],
    *,
    root: Path,
    command: str,
    row: Say = _silent,
) -> dict[str, Any]:
    """Every case the bundles share, their artifacts timed in turn (`compare_artifacts`): a change's
    effect measured in one run; returns the comparison as JSON-ready data, `row` given the table's
    lines as they come."""
    use_threads(threads)  # before the first artifact is loaded
    data = [Bundle.read(bundle) for bundle in bundles]
    names = [{entry.name: entry for entry in bundle.entries if entry.artifact is not None} for bundle in data]
    cases = [name for name in names[0] if all(name in other for other in names[1:])]
    cases = [name for name in cases if not only or any(fnmatch.fnmatch(name, pattern) for pattern in only)]
    labels = [bundle.name for bundle in bundles]
    row(f"| case | {' | '.join(f'{label} ms' for label in labels)} | {' | '.join(f'{label} / {labels[0]}' for label in labels[1:])} | numerics (rel L2) |")
    row("|---" * (2 * len(bundles) + 1) + "|")
    rows = []
    for name in cases:
        try:
            model, inputs = rebuild(names[0][name], root)
            modules = [open_entry(bundle, entries[name], device, model) for bundle, entries in zip(bundles, names, strict=True)]
            numerics, timings = compare_artifacts(modules, model, inputs, settings, device)
        except Exception as exc:  # one case's failure is a result; the run goes on
            rows.append({"case": name, "error": f"{type(exc).__name__}: {first_line(exc)}"})
            row(f"| {name} | {rows[-1]['error']} |")
            continue
        medians = [timing.median_ms for timing in timings]
        rows.append({"case": name, "timings": [asdict(t) for t in timings], "numerics": [asdict(n) for n in numerics]})
        errors = ", ".join(f"{'ok' if n.ok else 'MISMATCH'} {n.rel_l2_error:.1e}" for n in numerics)
        ratios = " | ".join(f"{median / medians[0]:.2f}x" for median in medians[1:])
        row(f"| {name} | {' | '.join(f'{median:.3g}' for median in medians)} | {ratios} | {errors} |")
        del model, inputs, modules
        gc.collect()
    machine, versions = environment(torch_device_for(data[0].driver, device))
    return {"created": now(), "command": command, "machine": machine, "versions": versions, "threads": threads,
            "settings": asdict(settings), "bundles": [{"path": str(b), "kiln_source": d.settings.get("kiln_source")} for b, d in zip(bundles, data, strict=True)],
            "cases": rows}  # fmt: skip


def collect(results: Path, destination: Path) -> None:
    """Rewrite RESULTS.md below its GENERATED line from every results/*.json (and each .md beside its .json)."""
    reports = []
    for path in sorted(results.glob("*.json")):
        if json.loads(path.read_text()).get("schema") != SCHEMA:
            continue  # another tool's results
        report = Report.from_json(path.read_text())
        path.with_suffix(".md").write_text(report_markdown(report))
        reports.append(report)
    text = destination.read_text() if destination.is_file() else ""
    preface = text.split(GENERATED)[0].rstrip() if GENERATED in text else text.rstrip()
    sections = "\n\n".join(report_markdown(report) for report in reports)
    destination.write_text(f"{preface}\n\n{GENERATED}\n\n{sections}".lstrip())


def _write(report: Report, cases: list[CaseResult], clock: CpuClock | None, output: Path) -> None:
    """The report so far, with the share of the CPUs other processes took since `clock`."""
    busy = others_share(clock, cpu_clock())
    report = replace(report, machine={**report.machine, "others_cpu_share": busy}).with_cases(cases)
    output.parent.mkdir(parents=True, exist_ok=True)
    output.write_text(report.to_json())
    output.with_suffix(".md").write_text(report_markdown(report))


def device_label(torch_device: str) -> str:
    """"cpu", or the GPU's name without its maker: "NVIDIA H200" -> "h200"."""
    if torch_device == "cpu":
        return "cpu"
    name = torch.cuda.get_device_name(torch.device(torch_device)).lower()
    return name.removeprefix("nvidia ").removeprefix("amd ").replace(" ", "-")


def first_line(exc: BaseException) -> str:
    return (str(exc).strip().splitlines() or [type(exc).__name__])[0]


def now() -> str:
    return datetime.now(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")
